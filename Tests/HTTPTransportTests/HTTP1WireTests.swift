import NIOCore
import PaypipeCore
import TestSupport
import Testing

@testable import HTTPTransport

@Suite("HTTP/1.1 on the wire: request bytes, and responses read whole, split anywhere, or refused")
struct HTTP1WireTests {
    static let target = Target(url: "http://127.0.0.1:8080/v3/recurring/auth/init?x=1")!

    @Test func aRequestIsWrittenWithHostAndLengthAdded() throws {
        let post = try HTTP1Request(
            HTTPRequestSpec(method: .POST, url: "", headers: [HTTPHeader("X-VERIFY", "abc###1")], body: Array(#"{"n":1}"#.utf8)), target: Self.target)
        #expect(
            String(buffer: post.bytes)
                == "POST /v3/recurring/auth/init?x=1 HTTP/1.1\r\nX-VERIFY: abc###1\r\nHost: 127.0.0.1:8080\r\nContent-Length: 7\r\n\r\n{\"n\":1}")
        #expect(post.keepAlive)
        let get = try HTTP1Request(
            HTTPRequestSpec(method: .GET, url: "", headers: [HTTPHeader("host", "api.example"), HTTPHeader("Connection", "Close")]),
            target: Self.target)
        #expect(String(buffer: get.bytes) == "GET /v3/recurring/auth/init?x=1 HTTP/1.1\r\nhost: api.example\r\nConnection: Close\r\n\r\n")
        #expect(!get.keepAlive)
        for (connection, keepsAlive) in [("keep-alive", true), ("Upgrade , CLOSE", false), ("closed", true)] {
            #expect(
                try HTTP1Request(HTTPRequestSpec(method: .GET, url: "", headers: [HTTPHeader("Connection", connection)]), target: Self.target)
                    .keepAlive == keepsAlive)
        }
        let ownLength = try HTTP1Request(
            HTTPRequestSpec(method: .PUT, url: "", headers: [HTTPHeader("CONTENT-length", "2"), HTTPHeader("Hosts", "x")], body: [1, 2]),
            target: Self.target)
        #expect(
            String(buffer: ownLength.bytes)
                == "PUT /v3/recurring/auth/init?x=1 HTTP/1.1\r\nCONTENT-length: 2\r\nHosts: x\r\nHost: 127.0.0.1:8080\r\n\r\n\u{1}\u{2}")
        let emptyPost = try HTTP1Request(HTTPRequestSpec(method: .POST, url: ""), target: Self.target)
        #expect(String(buffer: emptyPost.bytes).hasSuffix("Content-Length: 0\r\n\r\n"))
    }

    /// A header that could end the request early and start another is refused before anything
    /// is sent, and the refusal names the header without its value.
    @Test func aHeaderThatCouldSplitTheRequestIsRefused() {
        let cases: [(HTTPHeader, String)] = [
            (HTTPHeader("X-Sig", "secret-value\r\nX-Evil: 1"), "header X-Sig has a control character in its value"),
            (HTTPHeader("X-Sig", "secret-value\n"), "header X-Sig has a control character in its value"),
            (HTTPHeader("X-Sig", "secret\u{0}value"), "header X-Sig has a control character in its value"),
            (HTTPHeader("X Sig", "v"), #"header name "X Sig" is not an HTTP token"#),
            (HTTPHeader("X-Sig:", "v"), #"header name "X-Sig:" is not an HTTP token"#),
            (HTTPHeader("", "v"), #"header name "" is not an HTTP token"#),
        ]
        for (header, message) in cases {
            #expect(throws: HTTP1Request.Invalid.self) {
                try HTTP1Request(HTTPRequestSpec(method: .POST, url: "", headers: [header]), target: Self.target)
            }
            do {
                _ = try HTTP1Request(HTTPRequestSpec(method: .POST, url: "", headers: [header]), target: Self.target)
            } catch {
                #expect(error.description == message)
                #expect(!error.description.contains("secret"))
            }
        }
        #expect(throws: Never.self) {
            try HTTP1Request(HTTPRequestSpec(method: .GET, url: "", headers: [HTTPHeader("X-Name", "Zoë\tand ünïcode")]), target: Self.target)
        }
    }

    /// Every byte is judged as RFC 9110 judges it: a header name takes exactly the token
    /// characters (§5.6.2), a value every byte but the controls other than tab (§5.5), whether
    /// the request is being written or a response read.
    @Test func everyByteIsATokenOrFieldCharacterExactlyAsTheRFCSays() throws {
        let tchar = Set(Array("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ".utf8))
        for byte in UInt8.min...UInt8.max {
            #expect(HTTPBytes.isToken(byte) == tchar.contains(byte), "byte \(byte)")
            #expect(HTTPBytes.isFieldValue(byte) == (byte == 0x09 || (byte >= 0x20 && byte != 0x7F)), "byte \(byte)")
            guard byte < 0x80 else { continue }
            let name = String(decoding: [UInt8(ascii: "X"), byte], as: UTF8.self)
            let written = Result { try HTTP1Request(HTTPRequestSpec(method: .GET, url: "", headers: [HTTPHeader(name, "v")]), target: Self.target) }
            #expect(((try? written.get()) != nil) == tchar.contains(byte), "name byte \(byte)")
            let value = String(decoding: [UInt8(ascii: "v"), byte, UInt8(ascii: "v")], as: UTF8.self)
            let withValue = Result {
                try HTTP1Request(HTTPRequestSpec(method: .GET, url: "", headers: [HTTPHeader("X", value)]), target: Self.target)
            }
            #expect(((try? withValue.get()) != nil) == HTTPBytes.isFieldValue(byte), "value byte \(byte)")
        }
    }

    /// Parses `wire` fed whole, in two pieces split at every offset, and byte by byte; every way
    /// must give the same response, leaving the same bytes after it.
    func parsedEveryWay(_ wire: String, atClose: Bool = false, maxBodyBytes: Int = 1 << 20) throws -> (HTTP1ResponseParser.Response, leftOver: Int) {
        let bytes = Array(wire.utf8)
        var splits: [[Int]] = [[], Array(1..<max(1, bytes.count))]
        for cut in 1..<max(1, bytes.count) { splits.append([cut]) }
        var results: [(HTTP1ResponseParser.Response, Int)] = []
        for cuts in splits {
            var parser = HTTP1ResponseParser(maxBodyBytes: maxBodyBytes)
            var response: HTTP1ResponseParser.Response?
            var leftOver = 0
            let bounds = [0] + cuts + [bytes.count]
            for (from, to) in zip(bounds, bounds.dropFirst()) where response == nil {
                var buffer = ByteBuffer(bytes: bytes[from..<to])
                response = try parser.parse(&buffer)
                leftOver = buffer.readableBytes + (bytes.count - to)
            }
            if response == nil, atClose { response = try parser.parseEnd() }
            results.append((try #require(response, "split at \(cuts.prefix(3))"), leftOver))
        }
        for (response, leftOver) in results.dropFirst() {
            #expect(response == results[0].0)
            #expect(leftOver == results[0].1)
        }
        return results[0]
    }

    @Test func bodiesAreFramedByLengthChunksOrClose() throws {
        let sized = try parsedEveryWay("HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 8\r\n\r\n{\"a\":42}")
        #expect(
            sized.0.spec
                == HTTPResponseSpec(
                    status: 201, headers: [HTTPHeader("Content-Type", "application/json"), HTTPHeader("Content-Length", "8")],
                    body: Array(#"{"a":42}"#.utf8)))
        #expect(sized.0.keepAlive && sized.leftOver == 0)

        let chunked = try parsedEveryWay(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n5;ext=1\r\n{\"a\":\r\n3\r\n42}\r\n0\r\nX-Trailer: t\r\n\r\n")
        #expect(chunked.0.spec.body == Array(#"{"a":42}"#.utf8))
        #expect(chunked.0.keepAlive)
        let chunkedNoTrailers = try parsedEveryWay("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nA\r\n0123456789\r\n0\r\n\r\n")
        #expect(chunkedNoTrailers.0.spec.body == Array("0123456789".utf8))

        let closeDelimited = try parsedEveryWay("HTTP/1.0 200 OK\r\nServer: old\r\n\r\n{\"late\":true}", atClose: true)
        #expect(closeDelimited.0.spec.body == Array(#"{"late":true}"#.utf8))
        #expect(!closeDelimited.0.keepAlive)

        let bareLF = try parsedEveryWay("HTTP/1.1 200 OK\nContent-Length: 2\n\nok")
        #expect(bareLF.0.spec.status == 200 && bareLF.0.spec.body == Array("ok".utf8))

        let noContent = try parsedEveryWay("HTTP/1.1 204 No Content\r\nX-A:  padded \t\r\n\r\n")
        #expect(noContent.0.spec == HTTPResponseSpec(status: 204, headers: [HTTPHeader("X-A", "padded")]))
    }

    @Test func interimAnswersArePassedOverAndExtraBytesLeftBehind() throws {
        let afterContinue = try parsedEveryWay(
            "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        #expect(afterContinue.0.spec == HTTPResponseSpec(status: 200, headers: [HTTPHeader("Content-Length", "2")], body: Array("ok".utf8)))
        let twoAtOnce = try parsedEveryWay("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nAHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nB")
        #expect(twoAtOnce.0.spec.body == Array("A".utf8))
        #expect(twoAtOnce.leftOver == 39)
    }

    @Test func keepAliveFollowsVersionAndConnectionHeader() throws {
        #expect(try parsedEveryWay("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n").0.keepAlive)
        #expect(try !parsedEveryWay("HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\nContent-Length: 0\r\n\r\n").0.keepAlive)
        #expect(try !parsedEveryWay("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n").0.keepAlive)
        #expect(try parsedEveryWay("HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n").0.keepAlive)
        #expect(try !parsedEveryWay("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nzz", atClose: true).0.keepAlive)
        #expect(try parsedEveryWay("HTTP/1.1 200 OK\r\nContent-Length: 3, 3\r\n\r\nabc").0.spec.body == Array("abc".utf8))
    }

    /// Each is refused whole or split anywhere, and the parser stays refused afterwards.
    @Test func ambiguousOrMalformedResponsesAreRefused() {
        let refused: [(String, String)] = [
            (
                "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
                "response has both Content-Length and Transfer-Encoding"
            ),
            ("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nabc", "response Content-Length is not one non-negative integer"),
            ("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "response Content-Length is not one non-negative integer"),
            ("HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nab", "response Content-Length is not one non-negative integer"),
            ("HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n", "response Content-Length is not one non-negative integer"),
            ("HTTP/1.1 200 OK\r\nContent-Length: 2000\r\n\r\n", "response body over 1000 bytes"),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3E9\r\n", "response body over 1000 bytes"),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "malformed chunk size"),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n", "chunk's end over 2 bytes"),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\n", "chunk data is longer than its size"),
            ("HTTP/2 200\r\n\r\n", "malformed response status line"),
            ("HTTP/1.1 20 OK\r\n\r\n", "malformed response status line"),
            ("HTTP/1.1 099 Low\r\n\r\n", "response status 99 is out of range"),
            ("HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n", "unexpected 101 Switching Protocols"),
            ("HTTP/1.1 200 OK\r\nNo colon here\r\n\r\n", "malformed header line in the response"),
            ("HTTP/1.1 200 OK\r\nX-A: 1\r\n folded: 2\r\n\r\n", "malformed header line in the response"),
            ("HTTP/1.1 200 OK\r\nX-A : 1\r\n\r\n", "malformed header line in the response"),
            ("HTTP/1.1 200 OK\r\nX-A: a\u{1}b\r\n\r\n", "header X-A in the response has a control character"),
            ("HTTP/1.1 200 OK\r\nX-Long: " + String(repeating: "a", count: 70_000), "response head over 65536 bytes"),
        ]
        for (wire, message) in refused {
            let bytes = Array(wire.utf8)
            for cut in [bytes.count, bytes.count / 2, 9, 1] {
                var parser = HTTP1ResponseParser(maxBodyBytes: 1000)
                var failure: HTTP1ResponseParser.Failure?
                for piece in [bytes[..<cut], bytes[cut...]] where failure == nil {
                    var buffer = ByteBuffer(bytes: piece)
                    do { _ = try parser.parse(&buffer) } catch { failure = error }
                }
                #expect(failure?.description == message, "\(wire.prefix(60)) cut at \(cut)")
                var next = ByteBuffer(string: "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                #expect(throws: HTTP1ResponseParser.Failure.self) { try parser.parse(&next) }
            }
        }
    }

    @Test func aResponseCutShortByCloseIsRefused() throws {
        for wire in [
            "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",
            "HTTP/1.1 200 OK\r\nContent-Le",
        ] {
            var parser = HTTP1ResponseParser(maxBodyBytes: 1000)
            var buffer = ByteBuffer(string: wire)
            #expect(try parser.parse(&buffer) == nil)
            #expect(throws: HTTP1ResponseParser.Failure(description: "connection closed before the response ended")) { try parser.parseEnd() }
        }
    }
}

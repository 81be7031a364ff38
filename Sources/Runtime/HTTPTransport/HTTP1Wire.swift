import NIOCore
import PaypipeCore

/// A provider request as the bytes that go on the wire: request line, headers, body, in one
/// buffer written once. NIO's HTTP/1.1 codec would write three parts per request and decode
/// three per response through the channel pipeline; a provider call needs neither its
/// generality nor its allocations.
package struct HTTP1Request: Sendable {
    package var bytes: ByteBuffer
    /// False when the request itself asks to close the connection after the answer.
    package var keepAlive: Bool

    package struct Invalid: Error, CustomStringConvertible {
        package var description: String
    }

    /// Adds `Host` and `Content-Length` when the spec has none. Header names must be tokens and
    /// values must hold no control characters (RFC 9110 §5.1, §5.5), so that nothing a
    /// connector put in a header can end it early and smuggle another; a refused header is
    /// named, its value never shown (it may be a signature or a key).
    package init(_ spec: HTTPRequestSpec, target: Target) throws(Invalid) {
        var hasHost = false, hasLength = false, keepAlive = true
        var size = spec.method.rawValue.utf8.count + target.path.utf8.count + 64 + spec.body.count
        for header in spec.headers {
            let name = header.name.utf8
            guard !name.isEmpty, HTTPBytes.all(header.name, HTTPBytes.isToken) else {
                throw Invalid(description: "header name \(Self.shown(header.name)) is not an HTTP token")
            }
            guard HTTPBytes.all(header.value, HTTPBytes.isFieldValue) else {
                throw Invalid(description: "header \(header.name) has a control character in its value")
            }
            size += header.name.utf8.count + header.value.utf8.count + 4
            if HTTPBytes.equalsIgnoringCase(name, "host") {
                hasHost = true
            } else if HTTPBytes.equalsIgnoringCase(name, "content-length") {
                hasLength = true
            } else if HTTPBytes.equalsIgnoringCase(name, "connection"), HTTPBytes.list(Array(header.value.utf8)[...], contains: "close") {
                keepAlive = false
            }
        }
        var bytes = ByteBufferAllocator().buffer(capacity: size)
        bytes.writeString(spec.method.rawValue)
        bytes.writeInteger(UInt8(ascii: " "))
        bytes.writeString(target.path)
        bytes.writeStaticString(" HTTP/1.1\r\n")
        for header in spec.headers { Self.write(header.name, header.value, into: &bytes) }
        if !hasHost { Self.write("Host", target.hostHeader, into: &bytes) }
        if !hasLength, !spec.body.isEmpty || spec.method == .POST || spec.method == .PUT {
            Self.write("Content-Length", String(spec.body.count), into: &bytes)
        }
        bytes.writeStaticString("\r\n")
        bytes.writeBytes(spec.body)
        self.bytes = bytes
        self.keepAlive = keepAlive
    }

    private static func write(_ name: String, _ value: String, into bytes: inout ByteBuffer) {
        bytes.writeString(name)
        bytes.writeStaticString(": ")
        bytes.writeString(value)
        bytes.writeStaticString("\r\n")
    }

    /// A name that is not a token, shown escaped and cut short.
    private static func shown(_ name: String) -> String {
        String(String(reflecting: String(name.prefix(40))))
    }
}

/// Reads one HTTP/1.1 response at a time from the bytes of a connection, as they arrive: the
/// status line and headers, then the body as `Content-Length`, chunked or close-delimited
/// framing says (RFC 9112 §6). Strict where laxness lets one response pass for another: both
/// `Content-Length` and `Transfer-Encoding`, conflicting lengths, folded or malformed header
/// lines and bodies over the limit are errors, and the connection is not used again.
package struct HTTP1ResponseParser {
    package struct Response: Equatable {
        package var spec: HTTPResponseSpec
        /// The connection can carry another request: HTTP/1.1 without `Connection: close`, or
        /// HTTP/1.0 with `keep-alive`, a framed body and nothing after it.
        package var keepAlive: Bool
    }

    package struct Failure: Error, Equatable, CustomStringConvertible {
        package var description: String
    }

    static let maxHeadBytes = 64 << 10

    private enum State {
        case head
        case body(remaining: Int)
        case chunkSize
        case chunkData(remaining: Int)
        case chunkDataEnd
        case trailers
        case untilClose
        case failed
    }

    let maxBodyBytes: Int
    private var state = State.head
    /// Bytes of a head, line or trailer section that has not all arrived yet.
    private var pending: [UInt8] = []
    /// How many of `pending`'s bytes belong to the line not yet ended.
    private var lineLength = 0
    private var status = 0
    private var headers: [HTTPHeader] = []
    private var keepAlive = true
    private var body: [UInt8] = []

    package init(maxBodyBytes: Int) {
        self.maxBodyBytes = maxBodyBytes
    }

    /// Consumes `bytes` up to the end of one response and returns it; nil if more bytes are
    /// needed. Bytes after the response are left in `bytes`.
    package mutating func parse(_ bytes: inout ByteBuffer) throws(Failure) -> Response? {
        do throws(Failure) {
            while bytes.readableBytes > 0 {
                switch state {
                case .failed: throw Failure(description: "the connection's earlier response could not be read")
                case .head:
                    guard let head = try take(from: &bytes, untilBlankLine: true, limit: Self.maxHeadBytes, what: "response head") else { return nil }
                    if let response = try begin(head) { return response }
                case .body(let remaining):
                    let count = appendBody(upTo: remaining, from: &bytes)
                    if remaining == count { return complete() }
                    state = .body(remaining: remaining - count)
                case .chunkSize:
                    guard let line = try take(from: &bytes, untilBlankLine: false, limit: 1024, what: "chunk size line") else { return nil }
                    let size = try chunkSize(Self.withoutTerminator(line))
                    guard body.count + size <= maxBodyBytes else { throw Failure(description: "response body over \(maxBodyBytes) bytes") }
                    state = size == 0 ? .trailers : .chunkData(remaining: size)
                case .chunkData(let remaining):
                    let count = appendBody(upTo: remaining, from: &bytes)
                    state = remaining == count ? .chunkDataEnd : .chunkData(remaining: remaining - count)
                case .chunkDataEnd:
                    guard let line = try take(from: &bytes, untilBlankLine: false, limit: 2, what: "chunk's end") else { return nil }
                    guard Self.withoutTerminator(line).isEmpty else { throw Failure(description: "chunk data is longer than its size") }
                    state = .chunkSize
                case .trailers:
                    // Trailer fields are read past, not kept: nothing a provider answers with
                    // depends on them.
                    guard try take(from: &bytes, untilBlankLine: true, limit: Self.maxHeadBytes, what: "trailer section") != nil else {
                        return nil
                    }
                    return complete()
                case .untilClose:
                    guard body.count + bytes.readableBytes <= maxBodyBytes else {
                        throw Failure(description: "response body over \(maxBodyBytes) bytes")
                    }
                    _ = appendBody(upTo: bytes.readableBytes, from: &bytes)
                }
            }
            return nil
        } catch {
            state = .failed
            throw error
        }
    }

    /// The connection closed: a close-delimited body ends here; any other response in progress
    /// is cut short.
    package mutating func parseEnd() throws(Failure) -> Response? {
        switch state {
        case .untilClose: return complete()
        default:
            state = .failed
            throw Failure(description: "connection closed before the response ended")
        }
    }

    private mutating func appendBody(upTo limit: Int, from bytes: inout ByteBuffer) -> Int {
        let count = min(limit, bytes.readableBytes)
        if body.isEmpty, count == limit {
            body = bytes.readBytes(length: count) ?? []
        } else {
            bytes.withUnsafeReadableBytes { body.append(contentsOf: UnsafeRawBufferPointer(rebasing: $0.prefix(count))) }
            bytes.moveReaderIndex(forwardBy: count)
        }
        return count
    }

    /// One line (ended by CRLF or a bare LF), or with `untilBlankLine` every line up to and
    /// including the first empty one, terminators included; nil when it has not all arrived.
    private mutating func take(from bytes: inout ByteBuffer, untilBlankLine: Bool, limit: Int, what: String) throws(Failure) -> [UInt8]? {
        let view = bytes.readableBytesView
        var from = view.startIndex
        while let lf = view[from...].firstIndex(of: UInt8(ascii: "\n")) {
            let length = lineLength + (lf - from)
            let lastBeforeLF = lf > from ? view[lf - 1] : pending.last
            let isBlank = length == 0 || (length == 1 && lastBeforeLF == UInt8(ascii: "\r"))
            from = lf + 1
            lineLength = 0
            guard !untilBlankLine || isBlank else { continue }
            guard pending.count + (from - view.startIndex) <= limit else { throw Failure(description: "\(what) over \(limit) bytes") }
            var unit = pending
            pending = []
            unit.append(contentsOf: view[view.startIndex..<from])
            bytes.moveReaderIndex(forwardBy: from - view.startIndex)
            return unit
        }
        lineLength += view.endIndex - from
        pending.append(contentsOf: view)
        bytes.moveReaderIndex(forwardBy: view.count)
        guard pending.count <= limit else { throw Failure(description: "\(what) over \(limit) bytes") }
        return nil
    }

    private static func withoutTerminator(_ line: [UInt8]) -> ArraySlice<UInt8> {
        var line = line[...]
        if line.last == UInt8(ascii: "\n") { line = line.dropLast() }
        if line.last == UInt8(ascii: "\r") { line = line.dropLast() }
        return line
    }

    /// The status line and headers; decides the framing of the body.
    private mutating func begin(_ bytes: [UInt8]) throws(Failure) -> Response? {
        let head = try bytes.withUnsafeBufferPointer { bytes throws(Failure) in try Head(bytes) }
        if (100..<200).contains(head.code) {
            // Interim answers (100 Continue, 103 Early Hints) come before the real one; a
            // switch of protocols is nothing this client asked for.
            guard head.code != 101 else { throw Failure(description: "unexpected 101 Switching Protocols") }
            return nil
        }
        keepAlive = head.version == 1 ? !head.close : head.keepAliveAsked && !head.close
        status = head.code
        headers = head.headers
        body = []
        if head.code == 204 || head.code == 304 { return complete() }
        if head.hasTransferEncoding {
            guard head.length == nil else { throw Failure(description: "response has both Content-Length and Transfer-Encoding") }
            if head.chunkedLast {
                state = .chunkSize
            } else {
                state = .untilClose
                keepAlive = false
            }
            return nil
        }
        if let length = head.length {
            guard length <= maxBodyBytes else { throw Failure(description: "response body over \(maxBodyBytes) bytes") }
            if length == 0 { return complete() }
            state = .body(remaining: length)
            return nil
        }
        state = .untilClose
        keepAlive = false
        return nil
    }

    /// What a response head says, read in place line by line: splitting the head into slices
    /// and mapping them would retain and release each line several times.
    private struct Head {
        var version = 0, code = 0
        var headers: [HTTPHeader] = []
        var length: Int?
        var hasTransferEncoding = false, chunkedLast = false, close = false, keepAliveAsked = false

        /// `bytes`: the head up to and including its blank line (`take(untilBlankLine:)`); a
        /// line ends with CRLF or a bare LF.
        init(_ bytes: UnsafeBufferPointer<UInt8>) throws(Failure) {
            var start = 0, isStatusLine = true
            while start < bytes.count {
                var end = start
                while end < bytes.count, bytes[end] != UInt8(ascii: "\n") { end += 1 }
                let next = end + 1
                if end > start, bytes[end - 1] == UInt8(ascii: "\r") { end -= 1 }
                let line = UnsafeBufferPointer(rebasing: bytes[start..<end])
                start = next
                if line.isEmpty { break }
                if isStatusLine {
                    (version, code) = try HTTP1ResponseParser.statusLine(line)
                    isStatusLine = false
                } else {
                    try header(line)
                }
            }
            if isStatusLine { throw Failure(description: "empty response head") }
        }

        private mutating func header(_ line: UnsafeBufferPointer<UInt8>) throws(Failure) {
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > 0, line[..<colon].allSatisfy(HTTPBytes.isToken) else {
                throw Failure(description: "malformed header line in the response")
            }
            let nameBytes = UnsafeBufferPointer(rebasing: line[..<colon])
            let name = String(decoding: nameBytes, as: UTF8.self)
            let value = UnsafeBufferPointer(rebasing: HTTPBytes.trimmed(line[(colon + 1)...]))
            guard value.allSatisfy(HTTPBytes.isFieldValue) else {
                throw Failure(description: "header \(name) in the response has a control character")
            }
            headers.append(HTTPHeader(name, String(decoding: value, as: UTF8.self)))
            if HTTPBytes.equalsIgnoringCase(nameBytes, "content-length") {
                // "n, n" is allowed (RFC 9110 §8.6); anything that is not one length is refused.
                for item in value.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false) {
                    let digits = HTTPBytes.trimmed(item)
                    guard !digits.isEmpty, digits.count <= 18, digits.allSatisfy(HTTPBytes.isDigit) else {
                        throw Failure(description: "response Content-Length is not one non-negative integer")
                    }
                    let n = digits.reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) }
                    guard length == nil || length == n else { throw Failure(description: "response Content-Length is not one non-negative integer") }
                    length = n
                }
            } else if HTTPBytes.equalsIgnoringCase(nameBytes, "transfer-encoding") {
                hasTransferEncoding = true
                let last = value.split(separator: UInt8(ascii: ",")).last ?? value[...]
                chunkedLast = HTTPBytes.equalsIgnoringCase(HTTPBytes.trimmed(last), "chunked")
            } else if HTTPBytes.equalsIgnoringCase(nameBytes, "connection") {
                close = close || HTTPBytes.list(value, contains: "close")
                keepAliveAsked = keepAliveAsked || HTTPBytes.list(value, contains: "keep-alive")
            }
        }
    }

    /// `HTTP/1.x NNN reason`: the minor version and the status code.
    private static let httpVersionPrefix = Array("HTTP/1.".utf8)

    fileprivate static func statusLine(_ line: UnsafeBufferPointer<UInt8>) throws(Failure) -> (Int, Int) {
        let start = line.startIndex
        let minor = start + 7, digits = (start + 9)..<(start + 12)
        guard line.count >= 12, line.starts(with: httpVersionPrefix), line[minor] == UInt8(ascii: "0") || line[minor] == UInt8(ascii: "1"),
            line[start + 8] == UInt8(ascii: " "), line[digits].allSatisfy(HTTPBytes.isDigit),
            line.count == 12 || line[start + 12] == UInt8(ascii: " ")
        else { throw Failure(description: "malformed response status line") }
        let code = line[digits].reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) }
        guard (100...599).contains(code) else { throw Failure(description: "response status \(code) is out of range") }
        return (Int(line[minor] - UInt8(ascii: "0")), code)
    }

    /// A chunk-size line: hex digits, then optional extensions after `;`.
    private func chunkSize(_ line: ArraySlice<UInt8>) throws(Failure) -> Int {
        let digits = line.prefix { $0 != UInt8(ascii: ";") && $0 != 0x20 && $0 != 0x09 }
        guard !digits.isEmpty, digits.count <= 8 else { throw Failure(description: "malformed chunk size") }
        var size = 0
        for digit in digits {
            let value: Int
            switch digit {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = Int(digit - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): value = Int(digit - UInt8(ascii: "a")) + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): value = Int(digit - UInt8(ascii: "A")) + 10
            default: throw Failure(description: "malformed chunk size")
            }
            size = size * 16 + value
        }
        return size
    }

    private mutating func complete() -> Response {
        let response = Response(spec: HTTPResponseSpec(status: status, headers: headers, body: body), keepAlive: keepAlive)
        state = .head
        headers = []
        body = []
        return response
    }
}

/// The byte classes and comparisons of HTTP/1.1's syntax, shared by the request writer and the
/// response parser; every one is ASCII, so none needs a String.
enum HTTPBytes {
    /// A tchar (RFC 9110 §5.6.2): what a header name is made of.
    static func isToken(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"), UInt8(ascii: "'"),
            UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "^"), UInt8(ascii: "_"),
            UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
            true
        default: false
        }
    }

    /// Whether every byte of `text` passes `test`, read from its contiguous UTF-8 (every
    /// native string) rather than through its UTF-8 view one index at a time.
    static func all(_ text: String, _ test: (UInt8) -> Bool) -> Bool {
        text.utf8.withContiguousStorageIfAvailable { $0.allSatisfy(test) } ?? text.utf8.allSatisfy(test)
    }

    /// Visible characters, spaces, tabs and non-ASCII bytes (obs-text): a header value holds
    /// no control character, so none can end its line early.
    static func isFieldValue(_ byte: UInt8) -> Bool {
        byte == 0x09 || (byte >= 0x20 && byte != 0x7F)
    }

    static func isDigit(_ byte: UInt8) -> Bool {
        byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
    }

    /// Without leading and trailing spaces and tabs.
    static func trimmed<Bytes: BidirectionalCollection<UInt8>>(_ bytes: Bytes) -> Bytes.SubSequence {
        var bytes = bytes[...]
        while let first = bytes.first, first == 0x20 || first == 0x09 { bytes = bytes.dropFirst() }
        while let last = bytes.last, last == 0x20 || last == 0x09 { bytes = bytes.dropLast() }
        return bytes
    }

    /// Whether `bytes` spell `lowercase` in any case, compared byte by byte: header names are
    /// checked for every header of every request and response, and a lowercased copy of each
    /// would be an allocation.
    static func equalsIgnoringCase(_ bytes: some Collection<UInt8>, _ lowercase: StaticString) -> Bool {
        guard bytes.count == lowercase.utf8CodeUnitCount else { return false }
        return lowercase.withUTF8Buffer { expected in
            zip(bytes, expected).allSatisfy { byte, want in
                byte == want || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") && byte + 32 == want)
            }
        }
    }

    /// Whether a comma-separated list (a `Connection` value) has `token` as one of its members.
    static func list(_ value: some BidirectionalCollection<UInt8>, contains token: StaticString) -> Bool {
        value.split(separator: UInt8(ascii: ",")).contains { equalsIgnoringCase(trimmed($0), token) }
    }
}

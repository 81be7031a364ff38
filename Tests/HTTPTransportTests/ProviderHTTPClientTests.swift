import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import PaypipeCore
import Supervision
import Synchronization
import TestSupport
import Testing

@testable import HTTPTransport

@Suite("ProviderHTTPClient: keep-alive, timeouts, failures, TLS against real loopback servers")
struct ProviderHTTPClientTests {
    /// Generous timeouts: at the start of the whole suite the machine can stall for seconds, and
    /// a timed-out request would open a second connection.
    func client(timeoutMs: Int64 = 60_000, tls: TLSConfiguration = .makeClientConfiguration()) -> ProviderHTTPClient {
        ProviderHTTPClient(connectTimeoutMilliseconds: 30_000, requestTimeoutMilliseconds: timeoutMs, tlsConfiguration: tls)
    }

    @Test func requestsGoOutAsBuiltAndShareOneKeptAliveConnection() async throws {
        let server = try ScriptedHTTPServer { request in
            .bytes(ScriptedHTTPServer.response(body: #"{"echo":"\#(request.requestLine)"}"#), thenClose: false)
        }
        defer { server.stop() }
        let http = client()
        for n in 0..<20 {
            let request = HTTPRequestSpec(
                method: .POST, url: "http://127.0.0.1:\(server.port)/v3/recurring/auth/init?n=\(n)",
                headers: [HTTPHeader("Content-Type", "application/json"), HTTPHeader("X-VERIFY", "abc###1")], body: Array(#"{"n":\#(n)}"#.utf8))
            guard case .success(let response) = await http.execute(request) else {
                Issue.record("request \(n) failed")
                return
            }
            #expect(response.status == 200)
            #expect(String(decoding: response.body, as: UTF8.self) == #"{"echo":"POST /v3/recurring/auth/init?n=\#(n) HTTP/1.1"}"#)
            #expect(response.header("content-type") == "application/json")
        }
        await http.shutdown()
        #expect(server.connections == 1)
        let first = try #require(server.requests.first)
        #expect(first.header("Host") == "127.0.0.1:\(server.port)")
        #expect(first.header("X-VERIFY") == "abc###1")
        #expect(first.header("Content-Length") == "7")
        #expect(first.body == Array(#"{"n":0}"#.utf8))
    }

    @Test func requestURLsAreTakenApartOrRefused() {
        let v6 = Target(url: "https://[::1]:8443/a?b=c")
        #expect(v6?.origin == Origin(tls: true, host: "::1", port: 8443))
        #expect(v6?.path == "/a?b=c" && v6?.hostHeader == "[::1]:8443")
        let plain = Target(url: "https://api.example.com")
        #expect(plain?.origin == Origin(tls: true, host: "api.example.com", port: 443))
        #expect(plain?.path == "/" && plain?.hostHeader == "api.example.com")
        #expect(plain?.origin.serverName == "api.example.com")
        #expect(Target(url: "http://127.0.0.1:80?x=1")?.path == "/?x=1")
        #expect(Target(url: "http://127.0.0.1/")?.origin.serverName == nil)
        for refused in ["ftp://h/", "http://user:pw@h/", "http://h:0/", "http://h:99999/", "http:///x", "http://h/a#frag", "h/x", "http://[::1/"] {
            #expect(Target(url: refused) == nil, "\(refused)")
        }
    }

    @Test func aConnectionTheServerClosesIsNotReused() async throws {
        let server = try ScriptedHTTPServer { _ in .bytes(ScriptedHTTPServer.response(body: "{}", headers: ["Connection: close"]), thenClose: true) }
        defer { server.stop() }
        let http = client()
        for _ in 0..<3 {
            guard case .success(let response) = await http.execute(HTTPRequestSpec(method: .GET, url: "http://127.0.0.1:\(server.port)/")) else {
                Issue.record("failed")
                return
            }
            #expect(response.status == 200)
        }
        await http.shutdown()
        #expect(server.connections == 3)
        #expect(server.requests.first?.header("Content-Length") == nil)
    }

    @Test func aChunkedBodyIsAssembled() async throws {
        let chunked = Array("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"a\":\r\n3\r\n42}\r\n0\r\n\r\n".utf8)
        let server = try ScriptedHTTPServer { _ in .bytes(chunked, thenClose: false) }
        defer { server.stop() }
        let http = client()
        let result = await http.execute(HTTPRequestSpec(method: .GET, url: "http://127.0.0.1:\(server.port)/x"))
        #expect((try? result.get().body) == Array(#"{"a":42}"#.utf8))
        await http.shutdown()
    }

    /// What the response's framing says about the connection decides whether it is used again:
    /// a close-delimited body, a refused response and bytes after the answer each end it.
    @Test func aConnectionIsReusedOnlyAfterACleanlyFramedAnswer() async throws {
        let http = client()
        let old = try ScriptedHTTPServer { _ in
            .bytes(Array("HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n{\"v\":1}".utf8), thenClose: true)
        }
        defer { old.stop() }
        for _ in 0..<2 {
            let result = await http.execute(HTTPRequestSpec(method: .GET, url: "http://127.0.0.1:\(old.port)/"))
            #expect((try? result.get().body) == Array(#"{"v":1}"#.utf8))
        }
        #expect(old.connections == 2)

        let smuggling = try ScriptedHTTPServer { _ in
            .bytes(Array("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n".utf8), thenClose: false)
        }
        defer { smuggling.stop() }
        for _ in 0..<2 {
            guard
                case .failure(.mayHaveBeenSent(let why)) = await http.execute(
                    HTTPRequestSpec(method: .POST, url: "http://127.0.0.1:\(smuggling.port)/"))
            else {
                Issue.record("an ambiguously framed answer must not be taken")
                return
            }
            #expect(why.contains("both Content-Length and Transfer-Encoding"))
        }
        #expect(smuggling.connections == 2)

        let twice = try ScriptedHTTPServer { _ in
            .bytes(ScriptedHTTPServer.response(body: "{}") + ScriptedHTTPServer.response(body: "{}"), thenClose: false)
        }
        defer { twice.stop() }
        for _ in 0..<2 {
            let result = await http.execute(HTTPRequestSpec(method: .GET, url: "http://127.0.0.1:\(twice.port)/"))
            #expect((try? result.get().status) == 200)
        }
        #expect(twice.connections == 2)

        let kept = try ScriptedHTTPServer { _ in .bytes(ScriptedHTTPServer.response(body: "{}"), thenClose: false) }
        defer { kept.stop() }
        guard
            case .failure(.notSent(let why)) = await http.execute(
                HTTPRequestSpec(method: .POST, url: "http://127.0.0.1:\(kept.port)/", headers: [HTTPHeader("X-Signature", "sig\r\nX-Injected: 1")]))
        else {
            Issue.record("a header with a line break must not be sent")
            return
        }
        #expect(why == "header X-Signature has a control character in its value")
        #expect(kept.connections == 0)
        await http.shutdown()
    }

    @Test func onlyAFailedConnectIsCertainlyNotSent() async throws {
        let refused = try freeLoopbackPort()
        let http = client(timeoutMs: 300)
        guard case .failure(.notSent(let reason)) = await http.execute(HTTPRequestSpec(method: .POST, url: "http://127.0.0.1:\(refused)/"))
        else {
            Issue.record("a refused connection must be notSent")
            return
        }
        #expect(reason == "connection refused")

        // A server that takes the request and never answers: the request may have had its effect.
        let silent = try ScriptedHTTPServer { _ in .silence }
        defer { silent.stop() }
        let began = ContinuousClock.now
        guard case .failure(.mayHaveBeenSent(let why)) = await http.execute(HTTPRequestSpec(method: .POST, url: "http://127.0.0.1:\(silent.port)/"))
        else {
            Issue.record("a timed-out request must be mayHaveBeenSent")
            return
        }
        #expect(why.contains("timeout"))
        #expect(ContinuousClock.now - began < .seconds(30))  // 300 ms asked; a loaded suite start stalls for seconds

        // Half a response, then the connection closes.
        let half = try ScriptedHTTPServer { _ in .bytes(Array("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"a\"".utf8), thenClose: true) }
        defer { half.stop() }
        guard case .failure(.mayHaveBeenSent) = await http.execute(HTTPRequestSpec(method: .POST, url: "http://127.0.0.1:\(half.port)/"))
        else {
            Issue.record("a cut response must be mayHaveBeenSent")
            return
        }

        guard case .failure(.notSent) = await http.execute(HTTPRequestSpec(method: .GET, url: "ftp://127.0.0.1/")) else {
            Issue.record("an unsupported URL is refused before anything is sent")
            return
        }
        await http.shutdown()
        guard case .failure(.notSent) = await http.execute(HTTPRequestSpec(method: .GET, url: "http://127.0.0.1:\(half.port)/")) else {
            Issue.record("a shut-down client sends nothing")
            return
        }
    }

    /// The connection's one timer, set for the first request, must still end the second request
    /// on a kept-alive connection at that request's own deadline.
    @Test func aSilentAnswerOnAReusedConnectionStillTimesOut() async throws {
        let answered = Atomic<Int>(0)
        let server = try ScriptedHTTPServer { _ in
            answered.add(1, ordering: .relaxed) == (0, 1) ? .bytes(ScriptedHTTPServer.response(body: "{}"), thenClose: false) : .silence
        }
        defer { server.stop() }
        let http = client(timeoutMs: 2000)
        let url = "http://127.0.0.1:\(server.port)/"
        guard case .success = await http.execute(HTTPRequestSpec(method: .GET, url: url)) else {
            Issue.record("the first request is answered")
            return
        }
        // The product's own timer is under test: the connection's timer, armed for the first
        // request, would fire during the second one.
        try await Task.sleep(for: .milliseconds(1200))
        let began = ContinuousClock.now
        guard case .failure(.mayHaveBeenSent(let why)) = await http.execute(HTTPRequestSpec(method: .GET, url: url)) else {
            Issue.record("a silent second request must time out as mayHaveBeenSent")
            return
        }
        let waited = ContinuousClock.now - began
        #expect(why.contains("timeout"))
        #expect(server.connections == 1)
        // Not at the first request's deadline (about 800 ms after the second was sent), but at its own.
        #expect(waited >= .milliseconds(1950))
        #expect(waited < .seconds(30))
        await http.shutdown()
    }

    @Test func concurrentRequestsEachGetTheirOwnAnswer() async throws {
        let server = try ScriptedHTTPServer { request in
            .bytes(ScriptedHTTPServer.response(body: String(decoding: request.body, as: UTF8.self)), thenClose: false)
        }
        defer { server.stop() }
        let http = client()
        let answers = await withTaskGroup(of: (Int, String?).self) { group in
            for n in 0..<32 {
                group.addTask {
                    let result = await http.execute(
                        HTTPRequestSpec(method: .POST, url: "http://127.0.0.1:\(server.port)/", body: Array("body-\(n)".utf8)))
                    return (n, (try? result.get()).map { String(decoding: $0.body, as: UTF8.self) })
                }
            }
            var all: [Int: String?] = [:]
            for await (n, body) in group { all[n] = body }
            return all
        }
        await http.shutdown()
        #expect(answers.count == 32)
        #expect(answers.allSatisfy { $0.value == "body-\($0.key)" })
        #expect(server.connections <= 32)
    }

    @Test func httpsIsVerifiedAgainstTheTrustRoots() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("paypipe-tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let key = directory.appendingPathComponent("key.pem").path, certificate = directory.appendingPathComponent("cert.pem").path
        let openssl = try ChildProcess(
            [
                "/usr/bin/openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out",
                certificate, "-days", "2", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost",
            ], stdout: .discard, stderr: .discard)
        _ = await waitForExit(openssl, within: .seconds(30))
        try #require(openssl.exitStatus == 0, "openssl could not make a test certificate")

        let server = try await TLSEchoServer.start(certificate: certificate, key: key)
        defer { server.stop() }
        var trusting = TLSConfiguration.makeClientConfiguration()
        trusting.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(certificate))
        let http = client(tls: trusting)
        let result = await http.execute(HTTPRequestSpec(method: .POST, url: "https://localhost:\(server.port)/pay", body: Array("{}".utf8)))
        #expect((try? result.get().status) == 200)
        #expect((try? result.get().body) == Array("tls POST /pay".utf8))
        await http.shutdown()

        // The system's roots do not know the test certificate: the handshake fails, nothing is answered.
        let strict = client()
        guard case .failure = await strict.execute(HTTPRequestSpec(method: .POST, url: "https://localhost:\(server.port)/pay")) else {
            Issue.record("an untrusted certificate must not be accepted")
            return
        }
        await strict.shutdown()
    }
}

/// An HTTPS server on NIO that answers `tls <method> <uri>`.
struct TLSEchoServer {
    let channel: any Channel
    var port: Int { channel.localAddress?.port ?? 0 }

    static func start(certificate: String, key: String) async throws -> TLSEchoServer {
        let configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMFile(certificate).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(file: key, format: .pem)))
        let context = try NIOSSLContext(configuration: configuration)
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(Echo())
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return TLSEchoServer(channel: channel)
    }

    func stop() { channel.close(promise: nil) }

    final class Echo: ChannelInboundHandler {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart
        var line = ""

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(let head): line = "tls \(head.method.rawValue) \(head.uri)"
            case .body: break
            case .end:
                var headers = HTTPHeaders()
                headers.add(name: "Content-Length", value: String(line.utf8.count))
                context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))), promise: nil)
                context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(string: line)))), promise: nil)
                context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            }
        }
    }
}

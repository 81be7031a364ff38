import Foundation
import Synchronization
import Testing
import ZeroMQ

@Suite("CURVE with a ZAP allow-list")
struct CurveAuthenticatorTests {
    /// A DEALER with `curve` options that sends one request and returns the reply, or nil when
    /// none arrives in time (a refused handshake never delivers anything).
    /// `timeoutMilliseconds`: long for a client that must be admitted (the handshake and the ZAP
    /// round trip can take seconds on a loaded machine), short for one that must be refused.
    /// On a thread of its own, not the cooperative pool: the server's echo task needs a pool
    /// thread, and with this one blocked, other suites' blocking calls could hold the rest for
    /// longer than the timeout in a full parallel run.
    static func request(
        _ context: ZMQContext, _ endpoint: String, curve: ZMQCurve?, _ text: String, timeoutMilliseconds: Int32 = 1000
    ) async throws -> ZMQMessage? {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                continuation.resume(
                    with: Result { try blockingRequest(context, endpoint, curve: curve, text, timeoutMilliseconds: timeoutMilliseconds) })
            }
        }
    }

    private static func blockingRequest(
        _ context: ZMQContext, _ endpoint: String, curve: ZMQCurve?, _ text: String, timeoutMilliseconds: Int32
    ) throws -> ZMQMessage? {
        var options = ZMQSocketOptions()
        options.curve = curve
        options.receiveTimeoutMilliseconds = timeoutMilliseconds
        // IMMEDIATE: a send waits for a completed handshake, which a refused client never gets.
        options.sendTimeoutMilliseconds = timeoutMilliseconds
        options.lingerMilliseconds = 0
        let dealer = try context.socket(.dealer, options: options)
        defer { dealer.close() }
        try dealer.connect(endpoint)
        guard try dealer.send(Array(text.utf8)) else { return nil }
        return try dealer.receive()
    }

    /// A CURVE ROUTER with the ZAP domain "rpc" that answers each request with its sender's
    /// User-Id ("none" when it has none).
    static func userIdEcho(_ context: ZMQContext, server: ZMQCurveKeyPair) throws -> (String, ZMQDuplex, Task<Void, any Error>) {
        var serverOptions = ZMQSocketOptions()
        serverOptions.curve = .server(secretKey: server.secretKey)
        serverOptions.zapDomain = "rpc"
        let router = try context.socket(.router, options: serverOptions)
        let endpoint = try router.bind("tcp://127.0.0.1:*")
        let echo = try ZMQDuplex(socket: router)
        let echoing = Task {
            while let batch = try await echo.nextBatch() {
                for message in batch where message.frames.count == 2 {
                    echo.send(ZMQMessage(frames: [message.frames[0], Array((message.userId ?? "none").utf8)]))
                }
            }
        }
        return (endpoint, echo, echoing)
    }

    @Test func onlyListedKeysOnTheirOwnDomainConnectAndEachMessageCarriesItsUserId() async throws {
        let context = try ZMQContext()
        let server = try ZMQCurveKeyPair.generate()
        let settler = try ZMQCurveKeyPair.generate()
        let poller = try ZMQCurveKeyPair.generate()
        let stranger = try ZMQCurveKeyPair.generate()
        let authenticator = try ZMQCurveAuthenticator(
            context: context,
            policy: .init(users: [settler.publicKey: "callbacks", poller.publicKey: "poller"], domains: ["rpc": ["callbacks"]]))

        let (endpoint, echo, echoing) = try Self.userIdEcho(context, server: server)

        func client(_ pair: ZMQCurveKeyPair, serverKey: String = server.publicKey) -> ZMQCurve {
            .client(serverPublicKey: serverKey, publicKey: pair.publicKey, secretKey: pair.secretKey)
        }
        let allowed = try await Self.request(context, endpoint, curve: client(settler), "hello", timeoutMilliseconds: 15_000)
        #expect(allowed.map { String(decoding: $0.body, as: UTF8.self) } == "callbacks")
        // Listed, but not for this domain.
        #expect(try await Self.request(context, endpoint, curve: client(poller), "hello") == nil)
        // Knows the server's public key, but is not listed: CURVE alone would let it in.
        #expect(try await Self.request(context, endpoint, curve: client(stranger), "hello") == nil)
        // No CURVE at all.
        #expect(try await Self.request(context, endpoint, curve: nil, "hello") == nil)
        #expect(authenticator.refusedCount >= 2)

        echo.stop()
        _ = try await echoing.value
        await echo.waitUntilClosed()
        authenticator.stop()
        context.terminate()
    }

    /// A CURVE server socket with a ZAP domain admits nobody when no handler answers (none was
    /// started, or it stopped): libzmq's default would let any client that knows the server's key in.
    @Test func withoutAZAPHandlerNobodyIsAdmitted() async throws {
        let context = try ZMQContext()
        let server = try ZMQCurveKeyPair.generate()
        let anyone = try ZMQCurveKeyPair.generate()
        let (endpoint, echo, echoing) = try Self.userIdEcho(context, server: server)
        let client = ZMQCurve.client(serverPublicKey: server.publicKey, publicKey: anyone.publicKey, secretKey: anyone.secretKey)
        #expect(try await Self.request(context, endpoint, curve: client, "hello", timeoutMilliseconds: 3000) == nil)
        echo.stop()
        _ = try await echoing.value
        await echo.waitUntilClosed()
        context.terminate()
    }

    @Test func theZAPReplyFollowsRFC27() {
        let key = Array(repeating: UInt8(7), count: 32)
        let z85 = ZMQCurveKeyPairEncoding.z85(key)
        let policy = ZMQCurveAuthenticator.Policy(users: [z85: "signer"], domains: ["results": ["signer"]])
        func request(domain: String, mechanism: String = "CURVE", credentials: [[UInt8]] = [key]) -> ZMQMessage {
            ZMQMessage(
                frames: [Array("1.0".utf8), Array("42".utf8), Array(domain.utf8), Array("127.0.0.1".utf8), [], Array(mechanism.utf8)] + credentials)
        }
        let ok = ZMQCurveAuthenticator.reply(to: request(domain: "results"), policy: policy)
        #expect(ok.frames.count == 6)
        #expect(ok.frames.map { String(decoding: $0, as: UTF8.self) } == ["1.0", "42", "200", "OK", "signer", ""])
        #expect(String(decoding: ZMQCurveAuthenticator.reply(to: request(domain: "ledgerRPC"), policy: policy).frames[2], as: UTF8.self) == "400")
        #expect(
            String(
                decoding: ZMQCurveAuthenticator.reply(to: request(domain: "results", mechanism: "NULL", credentials: []), policy: policy).frames[2],
                as: UTF8.self) == "400")
        #expect(
            String(decoding: ZMQCurveAuthenticator.reply(to: ZMQMessage(frames: [Array("2.0".utf8)]), policy: policy).frames[2], as: UTF8.self)
                == "500")
    }

    /// A raw TCP proxy between a PUSH client and a PULL server records every byte on the wire: a
    /// known secret crosses it in clear without CURVE and never with it.
    @Test(arguments: [false, true])
    func theBytesOnTheWireAreEncryptedWithCurve(curve: Bool) async throws {
        let secret = "Authorization: demo-nets-secret-key-4f1c"
        let context = try ZMQContext()
        let server = try ZMQCurveKeyPair.generate()
        let client = try ZMQCurveKeyPair.generate()
        let authenticator =
            curve
            ? try ZMQCurveAuthenticator(
                context: context, policy: .init(users: [client.publicKey: "submitter"], domains: ["signedOut": ["submitter"]]))
            : nil
        var serverOptions = ZMQSocketOptions()
        var clientOptions = ZMQSocketOptions()
        if curve {
            serverOptions.curve = .server(secretKey: server.secretKey)
            serverOptions.zapDomain = "signedOut"
            clientOptions.curve = .client(serverPublicKey: server.publicKey, publicKey: client.publicKey, secretKey: client.secretKey)
        }
        let pull = try context.socket(.pull, options: serverOptions)
        let endpoint = try pull.bind("tcp://127.0.0.1:*")
        let serverPort = Int(endpoint.split(separator: ":").last!)!
        let proxy = try RecordingProxy(forwardingTo: serverPort)
        let receiver = try ZMQReceiver(socket: pull)

        let push = try context.socket(.push, options: clientOptions)
        try push.connect("tcp://127.0.0.1:\(proxy.port)")
        let sender = try ZMQSender(socket: push)
        try await sender.send(ZMQMessage(secret))
        let received = try await collect(receiver, count: 1, timeoutMilliseconds: 5000)
        #expect(received.map { String(decoding: $0.body, as: UTF8.self) } == [secret])

        _ = await sender.finish()
        receiver.stop()
        await receiver.waitUntilClosed()
        authenticator?.stop()
        context.terminate()
        let wire = proxy.stop()
        #expect(wire.count > secret.utf8.count)
        let needle = Array("demo-nets-secret-key".utf8)
        let found = wire.count >= needle.count && (0...(wire.count - needle.count)).contains { Array(wire[$0..<$0 + needle.count]) == needle }
        #expect(found == !curve, "curve \(curve): the secret \(found ? "crossed" : "did not cross") the wire in clear")
    }
}

/// What the test needs of Z85 without reaching into the module's internals.
enum ZMQCurveKeyPairEncoding {
    static func z85(_ key: [UInt8]) -> String {
        // Z85 (RFC 32): 4 bytes → 5 characters, big-endian base 85.
        let alphabet = Array("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#")
        var text = ""
        for chunk in stride(from: 0, to: key.count, by: 4) {
            var value = key[chunk..<chunk + 4].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            var characters: [Character] = []
            for _ in 0..<5 {
                characters.append(alphabet[Int(value % 85)])
                value /= 85
            }
            text += String(characters.reversed())
        }
        return text
    }
}

/// One TCP connection forwarded from an ephemeral loopback port to `target`, both directions
/// recorded.
final class RecordingProxy: @unchecked Sendable {
    let port: Int
    private let listener: Int32
    private let recorded = Mutex<[UInt8]>([])
    private let descriptors = Mutex<[Int32]>([])

    init(forwardingTo target: Int) throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = Self.loopback(port: 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) == 0 && getsockname(listener, $0, &length) == 0 }
        }
        guard ok, listen(listener, 4) == 0 else {
            close(listener)
            throw ProxyError()
        }
        self.listener = listener
        port = Int(UInt16(bigEndian: address.sin_port))
        let thread = Thread { [self] in
            let client = accept(listener, nil, nil)
            guard client >= 0 else { return }
            let upstream = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var targetAddress = Self.loopback(port: target)
            let connected = withUnsafePointer(to: &targetAddress) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(upstream, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            descriptors.withLock { $0 += [client, upstream] }
            guard connected == 0 else { return }
            pump(from: client, to: upstream)
            pump(from: upstream, to: client)
        }
        thread.start()
    }

    private func pump(from source: Int32, to destination: Int32) {
        let thread = Thread { [self] in
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let n = recv(source, &buffer, buffer.count, 0)
                if n <= 0 { break }
                recorded.withLock { $0 += buffer[0..<n] }
                var sent = 0
                while sent < n {
                    let m = buffer[sent..<n].withUnsafeBytes { send(destination, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                    if m <= 0 { return }
                    sent += m
                }
            }
            shutdown(destination, Int32(SHUT_WR))
        }
        thread.start()
    }

    /// Closes everything and returns the bytes seen in both directions.
    func stop() -> [UInt8] {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        for fd in descriptors.withLock({ $0 }) { shutdown(fd, Int32(SHUT_RDWR)) }
        Thread.sleep(forTimeInterval: 0.05)
        for fd in descriptors.withLock({ $0 }) { close(fd) }
        return recorded.withLock { $0 }
    }

    static func loopback(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return address
    }

    struct ProxyError: Error {}
}

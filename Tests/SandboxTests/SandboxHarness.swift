import AsyncHTTPClient
import Cleeng
import Emulators
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import NetsEasy
import PaypipeCore
import PhonePe
import Synchronization
import Testing
import TrustPayments
import Viva

@testable import Sandbox

enum Fixtures {
    static let tpJWTSecret = "3-0123456789abcdef0123456789abcdef-jwt-secret"
    static let netsKey = "test-secret-key-6f1c0d2e"
    static let netsWebhookSecret = "whAuth12345678"
    static let phonePeSalt = "099eb0cd-02cf-4e2a-8aca-3e6c6aff0399"
    static let cleengPassword = "s3cr3t-pa55"
    static let quiet = Logger(label: "sandbox-tests", factory: { _ in SwiftLogNoOpLogHandler() })

    /// The pipeline's view of the sandbox at `port`; `callbackPort` receives PhonePe callbacks
    /// and Nets webhooks.
    static func config(port: Int, callbackPort: Int = 9) -> PaypipeConfig {
        let base = "http://127.0.0.1:\(port)"
        return PaypipeConfig(merchants: [
            "default": MerchantConfig(
                TrustPaymentsConfig(
                    baseURL: base + "/trustpayments", siteReference: "test_site12345", jwtIssuer: "jwt.user",
                    jwtSecret: Secret(tpJWTSecret), webservicesUser: "ws@example.com", webservicesPassword: Secret("ws-password"),
                    notificationPassword: Secret("PASSWORD")),
                NetsConfig(baseURL: base + "/nets", secretKey: Secret(netsKey), webhookAuthorization: Secret(netsWebhookSecret)),
                PhonePeConfig(
                    baseURL: base + "/phonepe", merchantId: "MERCHANTUAT", saltKey: Secret(phonePeSalt), saltIndex: "1",
                    callbackURL: "http://127.0.0.1:\(callbackPort)/callbacks/phonepe", callbackScheme: "paypipeapp"),
                CleengConfig(
                    receiptURL: base + "/cleeng/checkout/apple_inapp.php", apiURL: base + "/cleeng/3.0/json-rpc",
                    username: "publisher", password: Secret(cleengPassword)),
                VivaConfig(merchantKey: "SG23323424EXS3", appId: "com.example.app", callback: "interapp-callback")),
            "second": MerchantConfig(
                PhonePeConfig(
                    baseURL: base + "/phonepe", merchantId: "SECONDMID", saltKey: Secret("second-salt-value"), saltIndex: "2",
                    callbackURL: "http://127.0.0.1:\(callbackPort)/callbacks/phonepe-second", callbackScheme: "paypipeapp")),
        ])
    }

    static func merchant(_ config: PaypipeConfig, _ name: String = "default") throws -> MerchantConfig {
        try #require(config.merchants[name])
    }
}

/// A sandbox running in-process on an ephemeral port, and a client for it.
struct Sandbox {
    let port: Int
    let server: SandboxServer
    /// The config the pipeline would use against this sandbox.
    let config: PaypipeConfig

    var ledger: SandboxLedger { server.ledger }

    func send(_ request: HTTPRequestSpec, client: HTTPClient = .shared) async throws -> HTTPResponseSpec {
        try await HTTP.send(request, client: client)
    }

    func get(_ path: String) async throws -> HTTPResponseSpec {
        try await HTTP.send(HTTPRequestSpec(method: .GET, url: "http://127.0.0.1:\(port)\(path)"))
    }

    func ledgerDocument() async throws -> JSONValue {
        let response = try await get("/_sandbox/ledger")
        #expect(response.status == 200)
        return try JSONValue.parse(response.body)
    }
}

enum HTTP {
    static func send(_ request: HTTPRequestSpec, client: HTTPClient = .shared) async throws -> HTTPResponseSpec {
        var outbound = HTTPClientRequest(url: request.url)
        outbound.method = .RAW(value: request.method.rawValue)
        for header in request.headers { outbound.headers.add(name: header.name, value: header.value) }
        if !request.body.isEmpty { outbound.body = .bytes(ByteBuffer(bytes: request.body)) }
        let response = try await client.execute(outbound, timeout: .seconds(10))
        let body = try await response.body.collect(upTo: 4 << 20)
        return HTTPResponseSpec(
            status: Int(response.status.code), headers: response.headers.map { HTTPHeader($0.name, $0.value) },
            body: Array(body.readableBytesView))
    }
}

/// Runs `body` against a fresh sandbox, then shuts it down gracefully and waits for `run` to
/// return (so a test also proves the server stops).
func withSandbox(
    _ configuration: SandboxConfiguration = SandboxConfiguration(port: 0), callbackPort: Int = 9,
    _ body: (Sandbox) async throws -> Void
) async throws {
    var configuration = configuration
    configuration.port = 0
    let server = try SandboxServer(configuration: configuration, config: Fixtures.config(port: 0, callbackPort: callbackPort), logger: Fixtures.quiet)
    let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
    try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask {
            try await server.run { port in
                continuation.yield(port)
                continuation.finish()
            }
        }
        var iterator = ports.makeAsyncIterator()
        let port = try #require(await iterator.next())
        let sandbox = Sandbox(port: port, server: server, config: Fixtures.config(port: port, callbackPort: callbackPort))
        do {
            try await body(sandbox)
        } catch {
            await server.shutdown()
            try await group.waitForAll()
            throw error
        }
        await server.shutdown()
        try await group.waitForAll()
    }
}

/// A tiny HTTP receiver standing in for the pipeline's callback ingress: records every request.
final class Receiver: Sendable {
    struct Received: Sendable {
        var path: String
        var headers: [HTTPHeader]
        var body: [UInt8]
        func header(_ name: String) -> String? { headers.first { $0.name.lowercased() == name.lowercased() }?.value }
    }

    let received = Mutex<[Received]>([])
    /// Status answered to the first `failFirst` requests (then 200), to exercise retries.
    let failFirst: Int

    init(failFirst: Int = 0) {
        self.failFirst = failFirst
    }

    struct Responder: HTTPResponder {
        typealias Context = BasicRequestContext
        let receiver: Receiver
        func respond(to request: Request, context: Context) async throws -> Response {
            var request = request
            let body = try await request.collectBody(upTo: 1 << 20)
            let count = receiver.received.withLock { list in
                list.append(
                    Received(
                        path: request.uri.path, headers: request.headers.map { HTTPHeader($0.name.rawName, $0.value) },
                        body: Array(body.readableBytesView)))
                return list.count
            }
            return Response(status: count <= receiver.failFirst ? .serviceUnavailable : .ok)
        }
    }

    /// Waits until `count` requests arrived or `timeout` passed; returns what arrived.
    func wait(for count: Int, timeout: Duration = .seconds(5)) async throws -> [Received] {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let list = received.withLock { $0 }
            if list.count >= count { return list }
            try await Task.sleep(for: .milliseconds(20))
        }
        return received.withLock { $0 }
    }

    /// Runs a receiver on an ephemeral port for the duration of `body`.
    static func run(failFirst: Int = 0, _ body: (Receiver, Int) async throws -> Void) async throws {
        let receiver = Receiver(failFirst: failFirst)
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        let app = Application(
            responder: Responder(receiver: receiver),
            configuration: ApplicationConfiguration(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in
                continuation.yield(channel.localAddress?.port ?? 0)
                continuation.finish()
            },
            logger: Fixtures.quiet)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await app.run() }
            var iterator = ports.makeAsyncIterator()
            let port = try #require(await iterator.next())
            do {
                try await body(receiver, port)
            } catch {
                group.cancelAll()
                throw error
            }
            group.cancelAll()
        }
    }
}

extension ProviderVerdict {
    var kind: String {
        switch self {
        case .succeeded: "succeeded"
        case .pending: "pending"
        case .failed(let code, _): "failed:\(code)"
        case .retry: "retry"
        case .unknown: "unknown"
        case .neverSeen: "neverSeen"
        }
    }

    var result: [String: JSONValue]? {
        switch self {
        case .succeeded(let result), .pending(let result): result
        default: nil
        }
    }
}

import Foundation
import Logging
import Cleeng
import NetsEasy
import PaypipeCore
import PhonePe
import TrustPayments
import Viva

/// The provider emulation behind the HTTP server: routing by path prefix, ledger counting,
/// latency and error injection, then the emulators (one folder per provider). Shared state lives
/// in per-provider `Mutex`es with short critical sections, so concurrent requests (and their
/// injected latency) never queue behind each other.
final class SandboxEmulator: Sendable {
    let configuration: SandboxConfiguration
    let ledger: SandboxLedger
    let scheduler: SandboxScheduler
    let outbound: SandboxOutbound
    let logger: Logger
    let injector: SandboxErrorInjector
    let trustPayments: TrustPaymentsEmulation
    let nets: NetsEmulation
    let phonePe: PhonePeEmulation
    let cleeng: CleengEmulation
    let viva: VivaEmulation

    init(
        configuration: SandboxConfiguration, config: PaypipeConfig, ledger: SandboxLedger, scheduler: SandboxScheduler,
        outbound: SandboxOutbound, logger: Logger
    ) {
        self.configuration = configuration
        self.ledger = ledger
        self.scheduler = scheduler
        self.outbound = outbound
        self.logger = logger
        injector = SandboxErrorInjector(rate: configuration.errorRate, seed: configuration.errorSeed)
        let merchants = SandboxMerchants(config)
        trustPayments = TrustPaymentsEmulation(merchants: merchants.trustPayments)
        nets = NetsEmulation(merchants: merchants.nets)
        phonePe = PhonePeEmulation(merchants: merchants.phonePe)
        cleeng = CleengEmulation(merchants: merchants.cleeng)
        viva = VivaEmulation(merchants: merchants.viva)
    }

    /// The provider an incoming path belongs to, and the path the provider itself would see.
    enum Route {
        case health, ledger
        case provider(Provider, subpath: String)
        case notFound
    }

    static func route(_ path: String) -> Route {
        if path == "/healthz" { return .health }
        if path == "/_sandbox/ledger" || path == "/_sandbox/ledger/" { return .ledger }
        for provider in [Provider.trustpayments, .nets, .phonepe, .cleeng, .viva] {
            let prefix = "/" + provider.rawValue
            if path.hasPrefix(prefix + "/") { return .provider(provider, subpath: String(path.dropFirst(prefix.count))) }
        }
        return .notFound
    }

    /// Answers one request. `path` excludes the query; `query` is the raw query string.
    func handle(method: String, path: String, query: String?, headers: [HTTPHeader], body: [UInt8]) async -> HTTPResponseSpec {
        switch Self.route(path) {
        case .health:
            return Self.json(200, ["status": "ok"])
        case .ledger:
            guard method == "GET" else { return Self.json(405, ["error": "use GET"]) }
            let parameters = Self.queryParameters(query)
            let document = ledger.document(key: parameters["key"], summary: parameters["summary"] == "1")
            return HTTPResponseSpec(status: 200, headers: [HTTPHeader("Content-Type", "application/json")], body: document.bytes)
        case .notFound:
            return Self.json(404, ["error": "no such route"])
        case .provider(let provider, let subpath):
            guard let method = HTTPRequestSpec.Method(rawValue: method) else { return Self.json(405, ["error": "method not allowed"]) }
            let request = HTTPRequestSpec(method: method, url: subpath, headers: headers, body: body)
            return await handleProvider(provider, request)
        }
    }

    func handleProvider(_ provider: Provider, _ request: HTTPRequestSpec) async -> HTTPResponseSpec {
        // The Trust Payments SDK payment's key is only known once the JWT is verified.
        let countedLater = provider == .trustpayments && request.url == TrustPaymentsEmulation.sdkPaymentPath
        if !countedLater { ledger.received(ledgerKey(provider, request)) }
        if configuration.latencyMilliseconds > 0 {
            try? await Task.sleep(for: .milliseconds(configuration.latencyMilliseconds))
        }
        if injector.shouldFail() {
            if countedLater { ledger.received(nil) }
            ledger.injectedError()
            return Self.json(500, ["error": "injected error: request not processed"])
        }
        switch provider {
        case .trustpayments: return trustPayments.handle(request, emulator: self)
        case .nets: return nets.handle(request, emulator: self)
        case .phonepe: return phonePe.handle(request, emulator: self)
        case .cleeng: return cleeng.handle(request, emulator: self)
        case .viva: return viva.handle(request)
        default: return HTTPResponseSpec(status: 404)
        }
    }

    /// `<provider>:<idempotency key>` for requests that carry one, else nil.
    func ledgerKey(_ provider: Provider, _ request: HTTPRequestSpec) -> String? {
        let key: String? =
            switch provider {
            case .trustpayments: TrustPaymentsEmulation.requestReference(request)
            case .nets: request.method == .POST ? request.header("Idempotency-Key") : nil
            case .phonepe: PhonePeEmulation.peekPayload(request)?.authRequestId
            case .cleeng: CleengEmulation.transactionId(request)
            default: nil
            }
        return key.map { provider.rawValue + ":" + $0.prefix(128) }
    }

    // MARK: Helpers

    static func json(_ status: Int, _ body: JSONValue) -> HTTPResponseSpec {
        HTTPResponseSpec(status: status, headers: [HTTPHeader("Content-Type", "application/json")], body: body.bytes)
    }

    static func queryParameters(_ query: String?) -> [String: String] {
        var parameters: [String: String] = [:]
        for pair in (query ?? "").split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = String(parts[0]).removingPercentEncoding ?? String(parts[0])
            let value = parts.count > 1 ? (String(parts[1]).removingPercentEncoding ?? String(parts[1])) : ""
            parameters[name] = value
        }
        return parameters
    }

    static func epochSeconds() -> Int64 { Timestamp.nowMilliseconds() / 1000 }

    /// The user name of an HTTP Basic `Authorization` header (never the password).
    static func basicUser(_ header: String?) -> String? {
        guard let header, header.count > 6, header.prefix(6).lowercased() == "basic " else { return nil }
        guard let decoded = Data(base64Encoded: String(header.dropFirst(6)).trimmingCharacters(in: .whitespaces)) else { return nil }
        let bytes = Array(decoded)
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")) else { return nil }
        return String(decoding: bytes[..<colon], as: UTF8.self)
    }
}

/// The configured merchants per provider, `default` first so it answers when a request names
/// no merchant the sandbox knows.
struct SandboxMerchants {
    var trustPayments: [(name: String, config: TrustPaymentsConfig)] = []
    var nets: [(name: String, config: NetsConfig)] = []
    var phonePe: [(name: String, config: PhonePeConfig)] = []
    var cleeng: [(name: String, config: CleengConfig)] = []
    var viva: [(name: String, config: VivaConfig)] = []

    init(_ config: PaypipeConfig) {
        let names = config.merchants.keys.sorted { lhs, rhs in
            lhs == "default" ? rhs != "default" : (rhs == "default" ? false : lhs < rhs)
        }
        for name in names {
            guard let merchant = config.merchants[name] else { continue }
            if let tp = merchant.trustpayments { trustPayments.append((name, tp)) }
            if let nets = merchant.nets { self.nets.append((name, nets)) }
            if let phonePe = merchant.phonepe { self.phonePe.append((name, phonePe)) }
            if let cleeng = merchant.cleeng { self.cleeng.append((name, cleeng)) }
            if let viva = merchant.viva { self.viva.append((name, viva)) }
        }
    }
}

import Foundation
import Logging
import PaypipeCore

/// What every emulator shares: the settings, the ledger of what was received and took
/// effect, the scheduler for delayed work (a checkout completed later, a grant that comes
/// later) and the outbound client for callbacks and webhooks.
public final class SandboxContext: Sendable {
    public let configuration: SandboxConfiguration
    public let ledger: SandboxLedger
    public let scheduler: SandboxScheduler
    public let outbound: SandboxOutbound
    public let logger: Logger
    /// The sandbox's time, which tests and the demo move on (`/_sandbox/clock`).
    public let clock = SandboxClock()

    package init(configuration: SandboxConfiguration, ledger: SandboxLedger, scheduler: SandboxScheduler, outbound: SandboxOutbound, logger: Logger) {
        self.configuration = configuration
        self.ledger = ledger
        self.scheduler = scheduler
        self.outbound = outbound
        self.logger = logger
    }

    /// A provider-specific setting given as `--provider-option <provider>.<name>=<value>`.
    public func option(_ provider: Provider, _ name: String) -> String? {
        configuration.providerOptions[provider.rawValue + "." + name]
    }

    public static func json(_ status: Int, _ body: JSONValue) -> HTTPResponseSpec {
        HTTPResponseSpec(status: status, headers: [HTTPHeader("Content-Type", "application/json")], body: body.bytes)
    }

    public static func queryParameters(_ query: String?) -> [String: String] {
        var parameters: [String: String] = [:]
        for pair in (query ?? "").split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = String(parts[0]).removingPercentEncoding ?? String(parts[0])
            let value = parts.count > 1 ? (String(parts[1]).removingPercentEncoding ?? String(parts[1])) : ""
            parameters[name] = value
        }
        return parameters
    }

    public static func epochSeconds() -> Int64 { Timestamp.nowMilliseconds() / 1000 }

    /// The user name of an HTTP Basic `Authorization` header (never the password).
    public static func basicUser(_ header: String?) -> String? {
        guard let header, header.count > 6, header.prefix(6).lowercased() == "basic " else { return nil }
        guard let decoded = Data(base64Encoded: String(header.dropFirst(6)).trimmingCharacters(in: .whitespaces)) else { return nil }
        let bytes = Array(decoded)
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")) else { return nil }
        return String(decoding: bytes[..<colon], as: UTF8.self)
    }
}

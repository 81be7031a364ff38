import PaypipeCore

/// One provider's stand-in, served by the sandbox under `/<provider>/`: it checks each request
/// the way the provider documents it and answers the way the provider would. It reads its
/// merchants from the same config the pipeline reads, so both sides agree on credentials.
public protocol ProviderEmulator: Sendable {
    /// The provider whose path prefix routes here.
    static var provider: Provider { get }

    /// Built once per sandbox from the pipeline's config (the merchants' sections for this provider).
    init(config: PaypipeConfig)

    /// How the sandbox ledger counts the request before it is answered (see `SandboxLedger`).
    func ledgerKey(_ request: HTTPRequestSpec) -> SandboxLedgerKey

    /// Answers one request; `request.url` is the path below the provider's prefix.
    func handle(_ request: HTTPRequestSpec, context: SandboxContext) async -> HTTPResponseSpec
}

/// How a request is counted in the sandbox ledger on arrival.
public enum SandboxLedgerKey: Sendable, Equatable {
    /// Counted now under the request's idempotency key (nil: counted without one).
    case now(String?)
    /// The key is readable only once the request is verified: the emulator counts it itself.
    case byEmulator
}

extension ProviderEmulator {
    public func ledgerKey(_ request: HTTPRequestSpec) -> SandboxLedgerKey { .now(nil) }
}

/// The merchants configured for one provider, `default` first so that it answers when a
/// request names no merchant the sandbox knows.
public enum SandboxMerchants {
    public static func of<Section: MerchantSection>(_ type: Section.Type, in config: PaypipeConfig) -> [(name: String, config: Section)] {
        let names = config.merchants.keys.sorted { lhs, rhs in
            lhs == "default" ? rhs != "default" : (rhs == "default" ? false : lhs < rhs)
        }
        return names.compactMap { name in config.merchants[name]?.section(type).map { (name, $0) } }
    }
}

import PaypipeCore
import StageWire
import ZeroMQ

/// The internal links (every address the ledger binds besides intake and outcomes, which are
/// upstream's PROTOCOL.md §2 contract) as one stage sees them: with `curve` configured, CURVE
/// with the ledger as server and an allow-list of the other roles' keys; without it, plaintext
/// as in v1. Services change one line per socket: `links.client(options)` when connecting,
/// `links.server(options, .link)` when binding.
package struct StageLinks: Sendable {
    package enum Link: String, Sendable, CaseIterable {
        case signQueue, signedIn, signedOut, results, ledgerRPC, pollQueue
    }

    /// The roles that may connect to each link (the ledger's ZAP domains). Anyone else is refused
    /// during the handshake.
    package static let admitted: [Link: Set<CurveConfig.Role>] = [
        .signQueue: [.signer],
        .signedIn: [.signer],
        .signedOut: [.submitter],
        .results: [.signer, .submitter, .poller],
        .ledgerRPC: [.callbacks, .poller, .submitter],
        .pollQueue: [.poller],
    ]

    package let role: CurveConfig.Role
    private let curve: CurveConfig?
    private let secretKey: Secret?

    /// Reads this role's secret key (a bad or missing key file is a config error).
    package init(config: PaypipeConfig, role: CurveConfig.Role) throws(ConfigError) {
        self.role = role
        curve = config.curve
        secretKey = try config.curve?.secretKey(of: role)
    }

    package var isSecured: Bool { curve != nil }

    /// `options` for a socket that connects to one of the ledger's internal addresses.
    package func client(_ options: ZMQSocketOptions) -> ZMQSocketOptions {
        guard let curve, let secretKey else { return options }
        var options = options
        options.curve = .client(
            serverPublicKey: curve.publicKey(of: .ledger), publicKey: curve.publicKey(of: role), secretKey: secretKey.reveal())
        return options
    }

    /// `options` for the ledger's socket bound at `link`.
    package func server(_ options: ZMQSocketOptions, _ link: Link) -> ZMQSocketOptions {
        guard curve != nil, let secretKey else { return options }
        var options = options
        options.curve = .server(secretKey: secretKey.reveal())
        options.zapDomain = link.rawValue
        return options
    }

    /// The ZAP handler for the ledger's context, started before any server socket binds; nil
    /// without `curve`. Stop it before terminating the context.
    package func authenticator(context: ZMQContext) throws(ZMQError) -> ZMQCurveAuthenticator? {
        guard let curve else { return nil }
        let users = Dictionary(uniqueKeysWithValues: CurveConfig.Role.allCases.filter { $0 != .ledger }.map { (curve.publicKey(of: $0), $0.rawValue) })
        let domains = Dictionary(uniqueKeysWithValues: StageLinks.admitted.map { ($0.key.rawValue, Set($0.value.map(\.rawValue))) })
        return try ZMQCurveAuthenticator(context: context, policy: .init(users: users, domains: domains))
    }

    /// Refuses a ledger request its sender's role may not make: only callback validators settle,
    /// only submitters claim leases.
    /// Without `curve` there are no roles, and every request is served as in v1.
    package func authorize(_ request: LedgerRequest, from message: ZMQMessage) throws(LinkRefusal) {
        guard isSecured else { return }
        guard let user = message.userId, let sender = CurveConfig.Role(rawValue: user) else {
            throw LinkRefusal("forbidden: the sender has no role")
        }
        guard request.permits(sender) else { throw LinkRefusal("forbidden: the \(sender.rawValue) role may not \(request.op)") }
    }
}

/// A request refused for its sender's role; the ledger answers it with this message.
package struct LinkRefusal: Error, Sendable, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}

extension LedgerRequest {
    /// Which role may make each request. A new op must be placed here explicitly.
    package func permits(_ role: CurveConfig.Role) -> Bool {
        switch self {
        case .lookup, .lookupRef, .settle: role == .callbacks
        case .resumePolls: role == .poller
        case .claim: role == .submitter
        }
    }

    package var op: String {
        switch self {
        case .lookup: "lookup"
        case .lookupRef: "lookupRef"
        case .settle: "settle"
        case .resumePolls: "resumePolls"
        case .claim: "claim"
        }
    }
}

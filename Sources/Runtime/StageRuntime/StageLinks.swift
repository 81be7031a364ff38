import PaypipeCore
import StageWire
import ZeroMQ

/// The internal links (every address the ledger binds besides intake and outcomes, which are
/// upstream's contract, docs/protocol.md) as one stage sees them: with `curve` configured, CURVE
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

    /// The sockets upstream order systems use (docs/security.md, "Upstream clients"): CURVE
    /// only when the config lists upstream clients (`curve.upstream`).
    package enum UpstreamLink: String, Sendable, CaseIterable {
        case intake, outcomes, outcomesReplay
    }

    package let role: CurveConfig.Role
    private let curve: CurveConfig?
    private let secretKey: Secret?
    /// The public key of the secret key this process holds: during a rotation the role's
    /// processes hold the old pair or the new one, and each says which it holds.
    private let publicKey: String?

    /// Reads this role's secret key (a bad or missing key file is a config error, and so is a
    /// key whose public half is neither the role's `publicKey` nor its `nextPublicKey`).
    package init(config: PaypipeConfig, role: CurveConfig.Role) throws(ConfigError) {
        self.role = role
        curve = config.curve
        secretKey = try config.curve?.secretKey(of: role)
        guard let curve, let secretKey else {
            publicKey = nil
            return
        }
        guard let derived = ZMQCurveKeyPair.publicKey(ofSecretKey: secretKey.reveal()), curve.publicKeys(of: role).contains(derived) else {
            throw ConfigError(
                path: "curve.\(role.rawValue).secretKey",
                reason: "is the secret half of neither curve.\(role.rawValue).publicKey nor its nextPublicKey")
        }
        publicKey = derived
    }

    package var isSecured: Bool { curve != nil }

    /// `options` for a socket that connects to one of the ledger's internal addresses.
    package func client(_ options: ZMQSocketOptions) -> ZMQSocketOptions {
        guard let curve, let secretKey, let publicKey else { return options }
        var options = options
        options.curve = .client(
            serverPublicKey: curve.publicKey(of: .ledger), publicKey: publicKey, secretKey: secretKey.reveal(),
            nextServerPublicKey: curve.nextPublicKey(of: .ledger))
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

    /// Whether intake, outcomes and replay are CURVE servers for the listed upstream clients.
    package var isUpstreamSecured: Bool { !(curve?.upstream.isEmpty ?? true) }

    /// `options` for the ledger's socket bound at an upstream `link`: unchanged without upstream
    /// clients in the config.
    package func upstreamServer(_ options: ZMQSocketOptions, _ link: UpstreamLink) -> ZMQSocketOptions {
        guard isUpstreamSecured, let secretKey else { return options }
        var options = options
        options.curve = .server(secretKey: secretKey.reveal())
        options.zapDomain = "upstream." + link.rawValue
        return options
    }

    static let adminDomain = "admin"

    /// `options` for the ledger's admin socket: with `curve`, a CURVE server admitting only the
    /// operators on `curve.admins` (nobody when it lists none); plaintext without it, as every
    /// internal link is.
    package func adminServer(_ options: ZMQSocketOptions) -> ZMQSocketOptions {
        guard curve != nil, let secretKey else { return options }
        var options = options
        options.curve = .server(secretKey: secretKey.reveal())
        options.zapDomain = Self.adminDomain
        return options
    }

    /// The operator who sent a message on the admin socket: its name on `curve.admins`; nil
    /// without `curve` (nobody is authenticated).
    package func adminName(of message: ZMQMessage) -> String? {
        guard let curve, let user = message.userId else { return nil }
        return curve.adminClient(userId: user)?.name
    }

    /// Who sent an upstream message, as far as the ledger may trust it.
    package enum UpstreamSender: Sendable, Equatable {
        /// Anyone may send (no upstream CURVE), or a client allowed every merchant.
        case anyMerchant
        /// A client limited to these merchants.
        case merchants(Set<String>)
        /// With upstream CURVE, a message without a known client (never admitted by ZAP).
        case nobody

        package func allows(_ merchant: String) -> Bool {
            switch self {
            case .anyMerchant: true
            case .merchants(let names): names.contains(merchant)
            case .nobody: false
            }
        }
    }

    /// The sender of a message read from an upstream socket.
    package func upstreamSender(of message: ZMQMessage) -> UpstreamSender {
        guard isUpstreamSecured, let curve else { return .anyMerchant }
        guard let client = message.userId.flatMap(curve.upstreamClient(userId:)) else { return .nobody }
        return client.merchants.map(UpstreamSender.merchants) ?? .anyMerchant
    }

    /// The ZAP handler for the ledger's context, started before any server socket binds; nil
    /// without `curve`. Stop it before terminating the context. Upstream clients are admitted
    /// to intake and replay; only those allowed every merchant to the live outcomes, which
    /// carry every merchant's.
    package func authenticator(context: ZMQContext) throws(ZMQError) -> ZMQCurveAuthenticator? {
        guard let curve else { return nil }
        // During a rotation a role's old and new public keys both carry its User-Id.
        var users = Dictionary(
            uniqueKeysWithValues: CurveConfig.Role.allCases.filter { $0 != .ledger }.flatMap { role in
                curve.publicKeys(of: role).map { ($0, role.rawValue) }
            })
        var domains = Dictionary(uniqueKeysWithValues: StageLinks.admitted.map { ($0.key.rawValue, Set($0.value.map(\.rawValue))) })
        for client in curve.upstream { users[client.publicKey] = client.userId }
        let everyClient = Set(curve.upstream.map(\.userId))
        domains["upstream." + UpstreamLink.intake.rawValue] = everyClient
        domains["upstream." + UpstreamLink.outcomesReplay.rawValue] = everyClient
        domains["upstream." + UpstreamLink.outcomes.rawValue] = Set(curve.upstream.filter { $0.merchants == nil }.map(\.userId))
        for admin in curve.admins { users[admin.publicKey] = admin.userId }
        domains[Self.adminDomain] = Set(curve.admins.map(\.userId))
        return try ZMQCurveAuthenticator(context: context, policy: .init(users: users, domains: domains))
    }

    /// `options` for an upstream client's socket (`paypipe send`, `paypipe outcomes`), with
    /// the client's key pair when the config secures upstream links.
    package static func upstreamClient(
        _ options: ZMQSocketOptions, config: PaypipeConfig?, key: (publicKey: String, secretKey: String)?
    ) -> ZMQSocketOptions {
        guard let key, let curve = config?.curve else { return options }
        var options = options
        options.curve = .client(
            serverPublicKey: curve.publicKey(of: .ledger), publicKey: key.publicKey, secretKey: key.secretKey,
            nextServerPublicKey: curve.nextPublicKey(of: .ledger))
        return options
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
        case .lookup, .lookupRef, .settle, .subscriptionEvents, .subscription: role == .callbacks
        case .resumePolls, .dueChecks, .checked: role == .poller
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
        case .subscriptionEvents: "subscriptionEvents"
        case .dueChecks: "dueChecks"
        case .checked: "checked"
        case .subscription: "subscription"
        }
    }
}

/// The `curve` config section (docs/configuration.md, "CURVE keys"): CURVE keys for the
/// internal ZeroMQ links. The ledger's key pair makes it the CURVE server of every internal
/// link; each other role's public key is on the ledger's allow-list, and each role's process
/// holds its own secret key only.
public struct CurveConfig: Sendable {
    /// Who a key belongs to. The ledger binds; every other role connects to it.
    public enum Role: String, Sendable, CaseIterable, Hashable {
        case ledger, signer, submitter, callbacks, poller
    }

    struct Entry: Sendable {
        let publicKey: String
        /// The key pair replacing this one (`nextPublicKey`), while a rotation is under way.
        let nextPublicKey: String?
        /// The configured value, `file:`/`env:` indirection not yet followed: a process reads
        /// only its own role's secret key, so a stage's host needs no other role's key file.
        let secretKeyReference: Secret
    }

    /// An upstream order system allowed on intake, outcomes and replay (`curve.upstream`).
    public struct UpstreamClient: Sendable, Equatable {
        /// Names the client in logs and in its CURVE User-Id (`upstream:<name>`).
        public var name: String
        public var publicKey: String
        /// The merchants whose orders it may send and whose outcomes it may replay; nil: every
        /// merchant. A client limited to some merchants may not connect to the live outcomes
        /// socket, which carries every merchant's outcomes.
        public var merchants: Set<String>?

        public var userId: String { Self.userIdPrefix + name }
        public static let userIdPrefix = "upstream:"
    }

    /// An operator allowed on the admin link (`curve.admins`): `paypipe order` and `paypipe
    /// orders`. Its name is recorded with every resolution it makes, beside the `--by` it gives.
    public struct AdminClient: Sendable, Equatable {
        public var name: String
        public var publicKey: String

        public var userId: String { Self.userIdPrefix + name }
        public static let userIdPrefix = "admin:"
    }

    let entries: [Role: Entry]
    let sources: PaypipeConfig.Sources
    /// Empty: intake, outcomes and replay stay plaintext.
    public let upstream: [UpstreamClient]
    /// Empty: nobody is admitted to the admin link.
    public let admins: [AdminClient]

    /// The operator a CURVE User-Id names.
    public func adminClient(userId: String) -> AdminClient? {
        guard userId.hasPrefix(AdminClient.userIdPrefix) else { return nil }
        return admins.first { $0.userId == userId }
    }

    public func publicKey(of role: Role) -> String { entries[role]!.publicKey }

    /// The public key that replaces `role`'s during a rotation (docs/security.md, "Rotating a
    /// key"): the ledger admits a client role holding either, and clients reach a ledger
    /// holding either.
    public func nextPublicKey(of role: Role) -> String? { entries[role]!.nextPublicKey }

    /// Every public key `role` may hold now: its own, and its next one during a rotation.
    public func publicKeys(of role: Role) -> [String] { [publicKey(of: role)] + (nextPublicKey(of: role).map { [$0] } ?? []) }

    /// The upstream client a CURVE User-Id names.
    public func upstreamClient(userId: String) -> UpstreamClient? {
        guard userId.hasPrefix(UpstreamClient.userIdPrefix) else { return nil }
        return upstream.first { $0.userId == userId }
    }

    public static func isUpstreamName(_ name: String) -> Bool {
        (1...64).contains(name.utf8.count)
            && name.utf8.allSatisfy { byte in
                switch byte {
                case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                    UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"):
                    true
                default: false
                }
            }
    }

    /// `role`'s secret key, read now (a `file:` or `env:` reference is followed here). A key
    /// file that its owner's group or anyone else may read is refused: the key is a role's
    /// whole authority on the internal links.
    public func secretKey(of role: Role) throws(ConfigError) -> Secret {
        let reader = try ConfigReader(.object([:]), path: "curve.\(role.rawValue)", sources: sources)
        let reference = entries[role]!.secretKeyReference.reveal()
        if reference.hasPrefix("file:") { try reader.refuseFileOthersMayRead(String(reference.dropFirst(5)), at: reader.child("secretKey")) }
        let value = try reader.resolve(reference, at: reader.child("secretKey"))
        guard CurveConfig.isZ85Key(value) else {
            throw ConfigError(path: reader.child("secretKey"), reason: "must be a 40-character Z85 CURVE key")
        }
        return Secret(value)
    }

    public static func isZ85Key(_ text: String) -> Bool {
        let alphabet = Set("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#".utf8)
        return text.utf8.count == 40 && text.utf8.allSatisfy(alphabet.contains)
    }

    /// The `name` and `publicKey` of a `curve.upstream` or `curve.admins` entry; a name already
    /// `taken` in the same list is refused.
    private static func namedKey(_ r: inout ConfigReader, taken: [String]) throws(ConfigError) -> (name: String, publicKey: String) {
        let name = try r.string("name")
        guard isUpstreamName(name) else { throw ConfigError(path: r.child("name"), reason: "must be 1-64 characters of [A-Za-z0-9._-]") }
        guard !taken.contains(name) else { throw ConfigError(path: r.child("name"), reason: "is used twice") }
        let publicKey = try r.string("publicKey")
        guard isZ85Key(publicKey) else { throw ConfigError(path: r.child("publicKey"), reason: "must be a 40-character Z85 CURVE key") }
        return (name, publicKey)
    }

    static func parse(_ reader: inout ConfigReader) throws(ConfigError) -> CurveConfig {
        var entries: [Role: Entry] = [:]
        for role in Role.allCases {
            var r = try reader.object(role.rawValue)
            let publicKey = try r.string("publicKey")
            guard isZ85Key(publicKey) else { throw ConfigError(path: r.child("publicKey"), reason: "must be a 40-character Z85 CURVE key") }
            let nextPublicKey = try r.optionalString("nextPublicKey")
            if let nextPublicKey {
                guard isZ85Key(nextPublicKey) else {
                    throw ConfigError(path: r.child("nextPublicKey"), reason: "must be a 40-character Z85 CURVE key")
                }
                guard nextPublicKey != publicKey else { throw ConfigError(path: r.child("nextPublicKey"), reason: "must differ from publicKey") }
            }
            guard let raw = r.take("secretKey") else { throw ConfigError(path: r.child("secretKey"), reason: "is required") }
            guard let reference = raw.stringValue, !reference.isEmpty else {
                throw ConfigError(path: r.child("secretKey"), reason: "must be a non-empty string")
            }
            try r.finish()
            entries[role] = Entry(publicKey: publicKey, nextPublicKey: nextPublicKey, secretKeyReference: Secret(reference))
        }
        var upstream: [UpstreamClient] = []
        if let list = reader.take("upstream") {
            guard let items = list.arrayValue else { throw ConfigError(path: reader.child("upstream"), reason: "must be an array of clients") }
            for (index, item) in items.enumerated() {
                var r = try ConfigReader(item, path: reader.child("upstream[\(index)]"), sources: reader.sources)
                let (name, publicKey) = try namedKey(&r, taken: upstream.map(\.name))
                var merchants: Set<String>?
                if let value = r.take("merchants") {
                    guard let names = value.arrayValue?.compactMap(\.stringValue), names.count == value.arrayValue?.count, !names.isEmpty else {
                        throw ConfigError(path: r.child("merchants"), reason: "must be a non-empty array of merchant names")
                    }
                    merchants = Set(names)
                }
                try r.finish()
                upstream.append(UpstreamClient(name: name, publicKey: publicKey, merchants: merchants))
            }
            guard !upstream.isEmpty else { throw ConfigError(path: reader.child("upstream"), reason: "must list at least one client") }
        }
        var admins: [AdminClient] = []
        if let list = reader.take("admins") {
            guard let items = list.arrayValue, !items.isEmpty else {
                throw ConfigError(path: reader.child("admins"), reason: "must be a non-empty array of operators")
            }
            for (index, item) in items.enumerated() {
                var r = try ConfigReader(item, path: reader.child("admins[\(index)]"), sources: reader.sources)
                let (name, publicKey) = try namedKey(&r, taken: admins.map(\.name))
                try r.finish()
                admins.append(AdminClient(name: name, publicKey: publicKey))
            }
        }
        try reader.finish()
        let keys =
            entries.values.flatMap { [$0.publicKey] + ($0.nextPublicKey.map { [$0] } ?? []) } + upstream.map(\.publicKey) + admins.map(\.publicKey)
        guard Set(keys).count == keys.count else {
            throw ConfigError(path: "curve", reason: "every role, upstream client and operator needs its own key pair")
        }
        return CurveConfig(entries: entries, sources: reader.sources, upstream: upstream, admins: admins)
    }
}

/// The `curve` config section (PROTOCOL.md §6): CURVE keys for the internal ZeroMQ links. The
/// ledger's key pair makes it the CURVE server of every internal link; each other role's public
/// key is on the ledger's allow-list, and each role's process holds its own secret key only.
public struct CurveConfig: Sendable {
    /// Who a key belongs to. The ledger binds; every other role connects to it.
    public enum Role: String, Sendable, CaseIterable, Hashable {
        case ledger, signer, submitter, callbacks, poller
    }

    struct Entry: Sendable {
        let publicKey: String
        /// The configured value, `file:`/`env:` indirection not yet followed: a process reads
        /// only its own role's secret key, so a stage's host needs no other role's key file.
        let secretKeyReference: Secret
    }

    let entries: [Role: Entry]
    let sources: PaypipeConfig.Sources

    public func publicKey(of role: Role) -> String { entries[role]!.publicKey }

    /// `role`'s secret key, read now (a `file:` or `env:` reference is followed here).
    public func secretKey(of role: Role) throws(ConfigError) -> Secret {
        let reader = try ConfigReader(.object([:]), path: "curve.\(role.rawValue)", sources: sources)
        let value = try reader.resolve(entries[role]!.secretKeyReference.reveal(), at: reader.child("secretKey"))
        guard CurveConfig.isZ85Key(value) else {
            throw ConfigError(path: reader.child("secretKey"), reason: "must be a 40-character Z85 CURVE key")
        }
        return Secret(value)
    }

    static func isZ85Key(_ text: String) -> Bool {
        let alphabet = Set("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#".utf8)
        return text.utf8.count == 40 && text.utf8.allSatisfy(alphabet.contains)
    }

    static func parse(_ reader: inout ConfigReader) throws(ConfigError) -> CurveConfig {
        var entries: [Role: Entry] = [:]
        for role in Role.allCases {
            var r = try reader.object(role.rawValue)
            let publicKey = try r.string("publicKey")
            guard isZ85Key(publicKey) else { throw ConfigError(path: r.child("publicKey"), reason: "must be a 40-character Z85 CURVE key") }
            guard let raw = r.take("secretKey") else { throw ConfigError(path: r.child("secretKey"), reason: "is required") }
            guard let reference = raw.stringValue, !reference.isEmpty else {
                throw ConfigError(path: r.child("secretKey"), reason: "must be a non-empty string")
            }
            try r.finish()
            entries[role] = Entry(publicKey: publicKey, secretKeyReference: Secret(reference))
        }
        try reader.finish()
        let keys = entries.values.map(\.publicKey)
        guard Set(keys).count == keys.count else { throw ConfigError(path: "curve", reason: "every role needs its own key pair") }
        return CurveConfig(entries: entries, sources: reader.sources)
    }
}

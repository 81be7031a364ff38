import PaypipeCore
import Testing

@Suite("The curve config section")
struct CurveConfigTests {
    /// Fixed Z85 strings of the right shape (the loader checks the alphabet and the length only).
    static func key(_ letter: Character) -> String { String(repeating: letter, count: 40) }

    static let letters: [String: Character] = ["ledger": "L", "signer": "G", "submitter": "U", "callbacks": "C", "poller": "P"]
    static func publicKey(_ role: String) -> String { key(letters[role]!) }

    static func config(omitting omitted: String? = nil, publicKey keyOf: (String) -> String = { publicKey($0) }) -> String {
        let roles: [String] = ["ledger", "signer", "submitter", "callbacks", "poller"].filter { $0 != omitted }
        let entries: [String] = roles.map { (role: String) -> String in
            let key: String = keyOf(role)
            return #""\#(role)": { "publicKey": "\#(key)", "secretKey": "file:/keys/\#(role).secret" }"#
        }
        let section = "\"curve\": {" + entries.joined(separator: ", ") + "}"
        return sampleConfig.replacingOccurrences(
            of: #""timers": { "cleengPollIntervalMs": 50 }"#, with: #""timers": { "cleengPollIntervalMs": 50 }, "# + section)
    }

    /// A role's key file that others may read is refused: the key is the role's whole authority.
    @Test func aKeyFileOthersMayReadIsRefused() throws {
        let files = ["/secrets/tp-notify": "notify-pass\n", "/keys/signer.secret": Self.key("s")]
        func load(mode: UInt32) throws -> CurveConfig {
            var s = sources(files: files)
            s.fileMode = { path in 0o100000 | (path == "/keys/signer.secret" ? mode : 0o600) }
            return try #require(try parse(Self.config(), s).curve)
        }
        #expect(try load(mode: 0o600).secretKey(of: .signer).reveal() == Self.key("s"))
        #expect(try load(mode: 0o400).secretKey(of: .signer).reveal() == Self.key("s"))
        #expect { try load(mode: 0o644).secretKey(of: .signer) } throws: { error in
            (error as? ConfigError).map {
                $0.path == "curve.signer.secretKey" && $0.reason.contains("chmod 600") && !$0.reason.contains(Self.key("s"))
            } == true
        }
        #expect(throws: ConfigError.self) { try load(mode: 0o640).secretKey(of: .signer) }
    }

    /// `curve.upstream`: the upstream clients, each with its own key and, optionally, merchants.
    @Test func upstreamClientsAreListedWithTheirMerchants() throws {
        let upstream =
            #", "upstream": [{ "name": "shop-a", "publicKey": "\#(Self.key("A"))", "merchants": ["default"] }, { "name": "all", "publicKey": "\#(Self.key("B"))" }]}"#
        let text = Self.config().replacingOccurrences(of: #"secret" }}"#, with: #"secret" }"# + upstream)
        let curve = try #require(try parse(text).curve)
        #expect(curve.upstream.map(\.name) == ["shop-a", "all"])
        #expect(curve.upstream[0].merchants == ["default"] && curve.upstream[1].merchants == nil)
        #expect(curve.upstreamClient(userId: "upstream:shop-a")?.publicKey == Self.key("A"))
        #expect(curve.upstreamClient(userId: "signer") == nil)
        #expect(throws: ConfigError.self) { try parse(text.replacingOccurrences(of: Self.key("B"), with: Self.key("L"))) }
        #expect(throws: ConfigError.self) { try parse(text.replacingOccurrences(of: #""name": "all""#, with: #""name": "shop-a""#)) }
        #expect(throws: ConfigError.self) { try parse(text.replacingOccurrences(of: #""merchants": ["default"]"#, with: #""merchants": []"#)) }
    }

    @Test func withoutTheSectionThereIsNoCurve() throws {
        #expect(try parse(sampleConfig).curve == nil)
    }

    @Test func eachRoleReadsOnlyItsOwnSecretKeyWhenAsked() throws {
        // Only the signer's key file exists, as on the signer's host.
        var files = ["/secrets/tp-notify": "notify-pass\n"]
        files["/keys/signer.secret"] = Self.key("s") + "\n"
        let loaded = try parse(Self.config(), sources(files: files))
        let curve = try #require(loaded.curve)
        #expect(curve.publicKey(of: .ledger) == Self.key("L"))
        #expect(curve.publicKey(of: .callbacks) == Self.key("C"))
        #expect(try curve.secretKey(of: .signer).reveal() == Self.key("s"))
        #expect(throws: ConfigError(path: "curve.ledger.secretKey", reason: "cannot read file /keys/ledger.secret")) {
            try curve.secretKey(of: .ledger)
        }
        // Even a process that holds no provider secrets (the submitter) reads its own key.
        var submitterFiles = files
        submitterFiles["/keys/submitter.secret"] = Self.key("u")
        let withoutSecrets = try parse(Self.config(), sources(files: submitterFiles).withoutSecrets)
        #expect(try withoutSecrets.curve?.secretKey(of: .submitter).reveal() == Self.key("u"))
    }

    @Test func aSecretKeyThatIsNotAKeyIsRefusedWithoutShowingIt() throws {
        let files = ["/secrets/tp-notify": "notify-pass\n", "/keys/poller.secret": "not-a-key"]
        let curve = try #require(try parse(Self.config(), sources(files: files)).curve)
        #expect(throws: ConfigError(path: "curve.poller.secretKey", reason: "must be a 40-character Z85 CURVE key")) {
            try curve.secretKey(of: .poller)
        }
    }

    @Test func everyRoleIsRequiredWithItsOwnWellFormedKey() throws {
        #expect(throws: ConfigError(path: "curve.poller", reason: "is required")) { try parse(Self.config(omitting: "poller")) }
        #expect(throws: ConfigError(path: "curve.signer.publicKey", reason: "must be a 40-character Z85 CURVE key")) {
            try parse(Self.config(publicKey: { $0 == "signer" ? "short" : Self.publicKey($0) }))
        }
        #expect(throws: ConfigError(path: "curve", reason: "every role, upstream client and operator needs its own key pair")) {
            try parse(Self.config(publicKey: { _ in Self.key("K") }))
        }
        let typo = Self.config().replacingOccurrences(of: #""poller": {"#, with: #""pollers": {}, "poller": {"#)
        #expect(throws: ConfigError(path: "curve.pollers", reason: "unknown key")) { try parse(typo) }
    }

    /// `nextPublicKey`: the key pair replacing a role's during a rotation.
    @Test func aRoleMayNameTheKeyReplacingItsOwn() throws {
        let next = Self.key("N")
        let text = Self.config().replacingOccurrences(
            of: #""publicKey": "\#(Self.publicKey("signer"))""#, with: #""publicKey": "\#(Self.publicKey("signer"))", "nextPublicKey": "\#(next)""#)
        let curve = try #require(try parse(text).curve)
        #expect(curve.publicKeys(of: .signer) == [Self.publicKey("signer"), next])
        #expect(curve.nextPublicKey(of: .signer) == next && curve.nextPublicKey(of: .ledger) == nil)
        #expect(curve.publicKeys(of: .ledger) == [Self.publicKey("ledger")])
        let cases: [(String, String)] = [
            (next, "curve: every role, upstream client and operator needs its own key pair"),
            ("short", "curve.signer.nextPublicKey: must be a 40-character Z85 CURVE key"),
            (Self.publicKey("signer"), "curve.signer.nextPublicKey: must differ from publicKey"),
            (Self.publicKey("poller"), "curve: every role, upstream client and operator needs its own key pair"),
        ]
        for (value, expected) in cases {
            var bad = text.replacingOccurrences(of: #""nextPublicKey": "\#(next)""#, with: #""nextPublicKey": "\#(value)""#)
            // The next key also given to another role.
            if value == next {
                bad = bad.replacingOccurrences(
                    of: #""publicKey": "\#(Self.publicKey("callbacks"))""#,
                    with: #""publicKey": "\#(Self.publicKey("callbacks"))", "nextPublicKey": "\#(next)""#)
            }
            do {
                _ = try parse(bad)
                Issue.record("accepted \(value)")
            } catch {
                #expect(error.description.hasPrefix(expected), "\(value): \(error)")
            }
        }
    }
}

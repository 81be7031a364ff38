import Cleeng
import Connectors
import Foundation
import PaypipeCore
import Testing

let sampleConfig = """
    {
      "merchants": {
        "default": {
          "trustpayments": { "baseURL": "http://127.0.0.1:9101", "siteReference": "test_site12345",
                             "jwtIssuer": "jwt.user", "jwtSecret": "env:TP_JWT_SECRET",
                             "webservicesUser": "ws@example.com", "webservicesPassword": "env:TP_WS_PASSWORD",
                             "notificationPassword": "file:/secrets/tp-notify" },
          "nets":     { "baseURL": "http://127.0.0.1:9102", "secretKey": "env:NETS_SECRET",
                        "webhookAuthorization": "env:NETS_WEBHOOK_AUTH" },
          "phonepe":  { "baseURL": "http://127.0.0.1:9103", "merchantId": "MERCHANTUAT",
                        "saltKey": "env:PHONEPE_SALT", "saltIndex": "1",
                        "callbackURL": "https://merchant.example/callbacks/phonepe" },
          "cleeng":   { "receiptURL": "http://127.0.0.1:9104/checkout/apple_inapp.php",
                        "apiURL": "http://127.0.0.1:9104/3.0/json-rpc",
                        "username": "publisher", "password": "env:CLEENG_PASSWORD" },
          "viva":     { "merchantKey": "SG23323424EXS3", "appId": "com.example.app", "callback": "interapp-callback" }
        },
        "viva-only": { "viva": { "merchantKey": "K", "appId": "A", "callback": "cb" } }
      },
      "timers": { "cleengPollIntervalMs": 50 }
    }
    """

let sampleEnvironment = [
    "TP_JWT_SECRET": "jwt-secret-value", "TP_WS_PASSWORD": "ws-pass", "NETS_SECRET": "nets-secret",
    "NETS_WEBHOOK_AUTH": "hook-auth", "PHONEPE_SALT": "salt-value", "CLEENG_PASSWORD": "cleeng-pass",
]

func sources(
    _ environment: [String: String] = sampleEnvironment, files: [String: String] = ["/secrets/tp-notify": "notify-pass\n"]
) -> PaypipeConfig.Sources {
    PaypipeConfig.Sources(environment: { environment[$0] }, readFile: { files[$0].map { Array($0.utf8) } })
}

func parse(_ text: String, _ s: PaypipeConfig.Sources = sources()) throws(ConfigError) -> PaypipeConfig {
    try PaypipeConfig.parse(Array(text.utf8), sources: s)
}

@Suite("Config")
struct ConfigTests {
    @Test func tracingIsOffUnlessConfiguredAndItsSectionLoads() throws {
        #expect(try parse(sampleConfig).tracing == nil)
        let text = sampleConfig.replacingFirst(
            #""timers": {"#,
            with: #""tracing": { "otlpEndpoint": "https://otel.example:4318/", "sampleRatio": 0.25 }, "timers": {"#)
        let tracing = try #require(try parse(text).tracing)
        #expect(tracing.otlpEndpoint == "https://otel.example:4318/" && tracing.sampleRatio == 0.25)
        let minimal = sampleConfig.replacingFirst(#""timers": {"#, with: #""tracing": { "otlpEndpoint": "http://127.0.0.1:4318" }, "timers": {"#)
        #expect(try parse(minimal).tracing?.sampleRatio == 1)
    }

    @Test(arguments: [
        (#"{}"#, "tracing.otlpEndpoint: is required: the collector's base URL, e.g. http://127.0.0.1:4318"),
        (#"{"otlpEndpoint": "127.0.0.1:4318"}"#, "tracing.otlpEndpoint: must be an http:// or https:// URL"),
        (#"{"otlpEndpoint": "http://c:4318", "protocol": "http/json"}"#, "tracing.protocol: unknown key"),
        (#"{"otlpEndpoint": "http://c:4318", "sampleRatio": 0}"#, "tracing.sampleRatio: must be a number above 0 and at most 1"),
        (#"{"otlpEndpoint": "http://c:4318", "sampleRatio": 1.5}"#, "tracing.sampleRatio: must be a number above 0 and at most 1"),
        (#"{"otlpEndpoint": "http://c:4318", "sampleRatio": "all"}"#, "tracing.sampleRatio: must be a number above 0 and at most 1"),
    ])
    func tracingMistakesAreNamed(section: String, expected: String) {
        do {
            _ = try parse(sampleConfig.replacingFirst(#""timers": {"#, with: #""tracing": "# + section + #", "timers": {"#))
            Issue.record("expected \(expected)")
        } catch {
            #expect(error.description == expected)
        }
    }

    @Test func aMerchantsDunningLoadsAndDefaultsToTheSchedulesRetries() throws {
        let defaults = try parse(sampleConfig).merchant("default").dunning
        #expect(defaults.retryAfterDays == nil && defaults.onExhausted == .pastDue && defaults.afterUnpaidCycles == 1)
        let text = sampleConfig.replacingFirst(
            #""viva-only": {"#,
            with: #""strict": { "dunning": { "retryAfterDays": [2, 5], "onExhausted": "cancel", "afterUnpaidCycles": 3 } }, "viva-only": {"#)
        let dunning = try parse(text).merchant("strict").dunning
        #expect(dunning.retryAfterDays == [2, 5] && dunning.onExhausted == .cancel && dunning.afterUnpaidCycles == 3)
        #expect(try parse(text).merchant("default").dunning == defaults)
    }

    @Test(arguments: [
        (#"{"onExhausted": "suspend"}"#, #"merchants.m.dunning.onExhausted: must be one of past_due, pause, cancel, got "suspend""#),
        (#"{"retryAfterDays": [0]}"#, "merchants.m.dunning.retryAfterDays: must be a list of at most 20 whole days from 1 to 365"),
        (#"{"retryAfterDays": 3}"#, "merchants.m.dunning.retryAfterDays: must be a list of at most 20 whole days from 1 to 365"),
        (#"{"afterUnpaidCycles": 0}"#, "merchants.m.dunning.afterUnpaidCycles: must be a positive integer"),
        (#"{"afterUnpaidCycles": 25}"#, "merchants.m.dunning.afterUnpaidCycles: must be from 1 to 24"),
        (#"{"retries": [1]}"#, "merchants.m.dunning.retries: unknown key"),
    ])
    func dunningMistakesNameTheKey(section: String, expected: String) {
        do {
            _ = try parse(sampleConfig.replacingFirst(#""viva-only": {"#, with: #""m": { "dunning": "# + section + #" }, "viva-only": {"#))
            Issue.record("expected \(expected)")
        } catch {
            #expect(error.description == expected)
        }
    }

    @Test func theProtocolExampleLoadsWithIndirection() throws {
        let config = try parse(sampleConfig)
        let merchant = try config.merchant("default")
        let tp = try #require(merchant.trustpayments)
        #expect(tp.jwtSecret.reveal() == "jwt-secret-value")
        #expect(tp.notificationPassword.reveal() == "notify-pass")  // one trailing newline dropped
        #expect(tp.siteReference == "test_site12345")
        #expect(merchant.phonepe?.saltIndex == "1")
        #expect(config.timers[.cleengPollInterval] == 50)
        #expect(config.timers[.cleengGiveUp] == 60000)
        #expect(config.endpoints.intake == "tcp://127.0.0.1:5550")
        #expect(config.endpoints.callbacks == "127.0.0.1:8080")
    }

    @Test func pendingTimersAndTheNetsWebhookURLAreOptional() throws {
        let defaults = try parse(sampleConfig)
        #expect(defaults.timers.pendingResolveAfterMs == 900_000 && defaults.timers.pendingExpireAfterMs == 86_400_000)
        #expect(defaults.merchants["default"]?.nets?.webhookURL == nil)
        let set =
            sampleConfig
            .replacingFirst(
                #""timers": { "cleengPollIntervalMs": 50 }"#, with: #""timers": { "pendingResolveAfterMs": 1000, "pendingExpireAfterMs": 5000 }"#
            )
            .replacingFirst(
                #""webhookAuthorization": "env:NETS_WEBHOOK_AUTH" }"#,
                with: #""webhookAuthorization": "env:NETS_WEBHOOK_AUTH", "webhookURL": "https://hooks.example/callbacks/nets" }"#)
        let config = try parse(set)
        #expect(config.timers.pendingResolveAfterMs == 1000 && config.timers.pendingExpireAfterMs == 5000)
        #expect(config.merchants["default"]?.nets?.webhookURL == "https://hooks.example/callbacks/nets")
    }

    @Test func phonePeCallbackSchemeIsOptional() throws {
        #expect(try parse(sampleConfig).merchant("default").phonepe?.callbackScheme == nil)
        let withScheme = sampleConfig.replacingOccurrences(
            of: #""callbackURL": "https://merchant.example/callbacks/phonepe" }"#,
            with: #""callbackURL": "https://merchant.example/callbacks/phonepe", "callbackScheme": "merchantapp" }"#)
        #expect(withScheme != sampleConfig)
        #expect(try parse(withScheme).merchant("default").phonepe?.callbackScheme == "merchantapp")
        let notAString = withScheme.replacingOccurrences(of: #""merchantapp""#, with: "7")
        #expect(throws: ConfigError.self) { try parse(notAString) }
    }

    @Test func environmentOverridesEndpoints() throws {
        var env = sampleEnvironment
        env["PAYPIPE_INTAKE"] = "tcp://127.0.0.1:6000"
        env["PAYPIPE_OUTCOMES"] = "tcp://127.0.0.1:6001"
        env["PAYPIPE_CALLBACK_ADDR"] = "0.0.0.0:9000"
        let config = try parse(sampleConfig, sources(env))
        #expect(config.endpoints.intake == "tcp://127.0.0.1:6000")
        #expect(config.endpoints.outcomes == "tcp://127.0.0.1:6001")
        #expect(config.endpoints.callbacks == "0.0.0.0:9000")
    }

    @Test func unknownMerchantAndMissingProviderAreRejections() throws {
        let config = try parse(sampleConfig)
        #expect(throws: Rejection(.unknownMerchant, field: "merchant", "merchant \"nobody\" is not configured")) {
            try config.merchant("nobody")
        }
        let vivaOnly = try config.merchant("viva-only")
        do {
            _ = try vivaOnly.require(\.nets, .nets)
            Issue.record("expected MISSING_CREDENTIALS")
        } catch {
            #expect(error.code == .missingCredentials)
        }
    }

    @Test(arguments: [
        (#""jwtIssuer": "jwt.user", "#, #""jwtIssuer": "jwt.user", "typo": 1, "#, "merchants.default.trustpayments.typo: unknown key"),
        (#""jwtIssuer": "jwt.user", "#, "", "merchants.default.trustpayments.jwtIssuer: is required"),
        (#""baseURL": "http://127.0.0.1:9102""#, #""baseURL": "ftp://x""#, "merchants.default.nets.baseURL: must be an http:// or https:// URL"),
        (
            #""timers": { "cleengPollIntervalMs": 50 }"#, #""timers": { "cleengPollIntervalMs": -1 }"#,
            "timers.cleengPollIntervalMs: must be a positive integer"
        ),
        (#""timers": {"#, #""timerz": {"#, "timerz: unknown key"),
        (
            #""timers": { "cleengPollIntervalMs": 50 }"#, #""timers": { "pendingResolveAfterMs": 0 }"#,
            "timers.pendingResolveAfterMs: must be a positive integer"
        ),
        (
            #""timers": { "cleengPollIntervalMs": 50 }"#, #""timers": { "pendingResolveAfterMs": 2000, "pendingExpireAfterMs": 1000 }"#,
            "timers.pendingExpireAfterMs: must be at least pendingResolveAfterMs"
        ),
        (
            #""webhookAuthorization": "env:NETS_WEBHOOK_AUTH" }"#,
            #""webhookAuthorization": "env:NETS_WEBHOOK_AUTH", "webhookURL": "hooks.example" }"#,
            "merchants.default.nets.webhookURL: must be an http:// or https:// URL"
        ),
    ])
    func mistakesAreErrorsNamingTheKey(original: String, replacement: String, expected: String) {
        let text = sampleConfig.replacingFirst(original, with: replacement)
        #expect(throws: ConfigError.self) { try parse(text) }
        do {
            _ = try parse(text)
        } catch {
            #expect(error.description == expected)
        }
    }

    static let vivaSection = #""viva": { "merchantKey": "K", "appId": "A", "callback": "cb" }"#

    @Test func vivaConfirmationKeysLoad() throws {
        let text = sampleConfig.replacingFirst(
            Self.vivaSection,
            with: #"""
                "viva": { "merchantKey": "K", "appId": "A", "callback": "cb", "apiURL": "https://demo-api.vivapayments.com/",
                          "accountsURL": "https://demo-accounts.vivapayments.com", "apiClientId": "id.apps.vivapayments.com",
                          "apiClientSecret": "env:VIVA_API_SECRET", "isvClientSecret": "file:/secrets/viva-isv" }
                """#)
        var env = sampleEnvironment
        env["VIVA_API_SECRET"] = "viva-api-secret"
        let viva = try #require(
            try parse(text, sources(env, files: ["/secrets/tp-notify": "n", "/secrets/viva-isv": "isv-secret\n"])).merchant("viva-only").viva)
        let api = try #require(viva.api)
        #expect(api.apiURL == "https://demo-api.vivapayments.com")
        #expect(api.accountsURL == "https://demo-accounts.vivapayments.com")
        #expect(api.clientId == "id.apps.vivapayments.com" && api.clientSecret.reveal() == "viva-api-secret")
        #expect(viva.isvClientSecret?.reveal() == "isv-secret")
        #expect(viva.acceptUnconfirmedCallbacks == false)

        // Credentials alone: Viva's live hosts.
        let live = try #require(
            try parse(
                sampleConfig.replacingFirst(
                    Self.vivaSection,
                    with: #""viva": { "merchantKey": "K", "appId": "A", "callback": "cb", "apiClientId": "i", "apiClientSecret": "s" }"#)
            ).merchant("viva-only").viva?.api)
        #expect(live.apiURL == "https://api.vivapayments.com" && live.accountsURL == "https://accounts.vivapayments.com")
        let optIn = try parse(
            sampleConfig.replacingFirst(
                Self.vivaSection, with: #""viva": { "merchantKey": "K", "appId": "A", "callback": "cb", "acceptUnconfirmedCallbacks": true }"#))
        #expect(try optIn.merchant("viva-only").viva?.acceptUnconfirmedCallbacks == true)
        #expect(try optIn.merchant("viva-only").viva?.api == nil)
    }

    @Test(arguments: [
        (#""apiClientId": "i""#, "merchants.viva-only.viva.apiClientSecret: is required with apiClientId"),
        (#""apiClientSecret": "s""#, "merchants.viva-only.viva.apiClientId: is required with apiClientSecret"),
        (#""apiURL": "https://a.example""#, "merchants.viva-only.viva.apiClientId: is required with apiURL/accountsURL (with apiClientSecret)"),
        (
            #""apiClientId": "i", "apiClientSecret": "s", "accountsURL": "ftp://x""#,
            "merchants.viva-only.viva.accountsURL: must be an http:// or https:// URL"
        ),
        (#""acceptUnconfirmedCallbacks": "yes""#, "merchants.viva-only.viva.acceptUnconfirmedCallbacks: must be true or false"),
    ])
    func vivaConfirmationMistakesAreNamed(keys: String, expected: String) {
        let text = sampleConfig.replacingFirst(
            Self.vivaSection, with: #""viva": { "merchantKey": "K", "appId": "A", "callback": "cb", "# + keys + " }")
        do {
            _ = try parse(text)
            Issue.record("expected \(expected)")
        } catch {
            #expect(error.description == expected)
        }
    }

    @Test func aMissingEnvironmentVariableOrFileIsNamedButNoSecretIs() {
        var env = sampleEnvironment
        env["NETS_SECRET"] = nil
        do {
            _ = try parse(sampleConfig, sources(env))
            Issue.record("expected an error")
        } catch {
            #expect(error.description == "merchants.default.nets.secretKey: environment variable NETS_SECRET is not set")
        }
        do {
            _ = try parse(sampleConfig, sources(files: [:]))
            Issue.record("expected an error")
        } catch {
            #expect(error.description == "merchants.default.trustpayments.notificationPassword: cannot read file /secrets/tp-notify")
        }
    }

    /// What a production pipeline must not run with, unless the config says
    /// `insecureForTesting`: plaintext links off loopback, a secret whose value the demo config
    /// ships (here through the environment, as deploy/.env.example used to set it), and the
    /// schedules' clock offset file. `paypipe config check` reports the same.
    @Test func productionRefusesPlaintextLinksOffLoopbackDemoSecretsAndTheClockOffset() throws {
        #expect(try parse(sampleConfig).unsafeForProduction.isEmpty)
        var environment = sampleEnvironment
        environment["NETS_WEBHOOK_AUTH"] = "demoWebhookAuth123"
        let timers = #""timers": { "cleengPollIntervalMs": 50 }"#
        let unsafe = sampleConfig.replacingOccurrences(
            of: timers,
            with: timers
                + #", "endpoints": { "intake": "tcp://0.0.0.0:5550", "signQueue": "tcp://ledger:5551", "results": "tcp://127.0.0.1:5554", "pollQueue": "ipc:///run/poll" }, "schedules": { "clockOffsetFile": "/tmp/offset" }"#
        )
        let expected = ["endpoints.intake", "endpoints.signQueue", "merchants.default.nets.webhookAuthorization", "schedules.clockOffsetFile"]
        let errors = try parse(unsafe, sources(environment)).unsafeForProduction
        #expect(errors.map(\.path) == expected)
        #expect(errors.allSatisfy { $0.reason.contains("insecureForTesting: true allows it") }, "\(errors)")
        #expect(!"\(errors)".contains("demoWebhookAuth123"))
        let checked = PaypipeConfig.check(Array(unsafe.utf8), sources: sources(environment), sections: StandardConnectors.sections)
        #expect(checked.map(\.path) == expected)

        let allowed = unsafe.replacingOccurrences(of: timers, with: #""insecureForTesting": true, "# + timers)
        #expect(try parse(allowed, sources(environment)).unsafeForProduction.isEmpty)
        #expect(PaypipeConfig.check(Array(allowed.utf8), sources: sources(environment), sections: StandardConnectors.sections).isEmpty)
    }

    /// Every secret of the demo config (`paypipe up`, the sandbox) is a demo secret: the demo
    /// config passes only because it says `insecureForTesting`.
    @Test func everySecretOfTheDemoConfigIsRefusedWithoutTheTestingFlag() throws {
        let demo = DemoConfig.text(sandboxURL: "http://127.0.0.1:9100")
        #expect(try parse(demo).unsafeForProduction.isEmpty)
        let withoutFlag = demo.replacingOccurrences(of: #""insecureForTesting": true"#, with: #""insecureForTesting": false"#)
        #expect(withoutFlag != demo)
        let paths = try parse(withoutFlag).unsafeForProduction.map(\.path)
        #expect(
            Set(paths) == [
                "merchants.default.trustpayments.jwtSecret", "merchants.default.trustpayments.webservicesPassword",
                "merchants.default.trustpayments.notificationPassword", "merchants.default.nets.secretKey",
                "merchants.default.nets.webhookAuthorization", "merchants.default.phonepe.saltKey", "merchants.default.cleeng.password",
                "merchants.default.viva.apiClientSecret", "merchants.default.viva.isvClientSecret",
            ])
    }

    /// A `file:` secret its owner's group or anyone else may read is refused, as a CURVE key file
    /// is; the message names the key and the file, never the secret.
    @Test func aSecretFileOthersMayReadIsRefused() throws {
        func load(mode: UInt32) throws(ConfigError) -> PaypipeConfig {
            var s = sources()
            s.fileMode = { _ in 0o100000 | mode }
            return try parse(sampleConfig, s)
        }
        #expect(try load(mode: 0o600).merchants["default"]?.trustpayments?.notificationPassword.reveal() == "notify-pass")
        #expect(try load(mode: 0o400).merchants["default"]?.trustpayments?.notificationPassword.reveal() == "notify-pass")
        for mode: UInt32 in [0o644, 0o640, 0o604] {
            #expect {
                try load(mode: mode)
            } throws: { error in
                (error as? ConfigError).map {
                    $0.path == "merchants.default.trustpayments.notificationPassword" && $0.reason.contains("/secrets/tp-notify")
                        && $0.reason.contains("chmod 600") && !$0.reason.contains("notify-pass")
                } == true
            }
        }
    }

    /// The placeholder shipped files hold in place of a secret is refused wherever a secret is
    /// read, with the key to set.
    @Test func thePlaceholderSecretIsRefused() {
        var environment = sampleEnvironment
        environment["NETS_WEBHOOK_AUTH"] = "CHANGE_ME"
        #expect {
            try parse(sampleConfig, sources(environment))
        } throws: { error in
            (error as? ConfigError)?.description
                == "merchants.default.nets.webhookAuthorization: is the placeholder CHANGE_ME: set the real secret (docs/deploy.md)"
        }
    }

    @Test func secretsAreRedactedEverywhere() throws {
        let config = try parse(sampleConfig)
        let tp = try #require(config.merchants["default"]?.trustpayments)
        let renderings = ["\(tp.jwtSecret)", String(describing: tp.jwtSecret), String(reflecting: tp.jwtSecret), "\(tp)", String(reflecting: tp)]
        for text in renderings {
            #expect(!text.contains("jwt-secret-value"), "\(text)")
            #expect(!text.contains("ws-pass"))
        }
        #expect(tp.jwtSecret.description == "<redacted>")
        #expect(tp.jwtSecret.matches(Array("jwt-secret-value".utf8)))
        #expect(!tp.jwtSecret.matches(Array("jwt-secret-valuf".utf8)))
        #expect(!tp.jwtSecret.matches(Array("jwt-secret-value-longer".utf8)))
    }

    @Test func requestDescriptionsRedactCredentials() {
        let request = HTTPRequestSpec(
            method: .POST, url: "http://x/v1/payments",
            headers: [HTTPHeader("Authorization", "raw-key"), HTTPHeader("X-VERIFY", "abc###1"), HTTPHeader("Accept", "json")])
        #expect(!request.description.contains("raw-key"))
        #expect(!request.description.contains("abc###1"))
        #expect(request.description.contains("Accept: json"))
    }

    @Test func constantTimeComparison() {
        #expect(ConstantTime.equals([1, 2, 3], [1, 2, 3]))
        #expect(!ConstantTime.equals([1, 2, 3], [1, 2, 4]))
        #expect(!ConstantTime.equals([1, 2], [1, 2, 0]))
        #expect(ConstantTime.hexEquals("ABCdef", "abcDEF"))
        #expect(Digest.sha256Hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }

    @Test func hexOfContiguousAndOtherSequences() {
        let bytes: [UInt8] = [0x00, 0x0F, 0xA5, 0xFF, 0x10]
        #expect(Digest.hex(bytes) == "000fa5ff10")
        #expect(Digest.hex(bytes, uppercase: true) == "000FA5FF10")
        #expect(Digest.hex(bytes.lazy.map { $0 }) == "000fa5ff10")
        #expect(Digest.hex(bytes.dropFirst(2), uppercase: true) == "A5FF10")
        #expect(Digest.hex([UInt8]()) == "")
    }

    @Test func civilDatesClampAndValidate() {
        #expect(CivilDate(iso8601: "2026-02-29") == nil)
        #expect(CivilDate(iso8601: "2028-02-29") != nil)
        #expect(CivilDate(iso8601: "2026-1-01") == nil)
        #expect(CivilDate(year: 2026, month: 1, day: 31)!.addingMonths(1).iso8601 == "2026-02-28")
        #expect(CivilDate(year: 2026, month: 12, day: 15)!.addingMonths(2).iso8601 == "2027-02-15")
        #expect(CivilDate(year: 2026, month: 12, day: 31)!.addingDays(1).iso8601 == "2027-01-01")
    }

    /// What `Timestamp.iso8601` writes reads back to the same millisecond, and nothing else reads.
    @Test func timestampsReadBackWhatTheyWrite() {
        for milliseconds: Int64 in [0, 1_795_000_000_123, 951_782_400_999, -1] {
            #expect(Timestamp.milliseconds(iso8601: Timestamp.iso8601(milliseconds: milliseconds)) == milliseconds)
        }
        #expect(Timestamp.milliseconds(iso8601: "2026-11-21T05:00:00.123Z") == 1_795_237_200_123)
        for text in ["2026-11-21T05:00:00Z", "2026-11-21T24:00:00.000Z", "2026-02-29T05:00:00.000Z", "2026-11-21T05:00:00.123+01:00", ""] {
            #expect(Timestamp.milliseconds(iso8601: text) == nil, "\(text)")
        }
    }
}

extension String {
    func replacingFirst(_ target: String, with replacement: String) -> String {
        guard let range = range(of: target) else { return self }
        return replacingCharacters(in: range, with: replacement)
    }
}

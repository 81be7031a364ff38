#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A configuration problem, naming the key path (never a secret value).
public struct ConfigError: Error, Sendable, Equatable, CustomStringConvertible {
    public let path: String
    public let reason: String
    public init(path: String, reason: String) {
        self.path = path
        self.reason = reason
    }
    public var description: String { path.isEmpty ? reason : "\(path): \(reason)" }
}

extension PaypipeConfig {
    /// Where the environment and files come from, replaceable in tests.
    public struct Sources: Sendable {
        public var environment: @Sendable (String) -> String?
        public var readFile: @Sendable (String) -> [UInt8]?
        /// False for stages that must not hold secrets (the submitter): secret values are then
        /// neither read nor required, and come back empty.
        public var resolveSecrets = true
        /// A file's permission bits (nil: unknown), for refusing key files others may read.
        public var fileMode: @Sendable (String) -> UInt32?

        public init(
            environment: @escaping @Sendable (String) -> String?, readFile: @escaping @Sendable (String) -> [UInt8]?,
            fileMode: @escaping @Sendable (String) -> UInt32? = { _ in nil }
        ) {
            self.environment = environment
            self.readFile = readFile
            self.fileMode = fileMode
        }

        public var withoutSecrets: Sources { withoutSecrets(except: []) }

        /// Without secrets but those of the settings named (e.g. `isvClientSecret`).
        public func withoutSecrets(except settings: Set<String>) -> Sources {
            var copy = self
            copy.resolveSecrets = false
            copy.secretsResolvedAnyway = settings
            return copy
        }

        /// Secret settings read even when `resolveSecrets` is false.
        public var secretsResolvedAnyway: Set<String> = []

        public static let process = Sources(
            environment: { name in getenv(name).map { String(cString: $0) } },
            readFile: { path in readWholeFile(path) },
            fileMode: { path in
                var status = stat()
                return stat(path, &status) == 0 ? UInt32(status.st_mode) : nil
            })
    }

    /// Loads the file at `path`, then applies the PAYPIPE_INTAKE, PAYPIPE_OUTCOMES and
    /// PAYPIPE_CALLBACK_ADDR overrides. `sections`: the merchant section of every provider
    /// the process knows (its connectors' `settingsSection`); a merchant key for any other
    /// provider is an unknown key.
    public static func load(path: String, sources: Sources = .process, sections: [any MerchantSection.Type]) throws(ConfigError) -> PaypipeConfig {
        guard let bytes = sources.readFile(path) else {
            throw ConfigError(path: "", reason: "cannot read config file \(path)")
        }
        return try parse(bytes, sources: sources, sections: sections)
    }

    public static func parse(_ bytes: [UInt8], sources: Sources = .process, sections: [any MerchantSection.Type]) throws(ConfigError) -> PaypipeConfig
    {
        let document: JSONValue
        do {
            document = try JSONValue.parse(bytes)
        } catch {
            throw ConfigError(path: "", reason: "config is not valid JSON: \(error)")
        }
        var root = try ConfigReader(document, path: "", sources: sources)
        var config = PaypipeConfig(merchants: [:])
        let demoSecrets = demoSecretValues(sections)
        var merchantsReader = try root.object("merchants")
        for name in merchantsReader.keys {
            var m = try merchantsReader.object(name)
            var merchant = MerchantConfig()
            for section in sections {
                guard var r = try m.optionalObject(section.provider.rawValue) else { continue }
                merchant.sections[section.provider] = try section.init(&r)
                try r.finish()
                config.demoSecretPaths += r.secretsRead.filter { read in demoSecrets.contains(read.value.reveal()) }.map(\.path)
            }
            merchant.subscriptionEvents = try m.optionalBool("subscriptionEvents") ?? false
            if var d = try m.optionalObject("dunning") { merchant.dunning = try Dunning.parse(&d) }
            try m.finish()
            config.merchants[name] = merchant
        }
        try merchantsReader.finish()
        if config.merchants.isEmpty { throw ConfigError(path: "merchants", reason: "at least one merchant is required") }

        if var e = try root.optionalObject("endpoints") {
            config.endpoints.intake = try e.optionalString("intake") ?? config.endpoints.intake
            config.endpoints.outcomes = try e.optionalString("outcomes") ?? config.endpoints.outcomes
            config.endpoints.outcomesReplay = try e.optionalString("outcomesReplay") ?? config.endpoints.outcomesReplay
            config.endpoints.callbacks = try e.optionalString("callbacks") ?? config.endpoints.callbacks
            config.endpoints.signQueue = try e.optionalString("signQueue") ?? config.endpoints.signQueue
            config.endpoints.signedIn = try e.optionalString("signedIn") ?? config.endpoints.signedIn
            config.endpoints.signedOut = try e.optionalString("signedOut") ?? config.endpoints.signedOut
            config.endpoints.results = try e.optionalString("results") ?? config.endpoints.results
            config.endpoints.ledgerMetrics = try e.optionalString("ledgerMetrics") ?? config.endpoints.ledgerMetrics
            config.endpoints.callbacksMetrics = try e.optionalString("callbacksMetrics") ?? config.endpoints.callbacksMetrics
            config.endpoints.ledgerScrape = try e.optionalString("ledgerScrape")
            if let value = e.take("callbacksTrustedProxies") {
                guard case .array(let items) = value, items.count <= 64, case let addresses = items.compactMap(\.stringValue),
                    addresses.count == items.count, addresses.allSatisfy(ForwardedClient.isIPAddress)
                else {
                    throw ConfigError(path: e.child("callbacksTrustedProxies"), reason: "must be a list of at most 64 IPv4 or IPv6 addresses")
                }
                config.endpoints.callbacksTrustedProxies = addresses
            }
            config.endpoints.ledgerRPC = try e.optionalString("ledgerRPC") ?? config.endpoints.ledgerRPC
            config.endpoints.pollQueue = try e.optionalString("pollQueue") ?? config.endpoints.pollQueue
            config.endpoints.admin = try e.optionalString("admin") ?? config.endpoints.admin
            try e.finish()
        }
        if var t = try root.optionalObject("timers") {
            let d = config.timers
            config.timers.entitlementRecheckMs = try t.positiveInteger("entitlementRecheckMs") ?? d.entitlementRecheckMs
            config.timers.httpConnectTimeoutMs = try t.positiveInteger("httpConnectTimeoutMs") ?? d.httpConnectTimeoutMs
            config.timers.httpRequestTimeoutMs = try t.positiveInteger("httpRequestTimeoutMs") ?? d.httpRequestTimeoutMs
            config.timers.pendingResolveAfterMs = try t.positiveInteger("pendingResolveAfterMs") ?? d.pendingResolveAfterMs
            config.timers.pendingExpireAfterMs = try t.positiveInteger("pendingExpireAfterMs") ?? d.pendingExpireAfterMs
            guard config.timers.pendingExpireAfterMs >= config.timers.pendingResolveAfterMs else {
                throw ConfigError(path: t.child("pendingExpireAfterMs"), reason: "must be at least pendingResolveAfterMs")
            }
            config.timers.leaseMs = try t.positiveInteger("leaseMs") ?? d.leaseMs
            // Renewed every third of the lease: much shorter and the renewals alone load the ledger.
            guard config.timers.leaseMs >= 300 else { throw ConfigError(path: "timers.leaseMs", reason: "must be at least 300 (ms)") }
            // A holder sends a request only while its lease holds for a whole request more, and
            // renews every third of the lease, so two thirds of a lease must exceed a request:
            // a holder that died mid-request has its last request answered or timed out before
            // the lease lapses and the order is resolved again.
            guard config.timers.leaseMs * 2 > config.timers.httpRequestTimeoutMs * 3 else {
                throw ConfigError(
                    path: "timers.leaseMs",
                    reason:
                        "must be more than 1.5 × timers.httpRequestTimeoutMs (\(config.timers.httpRequestTimeoutMs)), so a holder renewing every third of it always has a whole request left"
                )
            }
            config.timers.leaseMaxMs = try t.positiveInteger("leaseMaxMs") ?? d.leaseMaxMs
            guard config.timers.leaseMaxMs > config.timers.leaseMs else {
                throw ConfigError(path: "timers.leaseMaxMs", reason: "must be greater than timers.leaseMs (\(config.timers.leaseMs))")
            }
            config.timers.maxDispatches = try t.positiveInteger("maxDispatches") ?? d.maxDispatches
            for timer in sections.flatMap({ $0.timers }) {
                if let value = try t.positiveInteger(timer.name) { config.timers[timer] = value }
            }
            try t.finish()
        }
        if var c = try root.optionalObject("curve") { config.curve = try CurveConfig.parse(&c) }
        if var r = try root.optionalObject("retention") {
            let d = config.retention
            config.retention.outcomesDays = try r.positiveInteger("outcomesDays") ?? d.outcomesDays
            config.retention.ordersDays = try r.positiveInteger("ordersDays") ?? d.ordersDays
            config.retention.orderKeysDays = try r.positiveInteger("orderKeysDays") ?? d.orderKeysDays
            // A key removed before its order is compacted would take the order's contents with it early.
            guard config.retention.orderKeysDays >= config.retention.ordersDays else {
                throw ConfigError(path: r.child("orderKeysDays"), reason: "must be at least retention.ordersDays (\(config.retention.ordersDays))")
            }
            try r.finish()
        }
        if var s = try root.optionalObject("schedules") {
            config.schedules.retryAfterDays = try s.retryDays("retryAfterDays") ?? config.schedules.retryAfterDays
            config.schedules.batch = try s.positiveInteger("batch") ?? config.schedules.batch
            config.schedules.maxCatchUpCycles = try s.positiveInteger("maxCatchUpCycles") ?? config.schedules.maxCatchUpCycles
            config.schedules.clockOffsetFile = try s.optionalString("clockOffsetFile")
            try s.finish()
        }
        if var s = try root.optionalObject("store") {
            config.storeMigrations = try StoreMigrations.parse(&s)
            config.storeRetryWindowMs = try StoreSettings.retryWindow(&s)
            config.store = try StoreSettings.parse(&s)
        }
        if var t = try root.optionalObject("tracing") { config.tracing = try Tracing.parse(&t) }
        if var i = try root.optionalObject("intake") { config.intake = try Intake.parse(&i) }
        config.insecureForTesting = try root.optionalBool("insecureForTesting") ?? false
        try root.finish()

        if let v = sources.environment("PAYPIPE_INTAKE"), !v.isEmpty { config.endpoints.intake = v }
        if let v = sources.environment("PAYPIPE_OUTCOMES"), !v.isEmpty { config.endpoints.outcomes = v }
        if let v = sources.environment("PAYPIPE_CALLBACK_ADDR"), !v.isEmpty { config.endpoints.callbacks = v }
        return config
    }
}

extension PaypipeConfig.Dunning {
    static func parse(_ d: inout ConfigReader) throws(ConfigError) -> Self {
        var dunning = Self()
        dunning.retryAfterDays = try d.retryDays("retryAfterDays")
        if let action = try d.optionalString("onExhausted") {
            guard let known = Action(rawValue: action) else {
                throw ConfigError(
                    path: d.child("onExhausted"),
                    reason: "must be one of \(Action.allCases.map(\.rawValue).joined(separator: ", ")), got \"\(action.prefix(32))\"")
            }
            dunning.onExhausted = known
        }
        if let cycles = try d.positiveInteger("afterUnpaidCycles") {
            guard cycles <= 24 else { throw ConfigError(path: d.child("afterUnpaidCycles"), reason: "must be from 1 to 24") }
            dunning.afterUnpaidCycles = cycles
        }
        try d.finish()
        return dunning
    }
}

extension PaypipeConfig {
    /// The secret values of the demo config (`MerchantSection.demo` of each of `sections`): the
    /// sandbox's throwaway credentials, public in this repository.
    static func demoSecretValues(_ sections: [any MerchantSection.Type]) -> Set<String> {
        var values: Set<String> = []
        let environment = DemoEnvironment(sandboxURL: "http://127.0.0.1:9", callbacks: "127.0.0.1:8080")
        for section in sections {
            guard var reader = try? ConfigReader(section.demo(environment), path: "", sources: .process) else { continue }
            _ = try? section.init(&reader)
            values.formUnion(reader.secretsRead.map { $0.value.reveal() })
        }
        return values
    }

    /// What this config holds that a production pipeline must not run with, one error per
    /// setting; none with `insecureForTesting`. Every stage refuses to start on any of them, and
    /// `paypipe config check` reports them.
    public var unsafeForProduction: [ConfigError] {
        guard !insecureForTesting else { return [] }
        let allowance = "insecureForTesting: true allows it, for tests and demos only"
        var errors: [ConfigError] = []
        if curve == nil {
            for (key, address) in endpoints.zeroMQLinks where !Self.isLocal(address) {
                errors.append(
                    ConfigError(
                        path: "endpoints.\(key)",
                        reason:
                            "\(address.prefix(100)) is off loopback, and without a curve section every link is plaintext: add a curve section (docs/security.md) or use 127.0.0.1; \(allowance)"
                    ))
            }
        }
        for path in demoSecretPaths {
            errors.append(
                ConfigError(path: path, reason: "is a demo secret shipped with paypipe, readable by anyone: set the real secret; \(allowance)"))
        }
        if schedules.clockOffsetFile != nil {
            errors.append(
                ConfigError(path: "schedules.clockOffsetFile", reason: "moves the schedules' clock and must not be set in production; \(allowance)"))
        }
        return errors
    }

    /// Whether a ZeroMQ address stays on this host: loopback TCP, `ipc://` or `inproc://`.
    static func isLocal(_ address: String) -> Bool {
        if address.hasPrefix("ipc://") || address.hasPrefix("inproc://") { return true }
        guard address.hasPrefix("tcp://"), let colon = address.lastIndex(of: ":") else { return false }
        let host = address[address.index(address.startIndex, offsetBy: 6)..<colon]
        return host == "localhost" || host == "[::1]" || (host.hasPrefix("127.") && host.allSatisfy { $0 == "." || $0.isNumber })
    }
}

extension PaypipeConfig.Endpoints {
    /// Every ZeroMQ address, by its key under `endpoints`.
    var zeroMQLinks: [(String, String)] {
        [
            ("intake", intake), ("outcomes", outcomes), ("outcomesReplay", outcomesReplay), ("signQueue", signQueue), ("signedIn", signedIn),
            ("signedOut", signedOut), ("results", results), ("ledgerRPC", ledgerRPC), ("pollQueue", pollQueue), ("admin", admin),
        ]
    }
}

extension PaypipeConfig.Tracing {
    static func parse(_ t: inout ConfigReader) throws(ConfigError) -> Self {
        guard let endpoint = try t.optionalString("otlpEndpoint") else {
            throw ConfigError(path: t.child("otlpEndpoint"), reason: "is required: the collector's base URL, e.g. http://127.0.0.1:4318")
        }
        guard endpoint.hasPrefix("http://") || endpoint.hasPrefix("https://"), endpoint.utf8.count > 8 else {
            throw ConfigError(path: t.child("otlpEndpoint"), reason: "must be an http:// or https:// URL")
        }
        var tracing = Self(otlpEndpoint: endpoint)
        if let value = t.take("sampleRatio") {
            let ratio: Double? =
                switch value {
                case .integer(let whole): Double(whole)
                case .fraction(let fraction): fraction
                default: nil
                }
            guard let ratio, ratio > 0, ratio <= 1 else {
                throw ConfigError(path: t.child("sampleRatio"), reason: "must be a number above 0 and at most 1")
            }
            tracing.sampleRatio = ratio
        }
        try t.finish()
        return tracing
    }
}

/// Reads one JSON object of the config, remembering which keys were used so that an
/// unknown key (a typo) is reported instead of silently ignored. Every string value may be an
/// `env:NAME` or `file:/path` reference, followed here.
public struct ConfigReader {
    let object: [String: JSONValue]
    public let path: String
    var sources: PaypipeConfig.Sources
    var used: Set<String> = []
    /// Every secret this reader resolved, by key path (which of them are the demo's).
    var secretsRead: [(path: String, value: Secret)] = []

    init(_ value: JSONValue, path: String, sources: PaypipeConfig.Sources) throws(ConfigError) {
        guard case .object(let object) = value else {
            throw ConfigError(path: path, reason: "must be an object, got \(value.typeName)")
        }
        self.object = object
        self.path = path
        self.sources = sources
    }

    public var keys: [String] { object.keys.sorted() }

    public func child(_ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }

    public mutating func take(_ key: String) -> JSONValue? {
        used.insert(key)
        return object[key]
    }

    public mutating func object(_ key: String) throws(ConfigError) -> ConfigReader {
        guard let value = take(key) else { throw ConfigError(path: child(key), reason: "is required") }
        return try ConfigReader(value, path: child(key), sources: sources)
    }

    public mutating func optionalObject(_ key: String) throws(ConfigError) -> ConfigReader? {
        guard let value = take(key) else { return nil }
        return try ConfigReader(value, path: child(key), sources: sources)
    }

    /// A string value after `env:NAME` / `file:/path` indirection.
    public mutating func optionalString(_ key: String) throws(ConfigError) -> String? {
        guard let value = take(key) else { return nil }
        guard let raw = value.stringValue else {
            throw ConfigError(path: child(key), reason: "must be a string, got \(value.typeName)")
        }
        return try resolve(raw, at: child(key))
    }

    public mutating func string(_ key: String) throws(ConfigError) -> String {
        guard let value = try optionalString(key) else { throw ConfigError(path: child(key), reason: "is required") }
        guard !value.isEmpty else { throw ConfigError(path: child(key), reason: "must not be empty") }
        return value
    }

    public mutating func secret(_ key: String) throws(ConfigError) -> Secret {
        guard sources.resolveSecrets || sources.secretsResolvedAnyway.contains(key) || sources.secretsResolvedAnyway.contains(child(key)) else {
            guard take(key)?.stringValue != nil else { throw ConfigError(path: child(key), reason: "is required") }
            return Secret("")
        }
        if let reference = object[key]?.stringValue, reference.hasPrefix("file:") {
            try refuseFileOthersMayRead(String(reference.dropFirst(5)), at: child(key))
        }
        let value = try string(key)
        // The placeholder deploy/.env.example ships in place of every secret.
        guard value != Self.placeholder else {
            throw ConfigError(path: child(key), reason: "is the placeholder \(Self.placeholder): set the real secret (docs/deploy.md)")
        }
        secretsRead.append((child(key), Secret(value)))
        return Secret(value)
    }

    /// The value shipped files hold where a secret must go; refused wherever a secret is read.
    public static let placeholder = "CHANGE_ME"

    /// A secret in a file its owner's group or anyone else may read is refused: whoever can
    /// read it holds the credential.
    func refuseFileOthersMayRead(_ file: String, at path: String) throws(ConfigError) {
        guard let mode = sources.fileMode(file), mode & 0o077 != 0 else { return }
        throw ConfigError(
            path: path, reason: "the secret file \(file) is readable by others (mode \(String(mode & 0o777, radix: 8))): chmod 600 it")
    }

    /// An optional secret; without secrets (the submitter) a present one comes back empty.
    public mutating func optionalSecret(_ key: String) throws(ConfigError) -> Secret? {
        guard object[key] != nil else {
            used.insert(key)
            return nil
        }
        return try secret(key)
    }

    public mutating func optionalURL(_ key: String) throws(ConfigError) -> String? {
        guard object[key] != nil else {
            used.insert(key)
            return nil
        }
        return try url(key)
    }

    public mutating func optionalBool(_ key: String) throws(ConfigError) -> Bool? {
        guard let value = take(key) else { return nil }
        guard case .bool(let flag) = value else { throw ConfigError(path: child(key), reason: "must be true or false") }
        return flag
    }

    public mutating func url(_ key: String) throws(ConfigError) -> String {
        let value = try string(key)
        guard value.hasPrefix("http://") || value.hasPrefix("https://") else {
            throw ConfigError(path: child(key), reason: "must be an http:// or https:// URL")
        }
        return value.hasSuffix("/") ? String(value.dropLast()) : value
    }

    /// A list of retry delays in whole days (`schedules.retryAfterDays`, a merchant's `dunning.retryAfterDays`).
    mutating func retryDays(_ key: String) throws(ConfigError) -> [Int64]? {
        guard let value = take(key) else { return nil }
        guard case .array(let items) = value, items.count <= 20,
            case let days = items.compactMap(\.integerValue), days.count == items.count, days.allSatisfy({ (1...365).contains($0) })
        else { throw ConfigError(path: child(key), reason: "must be a list of at most 20 whole days from 1 to 365") }
        return days
    }

    public mutating func positiveInteger(_ key: String) throws(ConfigError) -> Int64? {
        guard let value = take(key) else { return nil }
        guard case .integer(let i) = value, i > 0 else {
            throw ConfigError(path: child(key), reason: "must be a positive integer")
        }
        return i
    }

    public func resolve(_ raw: String, at path: String) throws(ConfigError) -> String {
        if raw.hasPrefix("env:") {
            let name = String(raw.dropFirst(4))
            guard let value = sources.environment(name) else {
                throw ConfigError(path: path, reason: "environment variable \(name) is not set")
            }
            return value
        }
        if raw.hasPrefix("file:") {
            let file = String(raw.dropFirst(5))
            guard var bytes = sources.readFile(file) else {
                throw ConfigError(path: path, reason: "cannot read file \(file)")
            }
            if bytes.last == UInt8(ascii: "\n") { bytes.removeLast() }
            if bytes.last == UInt8(ascii: "\r") { bytes.removeLast() }
            guard let text = String(validating: bytes, as: UTF8.self) else {
                throw ConfigError(path: path, reason: "file \(file) is not UTF-8 text")
            }
            return text
        }
        return raw
    }

    public func finish() throws(ConfigError) {
        if let unknown = object.keys.filter({ !used.contains($0) }).sorted().first {
            throw ConfigError(path: child(unknown), reason: "unknown key")
        }
    }
}

/// The pipeline's configuration file (docs/configuration.md).
public struct PaypipeConfig: Sendable {
    public var merchants: [String: MerchantConfig]
    public var endpoints: Endpoints
    public var timers: Timers
    /// CURVE on the internal links (nil: plaintext, as in v1).
    public var curve: CurveConfig?
    public var retention = Retention()
    /// How the ledger charges subscriptions on schedule.
    public var schedules = Schedules()
    /// Where the ledger keeps orders and outcomes.
    public var store = StoreSettings.sqlite(path: StoreSettings.defaultSQLitePath)
    /// Who brings the store's schema forward, and what a migration asks first.
    public var storeMigrations = StoreMigrations()
    /// `store.retryWindowMs`: how long the ledger retries a failing store before it exits; nil:
    /// the store's default (`StoreSettings.defaultRetryWindowMilliseconds`). Apart from `store`,
    /// which `paypipe-ledger --store` replaces.
    public var storeRetryWindowMs: Int64?
    /// Where the stages send their spans; nil (the default): no tracing.
    public var tracing: Tracing?
    /// How much the ledger reads from one intake connection (`Intake`).
    public var intake = Intake()
    /// For tests and demos only: lets a stage start with what production refuses
    /// (`unsafeForProduction`): plaintext links off loopback, the shipped demo secrets and the
    /// schedules' clock offset file. A key of the config rather than an environment variable, so
    /// that it sits in the very file that holds the unsafe settings and `paypipe config check`
    /// sees it.
    public var insecureForTesting = false
    /// The merchants' secrets whose value is one the demo config ships (each section's `demo`),
    /// by key path.
    public var demoSecretPaths: [String] = []

    public init(merchants: [String: MerchantConfig], endpoints: Endpoints = Endpoints(), timers: Timers = Timers()) {
        self.merchants = merchants
        self.endpoints = endpoints
        self.timers = timers
        curve = nil
    }

    /// Distributed tracing (docs/operations.md, "Traces"): every stage exports its spans over
    /// OTLP/HTTP, in protobuf, to `otlpEndpoint`; the standard `OTEL_*` variables override these
    /// settings.
    public struct Tracing: Sendable, Equatable {
        /// The collector's base URL (`http://host:4318`); spans go to its `/v1/traces`.
        public var otlpEndpoint: String
        /// The share of orders traced, decided once per trace from its id, so every stage keeps
        /// or drops the same orders.
        public var sampleRatio = 1.0

        public init(otlpEndpoint: String) { self.otlpEndpoint = otlpEndpoint }
    }

    public struct Endpoints: Sendable, Equatable {
        public var intake = "tcp://127.0.0.1:5550"
        public var outcomes = "tcp://127.0.0.1:5559"
        /// Where upstream asks for outcomes by seq (the ledger binds a ROUTER).
        public var outcomesReplay = "tcp://127.0.0.1:5558"
        public var callbacks = "127.0.0.1:8080"
        // Internal hops, all bound by paypipe-ledger so that every stage copy only connects
        // (optional keys, defaults below).
        /// Orders for the signers (ledger PUSH → signers PULL).
        public var signQueue = "tcp://127.0.0.1:5551"
        /// Signed requests from the signers (signers PUSH → ledger's streamer PULL).
        public var signedIn = "tcp://127.0.0.1:5552"
        /// Signed requests for the submitters (ledger's streamer PUSH → submitters PULL).
        public var signedOut = "tcp://127.0.0.1:5553"
        /// Outcomes from every stage back to the ledger (stages PUSH → ledger PULL).
        public var results = "tcp://127.0.0.1:5554"
        /// Order lookups and durable callback hand-off (callback validators and pollers DEALER →
        /// ledger ROUTER): the pipeline's store, reached without sharing a disk.
        public var ledgerRPC = "tcp://127.0.0.1:5555"
        /// Accepted Cleeng receipts for the pollers (ledger PUSH → pollers PULL).
        public var pollQueue = "tcp://127.0.0.1:5556"
        /// HTTP address of the ledger's /metrics, its probes and the operators' `/review`.
        public var ledgerMetrics = "127.0.0.1:9090"
        /// A second HTTP address of the ledger with /metrics and its probes only, not `/review`:
        /// where Prometheus and a probe reach it over a network that must not read orders, while
        /// `ledgerMetrics` stays on loopback. Nil (the default): none.
        public var ledgerScrape: String?
        /// HTTP address of the callback validator's /metrics, /livez and /readyz, apart from the
        /// public `callbacks` address (port 0: any free port, logged).
        public var callbacksMetrics = "127.0.0.1:0"
        /// The addresses of the proxies (an ingress, a load balancer) in front of the public
        /// callbacks address whose `X-Forwarded-For` is believed: a callback through one of them
        /// is limited by the client address it forwarded, not by the proxy's. Empty (the
        /// default): every callback is limited by its TCP peer, and the header is ignored.
        public var callbacksTrustedProxies: [String] = []
        /// The operators' link (`paypipe order`, `paypipe orders`; the ledger binds a ROUTER):
        /// with `curve`, only the keys on `curve.admins` are admitted.
        public var admin = "tcp://127.0.0.1:5557"
        public init() {}
    }

    public struct Timers: Sendable, Equatable {
        public var httpConnectTimeoutMs: Int64 = 2000
        public var httpRequestTimeoutMs: Int64 = 10000
        /// A pending order is checked with the provider's status call after this long, and again
        /// every this long (docs/operations.md, "Every pending order ends").
        public var pendingResolveAfterMs: Int64 = 900_000
        /// A pending order's check at or after this long is the last: it ends the order.
        public var pendingExpireAfterMs: Int64 = 86_400_000
        /// How long a submitter's claim on an order holds without renewal; the holder renews
        /// every third of it, so a lapse means the holder died.
        public var leaseMs: Int64 = 30_000
        /// The longest one submitter may hold one dispatch of an order, renewals included: past it
        /// its renewals are refused and, once the lease lapses, the order goes to review.
        public var leaseMaxMs: Int64 = 600_000
        /// Dispatches of one order a submitter claimed and lost (it died or never answered) before
        /// the order goes to review (`unknown` NEEDS_REVIEW); copies nobody claimed do not count.
        public var maxDispatches: Int64 = 5
        /// A subscription whose provider pushes nothing when access lapses (Cleeng) has its
        /// entitlement checked at its expiry and at least this often.
        public var entitlementRecheckMs: Int64 = 86_400_000
        /// The timers providers declare (`MerchantSection.timers`), by name, where the config
        /// sets them; read through `subscript(_:)`.
        var providerTimers: [String: Int64] = [:]

        /// A provider's timer: the config's value, else the timer's default.
        public subscript(timer: ProviderTimer) -> Int64 {
            get { providerTimers[timer.name] ?? timer.defaultValue }
            set { providerTimers[timer.name] = newValue }
        }
        public init() {}
    }

    /// How the ledger charges subscriptions on schedule (docs/protocol.md, "Schedules").
    public struct Schedules: Sendable, Equatable {
        /// A declined cycle is tried again this many days after each decline, one entry per
        /// retry; once they are used up the cycle is given up (`renewal.abandoned`).
        public var retryAfterDays: [Int64] = [1, 3, 7]
        /// How many due steps one ledger tick turns into orders at most.
        public var batch: Int64 = 1000
        /// How many cycles already due a schedule charges back to back at most (a start in the
        /// past, a change of interval, an outage); the older ones are reported and the schedule
        /// is sent to review.
        public var maxCatchUpCycles: Int64 = 3
        /// For tests and demos only: a file holding milliseconds that the schedules' clock runs
        /// ahead of the wall clock (read on every tick); refused without `insecureForTesting`.
        public var clockOffsetFile: String?
        public init() {}
    }

    /// What a merchant's schedules do about unpaid cycles (`merchants.<name>.dunning`,
    /// docs/protocol.md, "Declines"): how a soft decline is retried, and what is done once
    /// `afterUnpaidCycles` cycles in a row were given up.
    public struct Dunning: Sendable, Equatable {
        public enum Action: String, Sendable, CaseIterable {
            /// The subscription stays `past_due` and the next cycle is charged.
            case pastDue = "past_due"
            /// The schedule is paused (a `schedule` order resumes it) and the subscription `paused`.
            case pause
            /// The schedule is cancelled and the subscription `cancelled`.
            case cancel
        }

        /// A soft decline is tried again this many days after each decline; nil: `schedules.retryAfterDays`.
        public var retryAfterDays: [Int64]?
        public var onExhausted: Action = .pastDue
        /// How many consecutive cycles must be given up before `onExhausted`; the cycles in
        /// between are still charged.
        public var afterUnpaidCycles: Int64 = 1
        public init() {}
    }

    /// How long stored records are kept.
    public struct Retention: Sendable, Equatable {
        /// Logged outcomes older than this many days may be removed from the replay log.
        public var outcomesDays: Int64 = 30
        /// Terminal orders older than this many days (since they ended) lose their contents,
        /// provider references and callback events; the key and its outcome stay.
        public var ordersDays: Int64 = 90
        /// Terminal orders older than this many days lose their key too: an order sent again
        /// after that is treated as new. At least `ordersDays`.
        public var orderKeysDays: Int64 = 400
        public init() {}
    }

    /// The merchant profile for an order, or the rejection the contract prescribes. Byte for
    /// byte: `merchants[name]` alone would take "\u{212A}iosk" (Kelvin sign) for "Kiosk", while
    /// the store and every idempotency key tell them apart, so one order could be charged twice.
    public func merchant(_ name: String) throws(Rejection) -> MerchantConfig {
        guard let index = merchants.index(forKey: name), merchants[index].key.hasSameUTF8(as: name) else {
            throw Rejection(.unknownMerchant, field: "merchant", "merchant \"\(name.prefix(64))\" is not configured")
        }
        return merchants[index].value
    }
}

/// One merchant profile: a section per provider it uses, each parsed by the provider's own
/// `MerchantSection` type (declared by its connector), so that the config knows no provider.
public struct MerchantConfig: Sendable {
    public var sections: [Provider: any MerchantSection] = [:]
    /// Whether this merchant's order systems are sent subscription events on the outcome log
    /// (docs/protocol.md, "Subscription events"); they are recorded either way.
    public var subscriptionEvents = false
    /// What this merchant's schedules do about unpaid cycles (`dunning`).
    public var dunning = PaypipeConfig.Dunning()

    public init(_ sections: any MerchantSection...) {
        for section in sections { self.sections[type(of: section).provider] = section }
    }

    /// The merchant's section of type `S`, if it configures that provider.
    public func section<S: MerchantSection>(_ type: S.Type) -> S? { sections[S.provider] as? S }

    /// Each provider's settings, or `MISSING_CREDENTIALS` when this merchant lacks the provider.
    public func require<T>(_ keyPath: KeyPath<MerchantConfig, T?>, _ provider: Provider) throws(Rejection) -> T {
        guard let value = self[keyPath: keyPath] else {
            throw Rejection(.missingCredentials, field: "provider", "this merchant has no \(provider.rawValue) credentials configured")
        }
        return value
    }
}

/// A provider's section of a merchant profile (`merchants.<name>.<provider>`): its typed
/// settings, read by the provider's own module. Every value takes `env:`/`file:` as everywhere;
/// a secret is read with `ConfigReader.secret` so that stages that hold none get it empty.
public protocol MerchantSection: Sendable {
    /// The provider whose key names the section.
    static var provider: Provider { get }
    /// The provider's timers, set in the config's `timers` section by name.
    static var timers: [ProviderTimer] { get }
    init(_ reader: inout ConfigReader) throws(ConfigError)
    /// This section in the demo config, with throwaway credentials the sandbox accepts.
    static func demo(_ environment: DemoEnvironment) -> JSONValue
}

extension MerchantSection {
    public static var timers: [ProviderTimer] { [] }
}

/// A timer one provider declares in its own module (its `MerchantSection.timers`): a positive
/// integer in the config's `timers` section under `name`, `defaultValue` when absent.
public struct ProviderTimer: Sendable, Hashable {
    public let name: String
    public let defaultValue: Int64

    public init(_ name: String, default defaultValue: Int64) {
        self.name = name
        self.defaultValue = defaultValue
    }
}

/// Where a provider's demo section points (`MerchantSection.demo`): the demo config that
/// `paypipe up` writes for the sandbox, and that tests and benchmarks start from.
public struct DemoEnvironment: Sendable {
    /// This provider's route in the sandbox (`http://HOST:PORT/<provider>`).
    public var sandboxURL: String
    /// Set when every provider call goes to one server instead (a benchmark's).
    public var providerURL: String?
    /// The callback validators' `host:port`.
    public var callbacks: String
    /// Optional keys of this section to leave out.
    public var leftOut: Set<String>

    public init(sandboxURL: String, providerURL: String? = nil, callbacks: String, leftOut: Set<String> = []) {
        self.sandboxURL = sandboxURL
        self.providerURL = providerURL
        self.callbacks = callbacks
        self.leftOut = leftOut
    }

    /// The URL of `path` under this provider's sandbox route, or the one provider URL.
    public func url(_ path: String = "") -> String { providerURL ?? sandboxURL + path }
}

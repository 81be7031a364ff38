/// The pipeline's configuration file (PROTOCOL.md §4).
public struct PaypipeConfig: Sendable {
    public var merchants: [String: MerchantConfig]
    public var endpoints: Endpoints
    public var timers: Timers
    /// CURVE on the internal links (nil: plaintext, as in v1).
    public var curve: CurveConfig?
    public var retention = Retention()

    public init(merchants: [String: MerchantConfig], endpoints: Endpoints = Endpoints(), timers: Timers = Timers()) {
        self.merchants = merchants
        self.endpoints = endpoints
        self.timers = timers
        curve = nil
    }

    public struct Endpoints: Sendable, Equatable {
        public var intake = "tcp://127.0.0.1:5550"
        public var outcomes = "tcp://127.0.0.1:5559"
        /// Where upstream asks for outcomes by seq (PROTOCOL.md §6; the ledger binds a ROUTER).
        public var outcomesReplay = "tcp://127.0.0.1:5558"
        public var callbacks = "127.0.0.1:8080"
        // Internal hops, all bound by paypipe-ledger so that every stage copy only connects
        // (an addition to PROTOCOL.md §4: optional keys, defaults below).
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
        /// HTTP address of the ledger's /metrics and /healthz.
        public var ledgerMetrics = "127.0.0.1:9090"
        public init() {}
    }

    public struct Timers: Sendable, Equatable {
        public var cleengPollIntervalMs: Int64 = 5000
        public var cleengGiveUpMs: Int64 = 60000
        public var httpConnectTimeoutMs: Int64 = 2000
        public var httpRequestTimeoutMs: Int64 = 10000
        public var phonepeCallbackWaitMs: Int64 = 900_000
        public var tpResponseMaxAgeS: Int64 = 3600
        /// A pending order is checked with the provider's status call after this long, and again
        /// every this long (PROTOCOL.md §6 "Every order ends").
        public var pendingResolveAfterMs: Int64 = 900_000
        /// A pending order's check at or after this long is the last: it ends the order.
        public var pendingExpireAfterMs: Int64 = 86_400_000
        /// How long a submitter's claim on an order holds without renewal; the holder renews
        /// every third of it, so a lapse means the holder died.
        public var leaseMs: Int64 = 30_000
        /// The longest one submitter may hold one dispatch of an order, renewals included: past it
        /// its renewals are refused and, once the lease lapses, the order goes to review.
        public var leaseMaxMs: Int64 = 600_000
        /// How long Nets is trusted to remember a charge's `Idempotency-Key`: a redelivered charge
        /// whose status Nets cannot find by its key is sent again only this long after the order
        /// was accepted, and goes to review after.
        public var netsIdempotencyKeyLifetimeMs: Int64 = 3_600_000
        /// Dispatches of one order a submitter claimed and lost (it died or never answered) before
        /// the order goes to review (`unknown` NEEDS_REVIEW); copies nobody claimed do not count.
        public var maxDispatches: Int64 = 5
        public init() {}
    }

    /// How long stored records are kept (PROTOCOL.md §6).
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

    /// The merchant profile for an order, or the rejection PROTOCOL.md prescribes. Byte for
    /// byte: `merchants[name]` alone would take "\u{212A}iosk" (Kelvin sign) for "Kiosk", while
    /// the store and every idempotency key tell them apart, so one order could be charged twice.
    public func merchant(_ name: String) throws(Rejection) -> MerchantConfig {
        guard let index = merchants.index(forKey: name), merchants[index].key.hasSameUTF8(as: name) else {
            throw Rejection(.unknownMerchant, field: "merchant", "merchant \"\(name.prefix(64))\" is not configured")
        }
        return merchants[index].value
    }
}

public struct MerchantConfig: Sendable {
    public var trustpayments: TrustPaymentsConfig?
    public var nets: NetsConfig?
    public var phonepe: PhonePeConfig?
    public var cleeng: CleengConfig?
    public var viva: VivaConfig?
    /// The sections of providers whose connectors declare their own settings.
    public var settings: [Provider: ProviderSettings] = [:]

    public init(
        trustpayments: TrustPaymentsConfig? = nil, nets: NetsConfig? = nil, phonepe: PhonePeConfig? = nil,
        cleeng: CleengConfig? = nil, viva: VivaConfig? = nil
    ) {
        self.trustpayments = trustpayments
        self.nets = nets
        self.phonepe = phonepe
        self.cleeng = cleeng
        self.viva = viva
    }

    /// A declared-settings provider's section, or `MISSING_CREDENTIALS` when this merchant lacks it.
    public func settings(for provider: Provider) throws(Rejection) -> ProviderSettings {
        guard let section = settings[provider] else {
            throw Rejection(.missingCredentials, field: "provider", "this merchant has no \(provider.rawValue) credentials configured")
        }
        return section
    }

    /// Each provider's settings, or `MISSING_CREDENTIALS` when this merchant lacks the provider.
    public func require<T>(_ keyPath: KeyPath<MerchantConfig, T?>, _ provider: Provider) throws(Rejection) -> T {
        guard let value = self[keyPath: keyPath] else {
            throw Rejection(.missingCredentials, field: "provider", "this merchant has no \(provider.rawValue) credentials configured")
        }
        return value
    }
}

public struct TrustPaymentsConfig: Sendable {
    public var baseURL: String
    public var siteReference: String
    public var jwtIssuer: String
    public var jwtSecret: Secret
    public var webservicesUser: String
    public var webservicesPassword: Secret
    public var notificationPassword: Secret

    public init(
        baseURL: String, siteReference: String, jwtIssuer: String, jwtSecret: Secret,
        webservicesUser: String, webservicesPassword: Secret, notificationPassword: Secret
    ) {
        self.baseURL = baseURL
        self.siteReference = siteReference
        self.jwtIssuer = jwtIssuer
        self.jwtSecret = jwtSecret
        self.webservicesUser = webservicesUser
        self.webservicesPassword = webservicesPassword
        self.notificationPassword = notificationPassword
    }
}

public struct NetsConfig: Sendable {
    public var baseURL: String
    public var secretKey: Secret
    public var webhookAuthorization: Secret
    /// Where Nets sends the webhooks registered on each created subscription payment; nil: none
    /// are registered and the pending payment is resolved with `GET /v1/payments/{paymentId}`.
    public var webhookURL: String?

    public init(baseURL: String, secretKey: Secret, webhookAuthorization: Secret, webhookURL: String? = nil) {
        self.baseURL = baseURL
        self.secretKey = secretKey
        self.webhookAuthorization = webhookAuthorization
        self.webhookURL = webhookURL
    }
}

public struct PhonePeConfig: Sendable {
    public var baseURL: String
    public var merchantId: String
    public var saltKey: Secret
    public var saltIndex: String
    public var callbackURL: String
    /// `deviceContext.merchantCallBackScheme` for orders that name none (seed 002 makes it mandatory).
    public var callbackScheme: String?

    public init(baseURL: String, merchantId: String, saltKey: Secret, saltIndex: String, callbackURL: String, callbackScheme: String? = nil) {
        self.baseURL = baseURL
        self.merchantId = merchantId
        self.saltKey = saltKey
        self.saltIndex = saltIndex
        self.callbackURL = callbackURL
        self.callbackScheme = callbackScheme
    }
}

public struct CleengConfig: Sendable {
    public var receiptURL: String
    public var apiURL: String
    public var username: String
    public var password: Secret

    public init(receiptURL: String, apiURL: String, username: String, password: Secret) {
        self.receiptURL = receiptURL
        self.apiURL = apiURL
        self.username = username
        self.password = password
    }
}

public struct VivaConfig: Sendable {
    public var merchantKey: String
    public var appId: String
    public var callback: String
    /// Viva's transactions API, used to confirm forwarded results (PROTOCOL.md §6); nil without
    /// API credentials.
    public var api: VivaAPICredentials?
    /// The ISV client secret for `ISV_clientSecret` (never taken from an order).
    public var isvClientSecret: Secret?
    /// Without `api`, forwarded results are taken unconfirmed (`result.confirmed` false) only
    /// when this is true; otherwise they are refused.
    public var acceptUnconfirmedCallbacks: Bool

    public init(
        merchantKey: String, appId: String, callback: String, api: VivaAPICredentials? = nil, isvClientSecret: Secret? = nil,
        acceptUnconfirmedCallbacks: Bool = false
    ) {
        self.merchantKey = merchantKey
        self.appId = appId
        self.callback = callback
        self.api = api
        self.isvClientSecret = isvClientSecret
        self.acceptUnconfirmedCallbacks = acceptUnconfirmedCallbacks
    }
}

/// `viva.apiURL`, `viva.accountsURL`, `viva.apiClientId`, `viva.apiClientSecret`: the OAuth2
/// client credentials for `{accountsURL}/connect/token` and the API base for
/// `{apiURL}/checkout/v2/transactions/{id}`.
public struct VivaAPICredentials: Sendable {
    public static let liveAPIURL = "https://api.vivapayments.com"
    public static let liveAccountsURL = "https://accounts.vivapayments.com"

    public var apiURL: String
    public var accountsURL: String
    public var clientId: String
    public var clientSecret: Secret

    public init(apiURL: String = liveAPIURL, accountsURL: String = liveAccountsURL, clientId: String, clientSecret: Secret) {
        self.apiURL = apiURL
        self.accountsURL = accountsURL
        self.clientId = clientId
        self.clientSecret = clientSecret
    }
}

/// A merchant's settings for a provider whose connector declares them itself (a provider added
/// after the five above needs no change here): plain values and secrets, each `env:`/`file:`
/// indirection resolved like every other config value.
public struct ProviderSettings: Sendable {
    public var values: [String: String] = [:]
    public var secrets: [String: Secret] = [:]
    public init() {}

    /// The keys a connector's section takes; any other key is a config error.
    public struct Schema: Sendable {
        public var provider: Provider
        public var required: [String]
        public var optional: [String]
        public var secrets: [String]

        public init(provider: Provider, required: [String], optional: [String] = [], secrets: [String] = []) {
            self.provider = provider
            self.required = required
            self.optional = optional
            self.secrets = secrets
        }
    }
}

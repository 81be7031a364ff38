import PaypipeCore

/// `merchants.<name>.nets`.
public struct NetsConfig: Sendable {
    public var baseURL: String
    public var secretKey: Secret
    public var webhookAuthorization: Secret
    /// Where Nets sends the webhooks registered on each created subscription payment; nil: none
    /// are registered and the pending payment is resolved with `GET /v1/payments/{paymentId}`.
    public var webhookURL: String?
    /// How a subscription's first payment is collected (`firstPayment`).
    public var firstPayment: NetsFirstPayment

    public init(
        baseURL: String, secretKey: Secret, webhookAuthorization: Secret, webhookURL: String? = nil, firstPayment: NetsFirstPayment = .charge
    ) {
        self.baseURL = baseURL
        self.secretKey = secretKey
        self.webhookAuthorization = webhookAuthorization
        self.webhookURL = webhookURL
        self.firstPayment = firstPayment
    }
}

/// How the payment a subscription's checkout makes is collected: the hosted page only reserves
/// it unless told otherwise, and a reservation lapses.
public enum NetsFirstPayment: String, Sendable, CaseIterable {
    /// Nets charges it itself as the checkout completes (`checkout.charge: true`). One request
    /// fewer, but whether Nets applies it to a subscription's first payment is not documented.
    case checkout
    /// paypipe charges the reservation once the checkout completed
    /// (`POST /v1/payments/{paymentId}/charges`), an order of its own that is read back from
    /// the payment when its answer is lost. The default: every step is documented and the
    /// outcome says what was charged.
    case charge
}

extension NetsConfig: MerchantSection {
    public static let provider = Provider.nets

    public init(_ r: inout ConfigReader) throws(ConfigError) {
        self.init(
            baseURL: try r.url("baseURL"), secretKey: try r.secret("secretKey"), webhookAuthorization: try r.secret("webhookAuthorization"),
            webhookURL: try r.optionalURL("webhookURL"), firstPayment: try Self.firstPayment(&r))
    }

    static func firstPayment(_ r: inout ConfigReader) throws(ConfigError) -> NetsFirstPayment {
        guard let text = try r.optionalString("firstPayment") else { return .charge }
        guard let mode = NetsFirstPayment(rawValue: text) else {
            throw ConfigError(path: r.child("firstPayment"), reason: "must be checkout or charge, got \(text.prefix(32))")
        }
        return mode
    }

    public static func demo(_ environment: DemoEnvironment) -> JSONValue {
        var section: [String: JSONValue] = [
            "baseURL": .string(environment.url()), "secretKey": "demo-nets-secret-key", "webhookAuthorization": "demoWebhookAuth123",
        ]
        if !environment.leftOut.contains("webhookURL") { section["webhookURL"] = .string("http://\(environment.callbacks)/callbacks/nets") }
        return .object(section)
    }
}

extension MerchantConfig {
    /// The merchant's `nets` section, if it has one.
    public var nets: NetsConfig? {
        get { section(NetsConfig.self) }
        set { sections[NetsConfig.provider] = newValue }
    }
}

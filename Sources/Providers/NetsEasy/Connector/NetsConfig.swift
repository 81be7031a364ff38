import PaypipeCore

/// `merchants.<name>.nets`.
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

extension NetsConfig: MerchantSection {
    public static let provider = Provider.nets

    public init(_ r: inout ConfigReader) throws(ConfigError) {
        self.init(
            baseURL: try r.url("baseURL"), secretKey: try r.secret("secretKey"), webhookAuthorization: try r.secret("webhookAuthorization"),
            webhookURL: try r.optionalURL("webhookURL"))
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

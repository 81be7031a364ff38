import PaypipeCore

/// `merchants.<name>.trustpayments`.
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

extension TrustPaymentsConfig: MerchantSection {
    public static let provider = Provider.trustpayments

    public init(_ r: inout ConfigReader) throws(ConfigError) {
        self.init(
            baseURL: try r.url("baseURL"), siteReference: try r.string("siteReference"), jwtIssuer: try r.string("jwtIssuer"),
            jwtSecret: try r.secret("jwtSecret"), webservicesUser: try r.string("webservicesUser"),
            webservicesPassword: try r.secret("webservicesPassword"), notificationPassword: try r.secret("notificationPassword"))
    }

    public static func demo(_ environment: DemoEnvironment) -> JSONValue {
        [
            "baseURL": .string(environment.url()), "siteReference": "test_site12345", "jwtIssuer": "jwt.user",
            "jwtSecret": "demo-jwt-secret-0123456789abcdef0123456789", "webservicesUser": "ws@example.com",
            "webservicesPassword": "demo-ws-password", "notificationPassword": "demo-notify-password",
        ]
    }
}

extension MerchantConfig {
    /// The merchant's `trustpayments` section, if it has one.
    public var trustpayments: TrustPaymentsConfig? {
        get { section(TrustPaymentsConfig.self) }
        set { sections[TrustPaymentsConfig.provider] = newValue }
    }
}

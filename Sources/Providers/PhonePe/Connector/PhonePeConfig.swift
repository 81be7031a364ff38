import PaypipeCore

/// `merchants.<name>.phonepe`.
public struct PhonePeConfig: Sendable {
    public var baseURL: String
    public var merchantId: String
    public var saltKey: Secret
    public var saltIndex: String
    public var callbackURL: String
    /// `deviceContext.merchantCallBackScheme` for orders that name none (PhonePe's auth/init
    /// request table makes it mandatory).
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

extension PhonePeConfig: MerchantSection {
    public static let provider = Provider.phonepe

    public init(_ r: inout ConfigReader) throws(ConfigError) {
        self.init(
            baseURL: try r.url("baseURL"), merchantId: try r.string("merchantId"), saltKey: try r.secret("saltKey"),
            saltIndex: try r.string("saltIndex"), callbackURL: try r.url("callbackURL"), callbackScheme: try r.optionalString("callbackScheme"))
    }

    public static func demo(_ environment: DemoEnvironment) -> JSONValue {
        [
            "baseURL": .string(environment.url()), "merchantId": "MERCHANTUAT", "saltKey": "demo-salt-099eb0cd-02cf-4e2a-8aca-3e6c6aff0399",
            "saltIndex": "1", "callbackURL": .string("http://\(environment.callbacks)/callbacks/phonepe"),
            "callbackScheme": "iOSIntentIntegration",
        ]
    }
}

extension MerchantConfig {
    /// The merchant's `phonepe` section, if it has one.
    public var phonepe: PhonePeConfig? {
        get { section(PhonePeConfig.self) }
        set { sections[PhonePeConfig.provider] = newValue }
    }
}

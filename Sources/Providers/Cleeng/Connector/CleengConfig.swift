import PaypipeCore

/// `merchants.<name>.cleeng`.
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

extension CleengConfig: MerchantSection {
    public static let provider = Provider.cleeng

    public init(_ r: inout ConfigReader) throws(ConfigError) {
        self.init(
            receiptURL: try r.url("receiptURL"), apiURL: try r.url("apiURL"), username: try r.string("username"), password: try r.secret("password"))
    }

    public static func demo(_ environment: DemoEnvironment) -> JSONValue {
        [
            "receiptURL": .string(environment.url("/checkout/apple_inapp.php")), "apiURL": .string(environment.url("/3.0/json-rpc")),
            "username": "publisher", "password": "demo-cleeng-password",
        ]
    }
}

extension MerchantConfig {
    /// The merchant's `cleeng` section, if it has one.
    public var cleeng: CleengConfig? {
        get { section(CleengConfig.self) }
        set { sections[CleengConfig.provider] = newValue }
    }
}

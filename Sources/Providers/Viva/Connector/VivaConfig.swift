import PaypipeCore

/// `merchants.<name>.viva`.
public struct VivaConfig: Sendable {
    public var merchantKey: String
    public var appId: String
    public var callback: String
    /// Viva's transactions API, used to confirm forwarded results; nil without
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

extension VivaConfig: MerchantSection {
    public static let provider = Provider.viva

    public init(_ r: inout ConfigReader) throws(ConfigError) {
        self.init(merchantKey: try r.string("merchantKey"), appId: try r.string("appId"), callback: try r.string("callback"))
        let apiURL = try r.optionalURL("apiURL"), accountsURL = try r.optionalURL("accountsURL")
        let clientId = try r.optionalString("apiClientId")
        let clientSecret = try r.optionalSecret("apiClientSecret")
        switch (clientId, clientSecret) {
        case (let id?, let secret?):
            guard !id.isEmpty else { throw ConfigError(path: r.child("apiClientId"), reason: "must not be empty") }
            api = VivaAPICredentials(
                apiURL: apiURL ?? VivaAPICredentials.liveAPIURL, accountsURL: accountsURL ?? VivaAPICredentials.liveAccountsURL,
                clientId: id, clientSecret: secret)
        case (nil, nil):
            if apiURL != nil || accountsURL != nil {
                throw ConfigError(path: r.child("apiClientId"), reason: "is required with apiURL/accountsURL (with apiClientSecret)")
            }
        case (nil, _?):
            throw ConfigError(path: r.child("apiClientId"), reason: "is required with apiClientSecret")
        case (_?, nil):
            throw ConfigError(path: r.child("apiClientSecret"), reason: "is required with apiClientId")
        }
        isvClientSecret = try r.optionalSecret("isvClientSecret")
        acceptUnconfirmedCallbacks = try r.optionalBool("acceptUnconfirmedCallbacks") ?? false
    }

    public static func demo(_ environment: DemoEnvironment) -> JSONValue {
        [
            "merchantKey": "SG23323424EXS3", "appId": "com.example.app", "callback": "interapp-callback",
            "apiURL": .string(environment.url()), "accountsURL": .string(environment.url()),
            "apiClientId": "demo-viva-client.apps.vivapayments.com", "apiClientSecret": "demo-viva-client-secret",
            "isvClientSecret": "demo-viva-isv-secret",
        ]
    }
}

extension MerchantConfig {
    /// The merchant's `viva` section, if it has one.
    public var viva: VivaConfig? {
        get { section(VivaConfig.self) }
        set { sections[VivaConfig.provider] = newValue }
    }
}

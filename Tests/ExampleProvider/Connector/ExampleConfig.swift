import PaypipeCore

/// `merchants.<name>.example`.
public struct ExampleConfig: Sendable {
    public var baseURL: String
    /// Authorises charges (`Authorization: Bearer`).
    public var apiKey: Secret
    /// Authorises reading a charge's status only; not a secret, so the poller may hold it.
    public var publishableKey: String
    /// Signs webhooks (`X-Example-Signature`).
    public var webhookSecret: Secret
}

extension ExampleConfig: MerchantSection {
    public static let provider = Provider.example

    public init(_ r: inout ConfigReader) throws(ConfigError) {
        baseURL = try r.url("baseURL")
        apiKey = try r.secret("apiKey")
        publishableKey = try r.string("publishableKey")
        webhookSecret = try r.secret("webhookSecret")
    }

    public static func demo(_ environment: DemoEnvironment) -> JSONValue {
        [
            "baseURL": .string(environment.url()), "apiKey": "demo-example-key", "publishableKey": "pk-demo-example",
            "webhookSecret": "demo-example-webhook-secret",
        ]
    }
}

extension MerchantConfig {
    /// The merchant's `example` section, if it has one.
    public var example: ExampleConfig? {
        get { section(ExampleConfig.self) }
        set { sections[ExampleConfig.provider] = newValue }
    }
}

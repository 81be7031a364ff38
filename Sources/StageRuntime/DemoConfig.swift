import PaypipeCore

/// The config `paypipe up` writes when given none: every provider pointed at the local sandbox,
/// with throwaway demo credentials (the sandbox reads the same file, so both sides agree).
/// Tests and benchmarks use it too, with their own endpoints and timers.
package enum DemoConfig {
    /// - Parameters:
    ///   - providerURL: every provider's base URL (e.g. an external server for benchmarks);
    ///     default: the sandbox's route for each provider under `sandboxURL`.
    ///   - endpoints: further `endpoints` keys (PROTOCOL.md §4 and the internal hops).
    ///   - timers: `timers` keys.
    ///   - extraMerchants: further merchant profiles, by name (e.g. a Viva merchant without API credentials).
    ///   - netsWebhooks: false leaves out `nets.webhookURL` (Nets payments are then resolved with GET payment).
    package static func text(
        sandboxURL: String, callbacks: String = "127.0.0.1:8080", providerURL: String? = nil,
        endpoints: [String: String] = [:], timers: [String: Int64] = [:], extraMerchants: [String: JSONValue] = [:],
        netsWebhooks: Bool = true
    ) -> String {
        let webhookJSON = netsWebhooks ? ",\n                                \"webhookURL\": \"http://\(callbacks)/callbacks/nets\"" : ""
        func url(_ path: String) -> String { providerURL ?? sandboxURL + path }
        var endpointValues = endpoints
        endpointValues["callbacks"] = callbacks
        let endpointsJSON = JSONValue.object(endpointValues.mapValues(JSONValue.string)).serialized
        let timersJSON = timers.isEmpty ? "" : ",\n  \"timers\": \(JSONValue.object(timers.mapValues(JSONValue.integer)).serialized)"
        let extraJSON = extraMerchants.keys.sorted().map { ",\n    \(JSONValue.string($0).serialized): \(extraMerchants[$0]!.serialized)" }.joined()
        return """
            {
              "merchants": {
                "default": {
                  "trustpayments": { "baseURL": "\(url("/trustpayments"))", "siteReference": "test_site12345",
                                     "jwtIssuer": "jwt.user", "jwtSecret": "demo-jwt-secret-0123456789abcdef0123456789",
                                     "webservicesUser": "ws@example.com", "webservicesPassword": "demo-ws-password",
                                     "notificationPassword": "demo-notify-password" },
                  "nets":     { "baseURL": "\(url("/nets"))", "secretKey": "demo-nets-secret-key",
                                "webhookAuthorization": "demoWebhookAuth123"\(webhookJSON) },
                  "phonepe":  { "baseURL": "\(url("/phonepe"))", "merchantId": "MERCHANTUAT",
                                "saltKey": "demo-salt-099eb0cd-02cf-4e2a-8aca-3e6c6aff0399", "saltIndex": "1",
                                "callbackURL": "http://\(callbacks)/callbacks/phonepe", "callbackScheme": "iOSIntentIntegration" },
                  "cleeng":   { "receiptURL": "\(url("/cleeng/checkout/apple_inapp.php"))",
                                "apiURL": "\(url("/cleeng/3.0/json-rpc"))",
                                "username": "publisher", "password": "demo-cleeng-password" },
                  "viva":     { "merchantKey": "SG23323424EXS3", "appId": "com.example.app", "callback": "interapp-callback",
                                "apiURL": "\(url("/viva"))", "accountsURL": "\(url("/viva"))",
                                "apiClientId": "demo-viva-client.apps.vivapayments.com", "apiClientSecret": "demo-viva-client-secret",
                                "isvClientSecret": "demo-viva-isv-secret" }
                }\(extraJSON)
              },
              "endpoints": \(endpointsJSON)\(timersJSON)
            }
            """
    }
}

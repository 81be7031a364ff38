/// The config `paypipe up` writes when given none: every provider pointed at the local sandbox,
/// with throwaway demo credentials (the sandbox reads the same file, so both sides agree).
public enum DemoConfig {
    public static func text(sandboxURL: String, callbacks: String = "127.0.0.1:8080") -> String {
        """
        {
          "merchants": {
            "default": {
              "trustpayments": { "baseURL": "\(sandboxURL)/trustpayments", "siteReference": "test_site12345",
                                 "jwtIssuer": "jwt.user", "jwtSecret": "demo-jwt-secret-0123456789abcdef0123456789",
                                 "webservicesUser": "ws@example.com", "webservicesPassword": "demo-ws-password",
                                 "notificationPassword": "demo-notify-password" },
              "nets":     { "baseURL": "\(sandboxURL)/nets", "secretKey": "demo-nets-secret-key",
                            "webhookAuthorization": "demoWebhookAuth123" },
              "phonepe":  { "baseURL": "\(sandboxURL)/phonepe", "merchantId": "MERCHANTUAT",
                            "saltKey": "demo-salt-099eb0cd-02cf-4e2a-8aca-3e6c6aff0399", "saltIndex": "1",
                            "callbackURL": "http://\(callbacks)/callbacks/phonepe" },
              "cleeng":   { "receiptURL": "\(sandboxURL)/cleeng/checkout/apple_inapp.php",
                            "apiURL": "\(sandboxURL)/cleeng/3.0/json-rpc",
                            "username": "publisher", "password": "demo-cleeng-password" },
              "viva":     { "merchantKey": "SG23323424EXS3", "appId": "com.example.app", "callback": "interapp-callback" }
            }
          },
          "endpoints": { "callbacks": "\(callbacks)" }
        }
        """
    }
}

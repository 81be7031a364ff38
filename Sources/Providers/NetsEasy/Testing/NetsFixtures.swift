import NetsEasy
import PaypipeCore

/// The test merchant and orders every Nets suite shares.
public enum NetsFixtures {
    public static let secretKey = "test-secret-key-6f1c0d2e"
    public static let webhookSecret = "whAuth12345678"
    public static let config = NetsConfig(
        baseURL: "https://test.api.dibspayment.eu", secretKey: Secret(secretKey), webhookAuthorization: Secret(webhookSecret))
    /// 2026-11-21T05:00:00Z
    public static let now: Int64 = 1_795_237_200
    public static let webhookURL = "https://merchant.example/callbacks/nets"

    public static func createOrder(
        orderId: String = "ord-000123", merchant: String = "default", amount: Int64? = 1050, currency: String? = "SEK",
        params: [String: JSONValue]? = nil, merging extra: [String: JSONValue] = [:], removing: [String] = []
    ) -> Order {
        var p: [String: JSONValue] = params ?? ["endDate": "2029-07-18T00:00:00+01:00", "interval": 30, "reference": "sub-42"]
        for (k, v) in extra { p[k] = v }
        for k in removing { p[k] = nil }
        return Order(orderId: orderId, merchant: merchant, operation: .createSubscription, amount: amount, currency: currency, params: p)
    }

    public static func chargeOrder(
        orderId: String = "ord-000200", subscriptionId: JSONValue = "d079718b-ff63-45dd-947b-4950c023750f", extra: [String: JSONValue] = [:]
    ) -> Order {
        var p: [String: JSONValue] = ["subscriptionId": subscriptionId, "reference": "charge-1"]
        for (k, v) in extra { p[k] = v }
        return Order(orderId: orderId, operation: .chargeSubscription, amount: 1050, currency: "SEK", params: p)
    }

    public static func getOrder(paymentId: JSONValue) -> Order {
        Order(orderId: "ord-000300", operation: .getSubscription, params: ["paymentId": paymentId])
    }
}

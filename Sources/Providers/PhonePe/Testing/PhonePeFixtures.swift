import Foundation
import PaypipeCore
import PhonePe

/// The test merchant and orders every PhonePe suite shares.
public enum PhonePeFixtures {
    public static let salt = "099eb0cd-02cf-4e2a-8aca-3e6c6aff0399"

    public static let callbackScheme = "paypipeapp"

    public static func config(merchantId: String = "MERCHANTUAT", saltIndex: String = "1", callbackScheme: String? = callbackScheme) -> PhonePeConfig
    {
        PhonePeConfig(
            baseURL: "http://127.0.0.1:9103", merchantId: merchantId, saltKey: Secret(salt), saltIndex: saltIndex,
            callbackURL: "https://merchant.example/callbacks/phonepe", callbackScheme: callbackScheme)
    }

    public static func order(
        orderId: String = "ord-000123", merchant: String = "default", amount: Int64? = 39900, currency: String? = "INR",
        params: [String: JSONValue] = ["merchantUserId": "5330F4FB-C66C-4646-8691-11544B580547", "subscriptionId": "OMS2301191527473651197003"]
    ) -> Order {
        Order(orderId: orderId, merchant: merchant, operation: .authInit, amount: amount, currency: currency, params: params)
    }

    public static func orderWith(_ extra: [String: JSONValue], amount: Int64? = 39900, currency: String? = "INR") -> Order {
        var params: [String: JSONValue] = ["merchantUserId": "5330F4FB-C66C-4646-8691-11544B580547", "subscriptionId": "OMS2301191527473651197003"]
        for (key, value) in extra { params[key] = value }
        return order(amount: amount, currency: currency, params: params)
    }

    /// The payload of an auth/init request: the base64 `request` member, decoded.
    public static func decodedPayload(_ request: HTTPRequestSpec) -> [String: JSONValue]? {
        guard let b64 = (try? JSONValue.parse(request.body))?["request"]?.stringValue, let data = Data(base64Encoded: b64) else { return nil }
        return (try? JSONValue.parse(Array(data)))?.objectValue
    }

    /// A verdict's case (and failure code), for compact expectations.
    public static func kind(_ verdict: ProviderVerdict) -> String {
        switch verdict {
        case .succeeded: "succeeded"
        case .pending: "pending"
        case .failed(let code, _): "failed:\(code)"
        case .retry: "retry"
        case .unknown: "unknown"
        case .neverSeen: "neverSeen"
        }
    }
}

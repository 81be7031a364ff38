import PaypipeCore
import TrustPayments

/// The test merchant and orders every Trust Payments suite shares.
public enum TPFixtures {
    /// At least 32 bytes: jwt-kit asserts HMAC keys are as long as the digest.
    public static let jwtSecret = "3-0123456789abcdef0123456789abcdef-jwt-secret"
    public static let notificationPassword = "PASSWORD"
    public static let config = TrustPaymentsConfig(
        baseURL: "http://127.0.0.1:9101", siteReference: "test_site12345", jwtIssuer: "jwt.user",
        jwtSecret: Secret(jwtSecret), webservicesUser: "ws@example.com", webservicesPassword: Secret("ws-password"),
        notificationPassword: Secret(notificationPassword))

    /// 2019-09-05T16:40:32Z, the `iat` of Trust Payments' example.
    public static let seedIssuedAt: Int64 = 1_567_701_632

    public static func order(
        _ params: [String: JSONValue], amount: Int64? = 1050, currency: String? = "GBP", orderId: String = "ord-000123"
    ) -> Order {
        Order(orderId: orderId, operation: .subscriptionJwt, amount: amount, currency: currency, params: params)
    }

    public static let seedParams: [String: JSONValue] = [
        "subscriptionType": "RECURRING", "unit": "MONTH", "frequency": 1, "number": 1, "finalNumber": 12,
        "beginDate": "2020-01-01",
    ]

    /// A verdict's case (and failure code), for compact expectations.
    public static func kind(_ verdict: ProviderVerdict?) -> String {
        switch verdict {
        case .succeeded?: "succeeded"
        case .pending?: "pending"
        case .failed(let code, _)?: "failed:\(code)"
        case .retry?: "retry"
        case .unknown?: "unknown"
        case .neverSeen?: "neverSeen"
        case nil: "nil"
        }
    }
}

/// The orders a Trust Payments callback may name, by orderId.
public struct TPStoredOrders: CallbackOrderLookup {
    public var stored: [Order]

    public init(stored: [Order]) { self.stored = stored }

    public func order(_ key: OrderKey, provider: Provider) async throws(CallbackRejection) -> Order {
        guard let order = stored.first(where: { $0.key == key }) else { throw .orderNotFound(provider, merchant: key.merchant) }
        return order
    }

    public func order(reference: String, provider: Provider, merchant: String) async throws(CallbackRejection) -> Order {
        throw .orderNotFound(provider, merchant: merchant)
    }
}

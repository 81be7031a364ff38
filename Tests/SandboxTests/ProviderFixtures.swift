import Cleeng
import Foundation
import NetsEasy
import PaypipeCore
import PhonePe
import TrustPayments
import Viva

// The provider fixtures the emulator tests need, copied from the provider test targets (which
// do not see the emulators) so those targets stay free of any Sandbox dependency.

enum PhonePeFixtures {
    static let salt = "099eb0cd-02cf-4e2a-8aca-3e6c6aff0399"

    static let callbackScheme = "paypipeapp"

    static func config(merchantId: String = "MERCHANTUAT", saltIndex: String = "1", callbackScheme: String? = callbackScheme) -> PhonePeConfig {
        PhonePeConfig(
            baseURL: "http://127.0.0.1:9103", merchantId: merchantId, saltKey: Secret(salt), saltIndex: saltIndex,
            callbackURL: "https://merchant.example/callbacks/phonepe", callbackScheme: callbackScheme)
    }

    static func order(
        orderId: String = "ord-000123", merchant: String = "default", amount: Int64? = 39900, currency: String? = "INR",
        params: [String: JSONValue] = ["merchantUserId": "5330F4FB-C66C-4646-8691-11544B580547", "subscriptionId": "OMS2301191527473651197003"]
    ) -> Order {
        Order(orderId: orderId, merchant: merchant, operation: .authInit, amount: amount, currency: currency, params: params)
    }

    static func orderWith(_ extra: [String: JSONValue], amount: Int64? = 39900, currency: String? = "INR") -> Order {
        var params: [String: JSONValue] = ["merchantUserId": "5330F4FB-C66C-4646-8691-11544B580547", "subscriptionId": "OMS2301191527473651197003"]
        for (key, value) in extra { params[key] = value }
        return order(amount: amount, currency: currency, params: params)
    }

    static func decodedPayload(_ request: HTTPRequestSpec) -> [String: JSONValue]? {
        guard let b64 = (try? JSONValue.parse(request.body))?["request"]?.stringValue, let data = Data(base64Encoded: b64) else { return nil }
        return (try? JSONValue.parse(Array(data)))?.objectValue
    }
}

enum NetsFixtures {
    static let secretKey = "test-secret-key-6f1c0d2e"
    static let webhookSecret = "whAuth12345678"
    static let config = NetsConfig(
        baseURL: "https://test.api.dibspayment.eu", secretKey: Secret(secretKey), webhookAuthorization: Secret(webhookSecret))
    /// 2026-11-21T05:00:00Z
    static let now: Int64 = 1_795_237_200
    static let webhookURL = "https://merchant.example/callbacks/nets"

    static func createOrder(
        orderId: String = "ord-000123", merchant: String = "default", amount: Int64? = 1050, currency: String? = "SEK",
        params: [String: JSONValue]? = nil, merging extra: [String: JSONValue] = [:], removing: [String] = []
    ) -> Order {
        var p: [String: JSONValue] = params ?? ["endDate": "2029-07-18T00:00:00+01:00", "interval": 30, "reference": "sub-42"]
        for (k, v) in extra { p[k] = v }
        for k in removing { p[k] = nil }
        return Order(orderId: orderId, merchant: merchant, operation: .createSubscription, amount: amount, currency: currency, params: p)
    }

    static func chargeOrder(
        orderId: String = "ord-000200", subscriptionId: JSONValue = "d079718b-ff63-45dd-947b-4950c023750f", extra: [String: JSONValue] = [:]
    ) -> Order {
        var p: [String: JSONValue] = ["subscriptionId": subscriptionId, "reference": "charge-1"]
        for (k, v) in extra { p[k] = v }
        return Order(orderId: orderId, operation: .chargeSubscription, amount: 1050, currency: "SEK", params: p)
    }

    static func getOrder(paymentId: JSONValue) -> Order {
        Order(orderId: "ord-000300", operation: .getSubscription, params: ["paymentId": paymentId])
    }
}

enum TPFixtures {
    /// At least 32 bytes: jwt-kit asserts HMAC keys are as long as the digest.
    static let jwtSecret = "3-0123456789abcdef0123456789abcdef-jwt-secret"
    static let config = TrustPaymentsConfig(
        baseURL: "http://127.0.0.1:9101", siteReference: "test_site12345", jwtIssuer: "jwt.user",
        jwtSecret: Secret(jwtSecret), webservicesUser: "ws@example.com", webservicesPassword: Secret("ws-password"),
        notificationPassword: Secret("PASSWORD"))

    /// 2019-09-05T16:40:32Z, the `iat` of Trust Payments' example.
    static let seedIssuedAt: Int64 = 1_567_701_632

    static func order(
        _ params: [String: JSONValue], amount: Int64? = 1050, currency: String? = "GBP", orderId: String = "ord-000123"
    ) -> Order {
        Order(orderId: orderId, operation: .subscriptionJwt, amount: amount, currency: currency, params: params)
    }

    static let seedParams: [String: JSONValue] = [
        "subscriptionType": "RECURRING", "unit": "MONTH", "frequency": 1, "number": 1, "finalNumber": 12,
        "beginDate": "2020-01-01",
    ]

    /// A verdict's case (and failure code), for compact expectations.
    static func kind(_ verdict: ProviderVerdict?) -> String { verdict?.kind ?? "nil" }
}

enum CleengFixtures {
    static let seedToken = "ZAP8dgKPIEgBulSZZBdyv1O0wzg1pucyHf8gUGg2X6ZhdRaH"
    static let receiptBytes: [UInt8] = Array(
        "{\"signature\":\"AApUcmVjZWlwdA==\",\"purchase-info\":\"ewoJInByb2R1Y3QtaWQiID0gIkUxMjMxMjMxMjNfVVMiOwp9\"}".utf8)
    static let receiptBase64 = Data(receiptBytes).base64EncodedString()

    static let config = CleengConfig(
        receiptURL: "http://127.0.0.1:9104/checkout/apple_inapp.php", apiURL: "http://127.0.0.1:9104/3.0/json-rpc",
        username: "publisher", password: Secret("s3cr3t-pa55"))

    static func receiptOrder(_ overrides: [String: JSONValue?] = [:]) -> Order {
        var params: [String: JSONValue] = [
            "customerToken": .string(seedToken), "offerId": "E123123123_US",
            "receiptData": .string(receiptBase64), "transactionId": "1000000123456789",
        ]
        for (key, value) in overrides { params[key] = value }
        return Order(orderId: "ord-cl-1", operation: .appleReceipt, params: params)
    }
}

enum VivaFixtures {
    static let config = VivaConfig(merchantKey: "SG23323424EXS3", appId: "com.vivawallet.InterAppDemo", callback: "interapp-callback")

    static func saleOrder(amount: Int64? = 1200, _ params: [String: JSONValue] = [:]) -> Order {
        Order(orderId: "ord-viva-1", operation: .sale, amount: amount, currency: "EUR", params: params)
    }
}

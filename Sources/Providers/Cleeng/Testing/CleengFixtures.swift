import Cleeng
import Foundation
import PaypipeCore

/// The test publisher and orders every Cleeng suite shares.
public enum CleengFixtures {
    /// The customer token of Cleeng's example.
    public static let seedToken = "ZAP8dgKPIEgBulSZZBdyv1O0wzg1pucyHf8gUGg2X6ZhdRaH"
    public static let receiptBytes: [UInt8] = Array(
        "{\"signature\":\"AApUcmVjZWlwdA==\",\"purchase-info\":\"ewoJInByb2R1Y3QtaWQiID0gIkUxMjMxMjMxMjNfVVMiOwp9\"}".utf8)
    public static let receiptBase64 = Data(receiptBytes).base64EncodedString()

    public static let config = CleengConfig(
        receiptURL: "http://127.0.0.1:9104/checkout/apple_inapp.php", apiURL: "http://127.0.0.1:9104/3.0/json-rpc",
        username: "publisher", password: Secret("s3cr3t-pa55"))

    public static func receiptOrder(_ overrides: [String: JSONValue?] = [:]) -> Order {
        var params: [String: JSONValue] = [
            "customerToken": .string(seedToken), "offerId": "E123123123_US",
            "receiptData": .string(receiptBase64), "transactionId": "1000000123456789",
        ]
        for (key, value) in overrides { params[key] = value }
        return Order(orderId: "ord-cl-1", operation: .appleReceipt, params: params)
    }
}

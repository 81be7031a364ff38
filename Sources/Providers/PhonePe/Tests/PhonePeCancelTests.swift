import Foundation
import PaypipeCore
import PhonePeTesting
import Testing

@testable import PhonePe

/// A merchant's cancel of a PhonePe mandate (`POST /v3/recurring/subscription/cancel`) and how
/// its answers read: cancelling, or already over, is the order's success.
@Suite struct PhonePeCancelTests {
    static let subscriptionId = "OMS2301191527473651197003"
    static let user = "5330F4FB-C66C-4646-8691-11544B580547"

    static func order(
        record: JSONValue = ["orderId": "auth-1", "target": ["subscriptionId": .string(subscriptionId), "merchantUserId": .string(user)]]
    )
        -> Order
    {
        Order(orderId: "cancel-1", operation: .cancelPhonePe, params: ["subscription": .string(subscriptionId), "record": record])
    }

    static func answer(_ body: JSONValue, status: Int = 200) -> HTTPResponseSpec {
        HTTPResponseSpec(status: status, body: Array(body.serialized.utf8))
    }

    @Test func theRequestIsTheDocumentedCancelSignedOverItsPayloadAndPath() throws {
        let cancel = try PhonePeCancel(order: Self.order())
        let request = try cancel.request(merchant: PhonePeMerchant(config: PhonePeFixtures.config()))
        #expect(request.method == .POST && request.url == "http://127.0.0.1:9103/v3/recurring/subscription/cancel")
        let payload = try #require(PhonePeFixtures.decodedPayload(request))
        #expect(payload == ["merchantId": "MERCHANTUAT", "merchantUserId": .string(Self.user), "subscriptionId": .string(Self.subscriptionId)])
        let base64 = try #require(try JSONValue.parse(request.body)["request"]?.stringValue)
        // sha256(base64 + path + salt) "###" index, computed here without the module's checksum.
        #expect(request.header("X-VERIFY") == Digest.sha256Hex(base64 + "/v3/recurring/subscription/cancel" + PhonePeFixtures.salt) + "###1")
        #expect(request.header("X-CALLBACK-URL") == "https://merchant.example/callbacks/phonepe")
    }

    @Test func aCancelWithoutTheMandatesUserIsRefusedBeforeAnythingIsSent() {
        #expect(throws: Rejection.self) { try PhonePeCancel(order: Self.order(record: ["orderId": "auth-1", "target": .null])) }
    }

    @Test func cancellingOrAlreadyOverIsSuccessAndAnyOtherRefusalFails() throws {
        let cancel = try PhonePeCancel(order: Self.order())
        let inProgress = Self.answer(
            ["success": true, "code": "SUCCESS", "data": ["subscriptionId": .string(Self.subscriptionId), "state": "CANCEL_IN_PROGRESS"]])
        guard case .succeeded(let result) = cancel.classify(inProgress) else {
            Issue.record("CANCEL_IN_PROGRESS is success")
            return
        }
        #expect(result["state"] == "CANCEL_IN_PROGRESS")
        for code in ["SUBSCRIPTION_ALREADY_CANCELLED", "SUBSCRIPTION_NOT_ACTIVE", "SUBSCRIPTION_ALREADY_REVOKED", "SUBSCRIPTION_CANCEL_IN_PROGRES"] {
            guard case .succeeded(let already) = cancel.classify(Self.answer(["success": false, "code": .string(code), "message": "x"], status: 400))
            else {
                Issue.record("\(code) reads as already cancelled")
                continue
            }
            #expect(already["alreadyEnded"] == .string(code))
        }
        guard
            case .failed(let code, _) = cancel.classify(
                Self.answer(["success": false, "code": "SUBSCRIPTION_NOT_FOUND", "message": "x"], status: 400))
        else {
            Issue.record("an unknown mandate fails")
            return
        }
        #expect(code.rawValue == "SUBSCRIPTION_NOT_FOUND")
        guard case .unknown = cancel.classify(Self.answer(["success": false, "code": "INTERNAL_SERVER_ERROR"], status: 503)) else {
            Issue.record("a 5xx may have cancelled")
            return
        }
    }
}

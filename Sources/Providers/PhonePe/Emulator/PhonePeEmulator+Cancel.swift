import Foundation
import PaypipeCore
import Sandbox

/// The merchant's cancel of a mandate, as PhonePe's recurring reference describes "Cancel
/// Subscription" (PROVIDERS-LIFECYCLE §3): `POST /v3/recurring/subscription/cancel`, body
/// `{"request": base64({merchantId, merchantUserId, subscriptionId})}`, X-VERIFY
/// `sha256(base64 + path + salt)###index`; answered `{subscriptionId, state: CANCEL_IN_PROGRESS}`,
/// then a SUBSCRIPTION callback with state CANCELLED. A mandate already over is refused with
/// the page's failure codes (SUBSCRIPTION_ALREADY_CANCELLED, _ALREADY_REVOKED, _EXPIRED,
/// SUBSCRIPTION_CANCEL_IN_PROGRES as spelt there), so a repeated cancel is seen as repeated.
/// Once a mandate is over, Recurring INIT and Debit Execute on it are refused.
extension PhonePeEmulator {
    package static let subscriptionCancelPath = "/v3/recurring/subscription/cancel"

    package static func cancelPayload(_ request: HTTPRequestSpec) -> (base64: String, payload: JSONValue)? {
        guard request.method == .POST, request.url == subscriptionCancelPath,
            let encoded = (try? JSONValue.parse(request.body))?["request"]?.stringValue,
            let decoded = Data(base64Encoded: encoded), let payload = try? JSONValue.parse(Array(decoded))
        else { return nil }
        return (encoded, payload)
    }

    package func cancelLedgerKey(_ request: HTTPRequestSpec) -> String? {
        Self.cancelPayload(request)?.payload["subscriptionId"]?.stringValue.map { "cancel:" + $0 }
    }

    /// The refusal of a mandate that ended (`endedMandates`), as the cancel page names it.
    static func endedRefusal(_ state: String) -> HTTPResponseSpec {
        switch state {
        case "REVOKED": PhonePeSandbox.refusal(400, "SUBSCRIPTION_ALREADY_REVOKED", "Subscription is already revoked.")
        case "EXPIRED": PhonePeSandbox.refusal(400, "SUBSCRIPTION_EXPIRED", "Subscription has expired.")
        case "CANCEL_IN_PROGRESS": PhonePeSandbox.refusal(400, "SUBSCRIPTION_CANCEL_IN_PROGRES", "Subscription cancel is in progress.")
        default: PhonePeSandbox.refusal(400, "SUBSCRIPTION_ALREADY_CANCELLED", "Subscription is already cancelled.")
        }
    }

    package func cancelRequest(_ request: HTTPRequestSpec, context: SandboxContext) async -> HTTPResponseSpec {
        guard let (base64, payload) = Self.cancelPayload(request) else {
            return PhonePeSandbox.badRequest("the body must be {\"request\": base64(JSON)}")
        }
        guard let merchantId = payload["merchantId"]?.stringValue, let merchant = byMerchantId[merchantId] else {
            return PhonePeSandbox.refusal(401, "AUTHORIZATION_FAILED", "unknown merchantId")
        }
        guard let xVerify = PhonePeSandbox.header("X-VERIFY", in: request.headers),
            merchant.sandbox.checksumMatches(xVerify, message: base64 + Self.subscriptionCancelPath)
        else { return PhonePeSandbox.refusal(401, "AUTHORIZATION_FAILED", "X-VERIFY checksum mismatch") }
        guard let subscriptionId = payload["subscriptionId"]?.stringValue, let user = payload["merchantUserId"]?.stringValue else {
            return PhonePeSandbox.badRequest("merchantId, merchantUserId and subscriptionId are required")
        }
        guard let mandate = records.withLock({ $0.values.first { $0.mandate.subscriptionId == subscriptionId }?.mandate }),
            mandate.merchantId == merchantId, mandate.merchantUserId == user
        else { return PhonePeSandbox.refusal(400, "SUBSCRIPTION_NOT_FOUND", "Subscription not found.") }
        let ended = endedMandates.withLock { ended -> String? in
            if let state = ended[subscriptionId] { return state }
            ended[subscriptionId] = "CANCELLED"
            return nil
        }
        if let ended { return Self.endedRefusal(ended) }
        context.ledger.tookEffect("phonepe:cancel:" + subscriptionId.prefix(128))
        await sendCallback(
            [
                "callbackType": "SUBSCRIPTION", "merchantId": .string(merchantId),
                "subscriptionDetails": ["subscriptionId": .string(subscriptionId), "state": "CANCELLED"],
            ],
            merchant: merchant, context: context, after: context.configuration.phonePe.callbackDelayMilliseconds)
        return PhonePeSandbox.envelope(
            status: 200, success: true, code: "SUCCESS", message: "Your request has been successfully submitted.",
            data: ["subscriptionId": .string(subscriptionId), "state": "CANCEL_IN_PROGRESS"])
    }
}

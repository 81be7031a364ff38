import Foundation
import PaypipeCore
import PhonePe
import Sandbox
import Synchronization

/// What happens to an authorised mandate afterwards, as PhonePe reports it by S2S callback
/// (PhonePe's recurring reference: "Recurring INIT" → NOTIFY, "Recurring Debit Execute" →
/// DEBIT; the user's "Remove Autopay", pause and unpause, or the merchant's cancel →
/// SUBSCRIPTION). The debits are the merchant's to ask for; these actions stand in for them
/// (and for the user) in tests and the demo:
/// - `debit` `{"subscription", "amount"?, "decline"?}`: NOTIFY, then DEBIT COMPLETED (or FAILED),
///   as if the merchant had debited outside paypipe;
/// - `declineNext` `{"subscription"}`: the next debit paypipe executes fails (AUTHORIZATION_FAILED);
/// - `revoke`, `pause`, `unpause`, `cancel` `{"subscription"}`: SUBSCRIPTION with the new state;
/// - `resendLast` `{"subscription"}`: the last callback again, as PhonePe redelivers one.
/// Callbacks go to the merchant's `phonepe.callbackURL`, signed by the sandbox's own checksum.
extension PhonePeEmulator: SubscriptionEmulator {
    package func act(_ action: String, body: JSONValue, context: SandboxContext) async -> HTTPResponseSpec {
        guard let subscriptionId = body["subscription"]?.stringValue else {
            return SandboxContext.json(400, ["error": "subscription is required"])
        }
        guard let mandate = records.withLock({ $0.values.first { $0.mandate.subscriptionId == subscriptionId }?.mandate }),
            let merchant = byMerchantId[mandate.merchantId]
        else { return SandboxContext.json(404, ["error": "no mandate has this subscriptionId"]) }
        let now = context.clock.nowMilliseconds
        var callbacks: [[String: JSONValue]] = []
        let subscription: JSONValue = ["subscriptionId": .string(subscriptionId), "state": "ACTIVE"]
        switch action {
        case "debit":
            let amount = body["amount"]?.integerValue ?? mandate.amount ?? 100
            let number = debits.withLock { debits -> Int in
                debits.actionCounts[subscriptionId, default: 0] += 1
                return debits.actionCounts[subscriptionId]!
            }
            let transactionId = "TX" + String(Digest.sha256Hex(Array("\(subscriptionId)|\(number)".utf8)).prefix(20))
            let notificationId = "NO" + String(Digest.sha256Hex(Array("notify|\(transactionId)".utf8)).prefix(20))
            let declined = body["decline"]?.boolValue == true
            callbacks.append([
                "callbackType": "NOTIFY", "merchantId": .string(mandate.merchantId), "transactionId": .string(transactionId),
                "subscriptionDetails": subscription,
                "notificationDetails": [
                    "notificationId": .string(notificationId), "amount": .integer(amount), "state": "NOTIFIED", "notifiedAt": .integer(now),
                    "validAfter": .integer(now + 86_400_000), "validUpto": .integer(now + 4 * 86_400_000),
                ],
            ])
            callbacks.append([
                "callbackType": "DEBIT", "merchantId": .string(mandate.merchantId), "transactionId": .string(transactionId),
                "subscriptionDetails": subscription,
                "transactionDetails": [
                    "providerReferenceId": .string("P" + String(Digest.sha256Hex(Array("debit|\(transactionId)".utf8)).prefix(20))),
                    "amount": .integer(amount), "state": declined ? "FAILED" : "COMPLETED",
                    "payResponseCode": declined ? "AUTHORIZATION_FAILED" : "SUCCESS",
                ],
            ])
        case "declineNext":
            declineNextDebit.withLock { _ = $0.insert(subscriptionId) }
            return SandboxContext.json(200, ["subscription": .string(subscriptionId), "declineNext": true])
        case "resendLast":
            guard let last = lastCallbacks.withLock({ $0[subscriptionId] }) else { return SandboxContext.json(404, ["error": "nothing sent yet"]) }
            callbacks.append(last)
        case "revoke", "pause", "unpause", "cancel":
            let state = ["revoke": "REVOKED", "pause": "PAUSED", "unpause": "ACTIVE", "cancel": "CANCELLED"][action]!
            callbacks.append([
                "callbackType": "SUBSCRIPTION", "merchantId": .string(mandate.merchantId),
                "subscriptionDetails": ["subscriptionId": .string(subscriptionId), "state": .string(state), "stateStartDate": .integer(now)],
            ])
        default:
            return SandboxContext.json(404, ["error": "phonepe actions: debit, declineNext, revoke, pause, unpause, cancel, resendLast"])
        }
        for data in callbacks { await sendCallback(data, merchant: merchant, context: context) }
        if let last = callbacks.last { lastCallbacks.withLock { $0[subscriptionId] = last } }
        return SandboxContext.json(200, ["subscription": .string(subscriptionId), "sent": .integer(Int64(callbacks.count))])
    }
}

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
///   as if the merchant had debited outside paypipe; refused on a mandate that is over;
/// - `declineNext` `{"subscription", "code"?}`: the next debit paypipe executes fails with that
///   `payResponseCode` (e.g. an NPCI code: Z9 insufficient funds, YE account blocked; by default
///   AUTHORIZATION_FAILED);
/// - `failNextNotify` `{"subscription"}`: the next Recurring INIT paypipe sends answers state
///   FAILED (Recurring INIT's field table: state ACCEPTED | FAILED) and its NOTIFY says FAILED;
/// - `revoke`, `pause`, `unpause`, `cancel`, `expire`, `suspend` `{"subscription"}`: SUBSCRIPTION
///   with the new state (REVOKED, PAUSED, ACTIVE, CANCELLED, EXPIRED, SUSPENDED: the states
///   PhonePe's subscription-status page lists). As PhonePe's samples: revoke and cancel carry
///   no stateStartDate (the revoke sample), pause and unpause carry it (the pause sample), and so
///   do expire and suspend (no sample: the pause sample's shape is assumed);
/// - `resendLast` `{"subscription"}`: the last callback again, as PhonePe redelivers one;
/// - `holdNext` `{"subscription", "request", "milliseconds"?}`: the next notification or debit
///   reaches PhonePe late (`PhonePeEmulator+Holds.swift`).
/// A mandate left in any state but ACTIVE is refused every notification and debit (its own or
/// the `debit` action's) until `unpause` makes it ACTIVE again: PAUSED is "skip until unpaused".
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
            if let ended = endedMandates.withLock({ $0[subscriptionId] }) {
                return PhonePeSandbox.refusal(400, "INVALID_SUBSCRIPTION_STATE", "Subscription is \(ended.lowercased()).")
            }
            if mandateStates.withLock({ $0[subscriptionId] }) != nil { return Self.notActive }
            let amount = body["amount"]?.integerValue ?? mandate.amount ?? 100
            let number = debits.withLock { debits -> Int in
                debits.actionCounts[subscriptionId, default: 0] += 1
                return debits.actionCounts[subscriptionId]!
            }
            let transactionId = "TX" + PhonePeSandbox.digits("\(subscriptionId)|\(number)", count: 20)
            let declined = body["decline"]?.boolValue == true
            // The debit a merchant made outside paypipe, in the shapes of paypipe's own.
            let debit = Debit(
                merchantId: mandate.merchantId, subscriptionId: subscriptionId, amount: amount,
                notificationId: Self.notificationId(merchantId: mandate.merchantId, transactionId: transactionId), notifiedAt: now,
                executed: (declined ? "FAILED" : "COMPLETED", now))
            callbacks.append([
                "callbackType": "NOTIFY", "merchantId": .string(mandate.merchantId), "transactionId": .string(transactionId),
                "notificationDetails": notificationDetails(debit), "subscriptionDetails": subscription,
            ])
            callbacks.append([
                "callbackType": "DEBIT", "merchantId": .string(mandate.merchantId), "transactionId": .string(transactionId),
                "notificationDetails": notificationDetails(debit),
                "transactionDetails": transactionDetails(debit, transactionId: transactionId, decided: true, inCallback: true),
                "subscriptionDetails": subscription,
            ])
        case "declineNext":
            let code = body["code"]?.stringValue ?? Self.bankDeclineCode
            guard PhonePeRules.isIdentifier(code, maxLength: 64) else { return SandboxContext.json(400, ["error": "code must be an identifier"]) }
            declineNextDebit.withLock { $0[subscriptionId] = code }
            return SandboxContext.json(200, ["subscription": .string(subscriptionId), "declineNext": true])
        case "failNextNotify":
            failNextNotify.withLock { _ = $0.insert(subscriptionId) }
            return SandboxContext.json(200, ["subscription": .string(subscriptionId), "failNextNotify": true])
        case "holdNext":
            return holdNext(body, subscriptionId: subscriptionId)
        case "resendLast":
            guard let last = lastCallbacks.withLock({ $0[subscriptionId] }) else { return SandboxContext.json(404, ["error": "nothing sent yet"]) }
            callbacks.append(last)
        case "revoke", "pause", "unpause", "cancel", "expire", "suspend":
            let state = [
                "revoke": "REVOKED", "pause": "PAUSED", "unpause": "ACTIVE", "cancel": "CANCELLED", "expire": "EXPIRED", "suspend": "SUSPENDED",
            ][action]!
            if action == "revoke" || action == "cancel" || action == "expire" { endedMandates.withLock { $0[subscriptionId] = state } }
            var details: [String: JSONValue] = ["subscriptionId": .string(subscriptionId), "state": .string(state)]
            if action != "revoke" && action != "cancel" { details["stateStartDate"] = .integer(now) }
            mandateStates.withLock { $0[subscriptionId] = state == "ACTIVE" ? nil : state }
            callbacks.append(["callbackType": "SUBSCRIPTION", "merchantId": .string(mandate.merchantId), "subscriptionDetails": .object(details)])
        default:
            return SandboxContext.json(
                404,
                [
                    "error":
                        "phonepe actions: debit, declineNext, failNextNotify, holdNext, revoke, pause, unpause, cancel, expire, suspend, resendLast"
                ])
        }
        for data in callbacks { await sendCallback(data, merchant: merchant, context: context) }
        if let last = callbacks.last { lastCallbacks.withLock { $0[subscriptionId] = last } }
        return SandboxContext.json(200, ["subscription": .string(subscriptionId), "sent": .integer(Int64(callbacks.count))])
    }
}

import Foundation
import PaypipeCore
import PhonePe
import Sandbox
import Synchronization

/// PhonePe's merchant-initiated debits of an authorised mandate (PhonePe's recurring reference:
/// "Recurring INIT", "Recurring Debit Execute", "Debit Execute Status"), on the sandbox's clock:
/// - `POST /v3/recurring/debit/init` notifies the customer: `ACCEPTED` with a `notificationId`,
///   `validAfter` a day later and `validUpto` four days later, then a NOTIFY callback;
/// - `POST /v3/recurring/debit/execute` debits inside that window: `PENDING`, then a DEBIT
///   callback COMPLETED (or FAILED after the `declineNext` action);
/// - `GET /v3/recurring/debit/status/{merchantId}/{transactionId}` reports both.
/// A transactionId used once is refused a second time (`DUPLICATE_TRANSACTION`, the sandbox's
/// stand-in for PhonePe's undocumented answer), so a repeated notification or debit shows.
/// The ledger counts requests under `phonepe:notify:<transactionId>` and
/// `phonepe:debit:<transactionId>`, and a completed debit as the latter's effect.
extension PhonePeEmulator {
    package struct Debit: Sendable {
        var merchantId: String
        var subscriptionId: String
        var amount: Int64
        var notificationId: String
        var notifiedAt: Int64
        /// The debit's final state once executed, and when its callback is due (sandbox time).
        var executed: (state: String, decidedAt: Int64)?
    }

    package enum DebitAnswer {
        case refused(HTTPResponseSpec)
        case executed(Debit)
    }

    package static func debitPayload(_ request: HTTPRequestSpec) -> (path: String, base64: String, payload: JSONValue)? {
        guard request.method == .POST, request.url == PhonePeRules.debitInitPath || request.url == PhonePeRules.debitExecutePath,
            let encoded = (try? JSONValue.parse(request.body))?["request"]?.stringValue,
            let decoded = Data(base64Encoded: encoded), let payload = try? JSONValue.parse(Array(decoded))
        else { return nil }
        return (request.url, encoded, payload)
    }

    package func debitLedgerKey(_ request: HTTPRequestSpec) -> String? {
        guard let (path, _, payload) = Self.debitPayload(request), let transactionId = payload["transactionId"]?.stringValue else { return nil }
        return (path == PhonePeRules.debitInitPath ? "notify:" : "debit:") + transactionId
    }

    package func debitRequest(_ request: HTTPRequestSpec, context: SandboxContext) async -> HTTPResponseSpec {
        guard let (path, base64, payload) = Self.debitPayload(request) else {
            return PhonePeSandbox.refusal(400, "BAD_REQUEST", "the body must be {\"request\": base64(JSON)}")
        }
        guard let merchantId = payload["merchantId"]?.stringValue, let merchant = byMerchantId[merchantId] else {
            return PhonePeSandbox.refusal(401, "AUTHORIZATION_FAILED", "unknown merchantId")
        }
        guard let xVerify = PhonePeSandbox.header("X-VERIFY", in: request.headers), merchant.sandbox.checksumMatches(xVerify, message: base64 + path)
        else { return PhonePeSandbox.refusal(401, "AUTHORIZATION_FAILED", "X-VERIFY checksum mismatch") }
        guard let subscriptionId = payload["subscriptionId"]?.stringValue, let transactionId = payload["transactionId"]?.stringValue,
            PhonePeRules.isIdentifier(transactionId, maxLength: PhonePeRules.authRequestIdMaxLength), payload["merchantUserId"]?.stringValue != nil
        else { return PhonePeSandbox.refusal(400, "BAD_REQUEST", "subscriptionId, merchantUserId and transactionId are required") }
        guard let mandate = records.withLock({ $0.values.first { $0.mandate.subscriptionId == subscriptionId }?.mandate }),
            mandate.merchantId == merchantId
        else { return PhonePeSandbox.refusal(400, "SUBSCRIPTION_NOT_FOUND", "no mandate has this subscriptionId") }
        let now = context.clock.nowMilliseconds
        let key = Self.recordKey(merchantId: merchantId, authRequestId: transactionId)
        if path == PhonePeRules.debitInitPath {
            guard let amount = payload["amount"]?.integerValue, amount > 0, amount <= (mandate.amount ?? .max) || mandate.amount == nil else {
                return PhonePeSandbox.refusal(400, "INVALID_AMOUNT", "amount must be positive and at most the mandate's")
            }
            let notificationId = "NO" + String(Digest.sha256Hex(Array("notify|\(merchantId)|\(transactionId)".utf8)).prefix(20))
            let debit = Debit(merchantId: merchantId, subscriptionId: subscriptionId, amount: amount, notificationId: notificationId, notifiedAt: now)
            let isNew = debits.withLock { debits in
                guard debits.records[key] == nil else { return false }
                debits.records[key] = debit
                return true
            }
            guard isNew else { return PhonePeSandbox.refusal(400, "DUPLICATE_TRANSACTION", "transactionId \(transactionId) was used before") }
            let details = notificationDetails(debit)
            await sendCallback(
                [
                    "callbackType": "NOTIFY", "merchantId": .string(merchantId), "transactionId": .string(transactionId),
                    "notificationDetails": details,
                    "subscriptionDetails": ["subscriptionId": .string(subscriptionId), "state": "ACTIVE"],
                ],
                merchant: merchant, context: context, after: context.configuration.phonePe.callbackDelayMilliseconds)
            var data = details.objectValue ?? [:]
            data["state"] = "ACCEPTED"
            return PhonePeSandbox.envelope(status: 200, success: true, code: "SUCCESS", message: "Notification sent", data: .object(data))
        }
        guard let notificationId = payload["notificationId"]?.stringValue else {
            return PhonePeSandbox.refusal(400, "BAD_REQUEST", "notificationId is required")
        }
        let decline = declineNextDebit.withLock { $0.remove(subscriptionId) != nil }
        let answer: DebitAnswer = debits.withLock { debits in
            guard var debit = debits.records[key], debit.notificationId == notificationId, debit.subscriptionId == subscriptionId else {
                return .refused(PhonePeSandbox.refusal(400, "NOTIFICATION_NOT_FOUND", "no notification \(notificationId) for this transactionId"))
            }
            guard debit.executed == nil else {
                return .refused(PhonePeSandbox.refusal(400, "DUPLICATE_TRANSACTION", "transactionId \(transactionId) was debited before"))
            }
            guard now >= debit.notifiedAt + Self.validAfterMilliseconds else {
                return .refused(PhonePeSandbox.refusal(400, "DEBIT_NOT_ALLOWED_YET", "the notification's validAfter has not passed"))
            }
            guard now <= debit.notifiedAt + Self.validUptoMilliseconds else {
                return .refused(PhonePeSandbox.refusal(400, "NOTIFICATION_EXPIRED", "the notification's validUpto has passed"))
            }
            debit.executed = (decline ? "FAILED" : "COMPLETED", now)
            debits.records[key] = debit
            return .executed(debit)
        }
        let debit: Debit
        switch answer {
        case .refused(let refusal):
            if decline { declineNextDebit.withLock { _ = $0.insert(subscriptionId) } }
            return refusal
        case .executed(let executed): debit = executed
        }
        if !decline { context.ledger.tookEffect("phonepe:debit:" + transactionId) }
        await sendCallback(
            [
                "callbackType": "DEBIT", "merchantId": .string(merchantId), "transactionId": .string(transactionId),
                "transactionDetails": transactionDetails(debit, transactionId: transactionId, decided: true),
                "subscriptionDetails": ["subscriptionId": .string(subscriptionId), "state": "ACTIVE"],
            ],
            merchant: merchant, context: context, after: context.configuration.phonePe.callbackDelayMilliseconds)
        return PhonePeSandbox.envelope(
            status: 200, success: true, code: "SUCCESS", message: "Debit requested",
            data: ["merchantId": .string(merchantId), "transactionId": .string(transactionId), "state": "PENDING", "amount": .integer(debit.amount)])
    }

    package func debitStatus(_ request: HTTPRequestSpec, context: SandboxContext) -> HTTPResponseSpec {
        let path = PhonePeSandbox.path(of: request.url)
        let ids = path.dropFirst(PhonePeRules.debitStatusPathPrefix.count).split(separator: "/").map(String.init)
        guard ids.count == 2, let merchant = byMerchantId[ids[0]] else { return PhonePeSandbox.refusal(404, "NOT_FOUND", "No such debit status") }
        guard let xVerify = PhonePeSandbox.header("X-VERIFY", in: request.headers), merchant.sandbox.checksumMatches(xVerify, message: path) else {
            return PhonePeSandbox.refusal(401, "AUTHORIZATION_FAILED", "X-VERIFY checksum mismatch")
        }
        guard let debit = debits.withLock({ $0.records[Self.recordKey(merchantId: ids[0], authRequestId: ids[1])] }) else {
            return PhonePeSandbox.envelope(status: 200, success: false, code: "TRANSACTION_NOT_FOUND", message: "No such transaction")
        }
        var data: [String: JSONValue] = [
            "merchantId": .string(ids[0]), "transactionId": .string(ids[1]), "notificationDetails": notificationDetails(debit),
            "subscriptionDetails": ["subscriptionId": .string(debit.subscriptionId), "state": "ACTIVE"],
        ]
        if let executed = debit.executed {
            let decided = context.clock.nowMilliseconds >= executed.decidedAt
            data["transactionDetails"] = transactionDetails(debit, transactionId: ids[1], decided: decided)
        }
        return PhonePeSandbox.envelope(status: 200, success: true, code: "SUCCESS", message: "Your request has been processed.", data: .object(data))
    }

    package static let validAfterMilliseconds: Int64 = 86_400_000
    package static let validUptoMilliseconds: Int64 = 4 * 86_400_000

    package func notificationDetails(_ debit: Debit) -> JSONValue {
        [
            "notificationId": .string(debit.notificationId), "amount": .integer(debit.amount), "state": "NOTIFIED",
            // PhonePe writes these as strings as often as numbers.
            "notifiedAt": .string(String(debit.notifiedAt)), "validAfter": .integer(debit.notifiedAt + Self.validAfterMilliseconds),
            "validUpto": .integer(debit.notifiedAt + Self.validUptoMilliseconds),
        ]
    }

    package func transactionDetails(_ debit: Debit, transactionId: String, decided: Bool) -> JSONValue {
        let state = decided ? debit.executed?.state ?? "PENDING" : "PENDING"
        return [
            "providerReferenceId": .string("P" + String(Digest.sha256Hex(Array("debit|\(transactionId)".utf8)).prefix(20))),
            "amount": .integer(debit.amount), "state": .string(state),
            "payResponseCode": .string(state == "FAILED" ? "AUTHORIZATION_FAILED" : "SUCCESS"),
        ]
    }

    /// A signed S2S callback to the merchant's `phonepe.callbackURL`, `after` ms from now.
    package func sendCallback(_ data: [String: JSONValue], merchant: Merchant, context: SandboxContext, after: Int = 0) async {
        let document: JSONValue = ["success": true, "code": "SUCCESS", "message": "Your request has been processed.", "data": .object(data)]
        let response = Data(document.bytes).base64EncodedString()
        let callback = PhonePeSandboxCallback(
            url: merchant.config.callbackURL, body: Array("{\"response\":\"\(response)\"}".utf8), xVerify: merchant.sandbox.checksum(for: response))
        if let subscriptionId = data["subscriptionDetails"]?["subscriptionId"]?.stringValue {
            lastCallbacks.withLock { $0[subscriptionId] = data }
        }
        let label = "phonepe \(data["callbackType"]?.stringValue ?? "") callback"
        guard after > 0 else { return await context.outbound.deliver(callback.request, label: label) }
        context.scheduler.schedule(afterMilliseconds: after) { [context] in await context.outbound.deliver(callback.request, label: label) }
    }
}

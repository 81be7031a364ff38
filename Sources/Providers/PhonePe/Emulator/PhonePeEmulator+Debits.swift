import Foundation
import PaypipeCore
import PhonePe
import Sandbox
import Synchronization

/// PhonePe's merchant-initiated debits of an authorised mandate (PhonePe's recurring reference:
/// "Recurring INIT", "Recurring Debit Execute", "Debit Execute Status"), on the sandbox's clock:
/// - `POST /v3/recurring/debit/init` notifies the customer: `ACCEPTED` with a `notificationId`,
///   `validAfter` a day later and `validUpto` four days later, then a NOTIFY callback (`FAILED`
///   after the `failNextNotify` action);
/// - `POST /v3/recurring/debit/execute` debits inside that window: `PENDING`, then a DEBIT
///   callback COMPLETED (or FAILED after the `declineNext` action);
/// - `GET /v3/recurring/debit/status/{merchantId}/{transactionId}` reports both.
/// A transactionId used once is refused a second time as PhonePe refuses a repeated merchant
/// transaction id (HTTP 400 `INVALID_TRANSACTION_ID` "Duplicate TransactionID", PhonePe's
/// troubleshooting page), so a repeated notification or debit shows. Every other refusal is one
/// of PhonePe's documented codes: `BAD_REQUEST` for wrong inputs (PhonePe documents no code of
/// its own for an amount above the mandate's, an unknown notification or a debit outside the
/// notification's window), `AUTHORIZATION_FAILED`, `SUBSCRIPTION_NOT_FOUND`, and
/// `INVALID_SUBSCRIPTION_STATE` for a mandate that is not ACTIVE (paused, revoked, …).
/// The ledger counts requests under `phonepe:notify:<transactionId>` and
/// `phonepe:debit:<transactionId>`, and a completed debit as the latter's effect.
extension PhonePeEmulator {
    package struct Debit: Sendable {
        var merchantId: String
        var subscriptionId: String
        var amount: Int64
        var notificationId: String
        var notifiedAt: Int64
        /// `notificationDetails.state`: `NOTIFIED` (the INIT answer said ACCEPTED) or `FAILED`
        /// (`failNextNotify`; the INIT answer said FAILED).
        var notificationState = "NOTIFIED"
        /// The debit's final state once executed, and when its callback is due (sandbox time).
        var executed: (state: String, decidedAt: Int64)?
        /// A failed debit's `payResponseCode`.
        var failureCode = PhonePeEmulator.bankDeclineCode
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

    /// PhonePe's notificationId form: `OMN` + 22 digits (Recurring INIT sample `OMN2006110154420123456789`).
    package static func notificationId(merchantId: String, transactionId: String) -> String {
        "OMN" + PhonePeSandbox.digits("notify|\(merchantId)|\(transactionId)", count: 22)
    }

    /// A notification or debit as PhonePe takes it in: a held one (`holdNext`) first waits in
    /// front of PhonePe, and one arriving behind a held copy of itself lets that copy in first.
    package func debitRequest(_ request: HTTPRequestSpec, context: SandboxContext) async -> HTTPResponseSpec {
        guard let key = debitLedgerKey(request), let subscriptionId = Self.debitPayload(request)?.payload["subscriptionId"]?.stringValue else {
            return await processDebit(request, context: context)
        }
        if let earlier = holds.withLock({ $0.waiting.removeValue(forKey: key) }) {
            earlier.answer.resume(returning: await processDebit(earlier.request, context: context))
        }
        guard let milliseconds = holds.withLock({ $0.next.removeValue(forKey: key.prefix { $0 != ":" } + ":" + subscriptionId) }) else {
            return await processDebit(request, context: context)
        }
        return await hold(request, key: key, milliseconds: milliseconds, context: context)
    }

    package func processDebit(_ request: HTTPRequestSpec, context: SandboxContext) async -> HTTPResponseSpec {
        guard let (path, base64, payload) = Self.debitPayload(request) else {
            return PhonePeSandbox.badRequest("the body must be {\"request\": base64(JSON)}")
        }
        guard let merchantId = payload["merchantId"]?.stringValue, let merchant = byMerchantId[merchantId] else {
            return PhonePeSandbox.refusal(401, "AUTHORIZATION_FAILED", "unknown merchantId")
        }
        guard let xVerify = PhonePeSandbox.header("X-VERIFY", in: request.headers), merchant.sandbox.checksumMatches(xVerify, message: base64 + path)
        else { return PhonePeSandbox.refusal(401, "AUTHORIZATION_FAILED", "X-VERIFY checksum mismatch") }
        guard let subscriptionId = payload["subscriptionId"]?.stringValue, let transactionId = payload["transactionId"]?.stringValue,
            PhonePeRules.isIdentifier(transactionId, maxLength: PhonePeRules.authRequestIdMaxLength), payload["merchantUserId"]?.stringValue != nil
        else { return PhonePeSandbox.badRequest("subscriptionId, merchantUserId and transactionId are required") }
        guard let mandate = records.withLock({ $0.values.first { $0.mandate.subscriptionId == subscriptionId }?.mandate }),
            mandate.merchantId == merchantId
        else { return PhonePeSandbox.refusal(400, "SUBSCRIPTION_NOT_FOUND", "Subscription not found.") }
        if let ended = endedMandates.withLock({ $0[subscriptionId] }) {
            return PhonePeSandbox.refusal(400, "INVALID_SUBSCRIPTION_STATE", "Subscription is \(ended.lowercased()).")
        }
        if mandateStates.withLock({ $0[subscriptionId] }) != nil { return Self.notActive }
        let now = context.clock.nowMilliseconds
        let key = Self.recordKey(merchantId: merchantId, authRequestId: transactionId)
        if path == PhonePeRules.debitInitPath {
            guard let amount = payload["amount"]?.integerValue, amount > 0, amount <= (mandate.amount ?? .max) || mandate.amount == nil else {
                return PhonePeSandbox.badRequest("amount must be positive paise, at most the mandate's")
            }
            let failNotify = failNextNotify.withLock { $0.remove(subscriptionId) != nil }
            var debit = Debit(
                merchantId: merchantId, subscriptionId: subscriptionId, amount: amount,
                notificationId: Self.notificationId(merchantId: merchantId, transactionId: transactionId), notifiedAt: now)
            if failNotify { debit.notificationState = "FAILED" }
            let isNew = debits.withLock { debits in
                guard debits.records[key] == nil else { return false }
                debits.records[key] = debit
                return true
            }
            guard isNew else {
                if failNotify { failNextNotify.withLock { _ = $0.insert(subscriptionId) } }
                return PhonePeSandbox.duplicateTransactionId()
            }
            await sendCallback(
                [
                    "callbackType": "NOTIFY", "merchantId": .string(merchantId), "transactionId": .string(transactionId),
                    "notificationDetails": notificationDetails(debit),
                    "subscriptionDetails": ["subscriptionId": .string(subscriptionId), "state": "ACTIVE"],
                ],
                merchant: merchant, context: context, after: context.configuration.phonePe.callbackDelayMilliseconds)
            // Recurring INIT's sample and field table: notificationId, state ACCEPTED | FAILED,
            // amount, and the epoch-ms times typed Long (fixtures `debitinitresponse--*`).
            return PhonePeSandbox.envelope(
                status: 200, success: true, code: "SUCCESS", message: "Your request has been successfully submitted.",
                data: [
                    "notificationId": .string(debit.notificationId), "state": failNotify ? "FAILED" : "ACCEPTED", "amount": .integer(amount),
                    "notifiedAt": .integer(debit.notifiedAt), "validAfter": .integer(debit.notifiedAt + Self.validAfterMilliseconds),
                    "validUpto": .integer(debit.notifiedAt + Self.validUptoMilliseconds),
                ])
        }
        guard let notificationId = payload["notificationId"]?.stringValue else {
            return PhonePeSandbox.badRequest("notificationId is required")
        }
        let declineCode = declineNextDebit.withLock { $0.removeValue(forKey: subscriptionId) }
        let decline = declineCode != nil
        let answer: DebitAnswer = debits.withLock { debits in
            guard var debit = debits.records[key], debit.notificationId == notificationId, debit.subscriptionId == subscriptionId else {
                return .refused(PhonePeSandbox.badRequest("no notification \(notificationId.prefix(64)) for this transactionId"))
            }
            guard debit.executed == nil else { return .refused(PhonePeSandbox.duplicateTransactionId()) }
            guard debit.notificationState != "FAILED" else {
                return .refused(PhonePeSandbox.badRequest("the notification \(notificationId.prefix(64)) failed"))
            }
            guard now >= debit.notifiedAt + Self.validAfterMilliseconds else {
                return .refused(PhonePeSandbox.badRequest("the notification's validAfter has not passed"))
            }
            guard now <= debit.notifiedAt + Self.validUptoMilliseconds else {
                return .refused(PhonePeSandbox.badRequest("the notification's validUpto has passed"))
            }
            debit.executed = (decline ? "FAILED" : "COMPLETED", now)
            if let declineCode { debit.failureCode = declineCode }
            debits.records[key] = debit
            return .executed(debit)
        }
        let debit: Debit
        switch answer {
        case .refused(let refusal):
            if let declineCode { declineNextDebit.withLock { $0[subscriptionId] = declineCode } }
            return refusal
        case .executed(let executed): debit = executed
        }
        if !decline { context.ledger.tookEffect("phonepe:debit:" + transactionId) }
        await sendCallback(
            [
                "callbackType": "DEBIT", "merchantId": .string(merchantId), "transactionId": .string(transactionId),
                "notificationDetails": notificationDetails(debit),
                "transactionDetails": transactionDetails(debit, transactionId: transactionId, decided: true, inCallback: true),
                "subscriptionDetails": ["subscriptionId": .string(subscriptionId), "state": "ACTIVE"],
            ],
            merchant: merchant, context: context, after: context.configuration.phonePe.callbackDelayMilliseconds)
        // Recurring Debit Execute's sample answer.
        return PhonePeSandbox.envelope(
            status: 200, success: true, code: "SUCCESS", message: "Your request has been successfully submitted.",
            data: ["merchantId": .string(merchantId), "transactionId": .string(transactionId), "state": "PENDING", "amount": .integer(debit.amount)])
    }

    package func debitStatus(_ request: HTTPRequestSpec, context: SandboxContext) -> HTTPResponseSpec {
        let path = PhonePeSandbox.path(of: request.url)
        let ids = path.dropFirst(PhonePeRules.debitStatusPathPrefix.count).split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        guard ids.count == 2, !ids[1].isEmpty else {
            return PhonePeSandbox.badRequest("path must be /v3/recurring/debit/status/{merchantId}/{merchantTransactionId}")
        }
        // As for a POST: an unknown merchantId has no salt its X-VERIFY could match.
        guard let merchant = byMerchantId[ids[0]] else { return PhonePeSandbox.refusal(401, "AUTHORIZATION_FAILED", "unknown merchantId") }
        guard let xVerify = PhonePeSandbox.header("X-VERIFY", in: request.headers), merchant.sandbox.checksumMatches(xVerify, message: path) else {
            return PhonePeSandbox.refusal(401, "AUTHORIZATION_FAILED", "X-VERIFY checksum mismatch")
        }
        guard let debit = debits.withLock({ $0.records[Self.recordKey(merchantId: ids[0], authRequestId: ids[1])] }) else {
            return PhonePeSandbox.transactionNotFound(ids[1])
        }
        var data: [String: JSONValue] = [
            "merchantId": .string(ids[0]), "transactionId": .string(ids[1]), "notificationDetails": notificationDetails(debit),
            "subscriptionDetails": ["subscriptionId": .string(debit.subscriptionId), "state": "ACTIVE"],
        ]
        if let executed = debit.executed {
            let decided = context.clock.nowMilliseconds >= executed.decidedAt
            data["transactionDetails"] = transactionDetails(debit, transactionId: ids[1], decided: decided)
        }
        return PhonePeSandbox.envelope(status: 200, success: true, code: "SUCCESS", message: Self.message(for: data), data: .object(data))
    }

    /// A failed debit's `payResponseCode` in PhonePe's Debit Execute Status sample.
    package static let bankDeclineCode = "AUTHORIZATION_FAILED"

    package static let validAfterMilliseconds: Int64 = 86_400_000
    package static let validUptoMilliseconds: Int64 = 4 * 86_400_000

    /// `notificationDetails` as the Debit Execute Status sample writes it: notificationId,
    /// amount, state, and the epoch-ms times all as JSON strings (one of the page's two
    /// versions; the INIT answer has them as numbers, the other version).
    package func notificationDetails(_ debit: Debit) -> JSONValue {
        [
            "notificationId": .string(debit.notificationId), "amount": .integer(debit.amount), "state": .string(debit.notificationState),
            "notifiedAt": .string(String(debit.notifiedAt)), "validAfter": .string(String(debit.notifiedAt + Self.validAfterMilliseconds)),
            "validUpto": .string(String(debit.notifiedAt + Self.validUptoMilliseconds)),
        ]
    }

    /// `transactionDetails` as the Debit Execute Status samples write it: COMPLETED with
    /// payResponseCode SUCCESS and a paymentMode (mode, amount, utr, ifsc, maskedAccountNumber,
    /// umn; in a DEBIT callback, as the one published callback shows: mode, amount, utr, umn);
    /// FAILED with AUTHORIZATION_FAILED and its description. A debit not yet decided is PENDING
    /// (the execute answer's state) without a payResponseCode.
    package func transactionDetails(_ debit: Debit, transactionId: String, decided: Bool, inCallback: Bool = false) -> JSONValue {
        let state = decided ? debit.executed?.state ?? "PENDING" : "PENDING"
        let seed = "debit|\(debit.merchantId)|\(transactionId)"
        var details: [String: JSONValue] = [
            "providerReferenceId": .string("P" + PhonePeSandbox.digits(seed, count: 22)), "amount": .integer(debit.amount),
            "state": .string(state),
        ]
        switch state {
        case "COMPLETED":
            details["payResponseCode"] = "SUCCESS"
            var mode: [String: JSONValue] = [
                "mode": "ACCOUNT", "amount": .integer(debit.amount), "utr": .string(PhonePeSandbox.digits("utr|" + seed, count: 12)),
            ]
            var account = PhonePeSandbox.accountFields(seed: debit.merchantId + "/" + debit.subscriptionId)
            if inCallback { account = account.filter { $0.key == "umn" } }
            mode.merge(account) { $1 }
            details["paymentModes"] = JSONValue.array([.object(mode)])
        case "FAILED":
            details["payResponseCode"] = .string(debit.failureCode)
            if debit.failureCode == Self.bankDeclineCode { details["payResponseCodeDescription"] = "Bank did not authorise" }
        default: break
        }
        return .object(details)
    }

    /// The envelope `message` of a debit status or callback: the status page's "Your payment is
    /// successful." / "Payment Failed" for a decided debit; the subscription pages' "Your
    /// subscription is <state>." for SUBSCRIPTION callbacks; otherwise PhonePe's "Your request
    /// has been successfully completed.".
    package static func message(for data: [String: JSONValue]) -> String {
        if data["callbackType"]?.stringValue == "SUBSCRIPTION" {
            switch data["subscriptionDetails"]?["state"]?.stringValue {
            case "REVOKED"?: return "Your subscription is revoked."
            case "PAUSED"?: return "Your subscription is paused."
            case "ACTIVE"?: return "Your subscription is active."
            case "CANCELLED"?: return "Your subscription is cancelled."
            case "EXPIRED"?: return "Your subscription is expired."
            default: return "Your request has been successfully completed."
            }
        }
        switch data["transactionDetails"]?["state"]?.stringValue {
        case "COMPLETED"?: return "Your payment is successful."
        case "FAILED"?: return "Payment Failed"
        default: return "Your request has been successfully completed."
        }
    }

    /// A signed S2S callback to the merchant's `phonepe.callbackURL`, `after` ms from now.
    package func sendCallback(_ data: [String: JSONValue], merchant: Merchant, context: SandboxContext, after: Int = 0) async {
        let document: JSONValue = ["success": true, "code": "SUCCESS", "message": .string(Self.message(for: data)), "data": .object(data)]
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

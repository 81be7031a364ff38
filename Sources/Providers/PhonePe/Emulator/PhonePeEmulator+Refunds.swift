import Foundation
import PaypipeCore
import PhonePe
import Sandbox

/// Refunds of completed debits as PhonePe's v3 refund reference describes them, read here on
/// their own: `POST /v3/credit/backToSource` (`merchantId`, a new `transactionId`,
/// `originalTransactionId`, `amount` in paise, `merchantOrderId`, `message`) starts the refund
/// `PAYMENT_PENDING`; it completes a callback delay later on the sandbox's clock, as PhonePe
/// settles one within about 90 seconds, and `GET /v3/transaction/{merchantId}/{transactionId}/status`
/// reports it. The original must be a completed debit of the same merchant, and all its refunds
/// together at most its amount (`EXCESS_REFUND_AMOUNT` otherwise); a transactionId used once is
/// refused as a duplicate, so nothing is replayed and a refund sent again shows. Every request
/// is recorded; the ledger counts requests under `phonepe:refund:<transactionId>`, and a refund
/// accepted as that key's effect.
extension PhonePeEmulator {
    package static let refundPath = "/v3/credit/backToSource"
    package static let transactionStatusPrefix = "/v3/transaction/"

    package struct Refund: Sendable {
        var merchantId: String
        var originalTransactionId: String
        var amount: Int64
        /// Sandbox time at which PhonePe reports it completed.
        var completesAt: Int64
    }

    package struct RefundRequest: Sendable, Equatable {
        package var transactionId: String?
        package var originalTransactionId: String?
        package var amount: Int64?
        /// The answer's code.
        package var code: String
    }

    package struct Refunds: Sendable {
        /// "merchantId \0 transactionId" → the refund.
        var records: [String: Refund] = [:]
        /// Every backToSource request received, in order.
        var requests: [RefundRequest] = []
    }

    package func refundLedgerKey(_ request: HTTPRequestSpec) -> String? {
        guard request.method == .POST, request.url == Self.refundPath, let (_, payload) = Self.refundPayload(request),
            let transactionId = payload["transactionId"]?.stringValue
        else { return nil }
        return "refund:" + transactionId
    }

    package static func refundPayload(_ request: HTTPRequestSpec) -> (base64: String, payload: JSONValue)? {
        guard let encoded = (try? JSONValue.parse(request.body))?["request"]?.stringValue, let decoded = Data(base64Encoded: encoded),
            let payload = try? JSONValue.parse(Array(decoded))
        else { return nil }
        return (encoded, payload)
    }

    /// The refund requests received, in order.
    package func refundRequests() -> [RefundRequest] { refunds.withLock { $0.requests } }

    package func refund(_ request: HTTPRequestSpec, context: SandboxContext) -> HTTPResponseSpec {
        let payload = Self.refundPayload(request)?.payload
        let response = acceptRefund(request, context: context)
        let code = (try? JSONValue.parse(response.body))?["code"]?.stringValue ?? "HTTP \(response.status)"
        refunds.withLock {
            $0.requests.append(
                RefundRequest(
                    transactionId: payload?["transactionId"]?.stringValue, originalTransactionId: payload?["originalTransactionId"]?.stringValue,
                    amount: payload?["amount"]?.integerValue, code: code))
        }
        return response
    }

    private func acceptRefund(_ request: HTTPRequestSpec, context: SandboxContext) -> HTTPResponseSpec {
        guard let (base64, payload) = Self.refundPayload(request) else {
            return PhonePeSandbox.badRequest("the body must be {\"request\": base64(JSON)}")
        }
        guard let merchantId = payload["merchantId"]?.stringValue, let merchant = byMerchantId[merchantId] else {
            return PhonePeSandbox.refusal(401, "AUTHORIZATION_FAILED", "unknown merchantId")
        }
        guard let xVerify = PhonePeSandbox.header("X-VERIFY", in: request.headers),
            merchant.sandbox.checksumMatches(xVerify, message: base64 + Self.refundPath)
        else { return PhonePeSandbox.refusal(401, "AUTHORIZATION_FAILED", "X-VERIFY checksum mismatch") }
        guard let transactionId = payload["transactionId"]?.stringValue, SafeIdentifier.isValid(transactionId, maxLength: 35),
            let original = payload["originalTransactionId"]?.stringValue, let amount = payload["amount"]?.integerValue, amount > 0,
            let merchantOrderId = payload["merchantOrderId"]?.stringValue, !merchantOrderId.isEmpty
        else {
            return PhonePeSandbox.badRequest("transactionId, originalTransactionId, a positive amount and merchantOrderId are required")
        }
        let now = context.clock.nowMilliseconds
        let debit = debits.withLock { $0.records[Self.recordKey(merchantId: merchantId, authRequestId: original)] }
        guard let debit, let executed = debit.executed, executed.state == "COMPLETED", executed.decidedAt <= now else {
            return PhonePeSandbox.refusal(400, "TRANSACTION_NOT_FOUND", "No completed transaction \(original.prefix(64)) to refund")
        }
        let key = Self.recordKey(merchantId: merchantId, authRequestId: transactionId)
        let delay = Int64(context.configuration.phonePe.callbackDelayMilliseconds)
        let refused: HTTPResponseSpec? = refunds.withLock { refunds in
            guard refunds.records[key] == nil else { return PhonePeSandbox.duplicateTransactionId() }
            let refunded = refunds.records.values.filter { $0.merchantId == merchantId && $0.originalTransactionId == original }
                .reduce(0) { $0 + $1.amount }
            guard refunded + amount <= debit.amount else {
                return PhonePeSandbox.refusal(400, "EXCESS_REFUND_AMOUNT", "Refund amount exceeds the transaction's refundable amount")
            }
            refunds.records[key] = Refund(merchantId: merchantId, originalTransactionId: original, amount: amount, completesAt: now + delay)
            return nil
        }
        if let refused { return refused }
        context.ledger.tookEffect("phonepe:refund:" + transactionId)
        return refundAnswer(merchantId: merchantId, transactionId: transactionId, amount: amount, completed: false)
    }

    package func refundStatus(_ request: HTTPRequestSpec, context: SandboxContext) -> HTTPResponseSpec {
        let path = PhonePeSandbox.path(of: request.url)
        let ids = path.dropFirst(Self.transactionStatusPrefix.count).split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        guard ids.count == 3, ids[2] == "status", !ids[1].isEmpty else {
            return PhonePeSandbox.badRequest("path must be /v3/transaction/{merchantId}/{transactionId}/status")
        }
        guard let merchant = byMerchantId[ids[0]] else { return PhonePeSandbox.refusal(401, "AUTHORIZATION_FAILED", "unknown merchantId") }
        guard let xVerify = PhonePeSandbox.header("X-VERIFY", in: request.headers), merchant.sandbox.checksumMatches(xVerify, message: path) else {
            return PhonePeSandbox.refusal(401, "AUTHORIZATION_FAILED", "X-VERIFY checksum mismatch")
        }
        guard let refund = refunds.withLock({ $0.records[Self.recordKey(merchantId: ids[0], authRequestId: ids[1])] }) else {
            return PhonePeSandbox.transactionNotFound(ids[1])
        }
        return refundAnswer(
            merchantId: ids[0], transactionId: ids[1], amount: refund.amount, completed: context.clock.nowMilliseconds >= refund.completesAt)
    }

    /// The refund's answer and status in PhonePe's v3 form: `code` PAYMENT_PENDING or
    /// PAYMENT_SUCCESS, `data` with the ids, the amount and `paymentState`.
    package func refundAnswer(merchantId: String, transactionId: String, amount: Int64, completed: Bool) -> HTTPResponseSpec {
        PhonePeSandbox.envelope(
            status: 200, success: true, code: completed ? "PAYMENT_SUCCESS" : "PAYMENT_PENDING",
            message: completed ? "Your payment is successful." : "Your request is in pending state.",
            data: [
                "merchantId": .string(merchantId), "transactionId": .string(transactionId),
                "providerReferenceId": .string("T" + PhonePeSandbox.digits("refund|\(merchantId)|\(transactionId)", count: 22)),
                "amount": .integer(amount), "paymentState": completed ? "COMPLETED" : "PENDING",
                "payResponseCode": completed ? "SUCCESS" : "PENDING",
            ])
    }
}

import PaypipeCore

extension Operation {
    /// A refund of a completed recurring debit to its source (`POST /v3/credit/backToSource`).
    public static let phonePeRefund = Operation(.phonepe, RefundTarget.operationName)
}

/// A refund of a PhonePe debit in the v3 (X-VERIFY) family this project speaks: PhonePe's
/// "Refund" reference for the recurring API ([PP-B2S] in docs/protocol.md), `POST
/// /v3/credit/backToSource` with `merchantId`, a new `transactionId`, `originalTransactionId` (the
/// debit), `amount` in paise (at most the debit's), `merchantOrderId` and `message`. PhonePe
/// answers `PAYMENT_PENDING` and settles the refund within about 90 seconds; the refund's own
/// status call (the v3 transaction status, `GET /v3/transaction/{merchantId}/{transactionId}/status`)
/// tells when. The request is never sent blind a second time: PhonePe refuses the same
/// transactionId as a duplicate and, sent under a new one, would refund again
/// (`PAYMENT_ERROR` / `EXCESS_REFUND_AMOUNT` at best), so every uncertain answer is resolved by
/// that status call.
public struct PhonePeRefund: Sendable, Equatable {
    static let allowedKeys: Set<String> = ["refundOf", "originalTransactionId", "message"]
    static let defaultMessage = "refund"
    static let messageMaxLength = 100

    public var refundOf: String
    public var originalTransactionId: String
    /// The refund's own id, derived from the order: the same for every dispatch of it.
    public var transactionId: String
    /// Paise.
    public var amount: Int64
    public var message: String

    public init(order: Order) throws(Rejection) {
        guard order.operation == .phonePeRefund else {
            throw Rejection(.unknownOperation, field: "operation", "expected phonepe refund, got \(order.operation.rawValue)")
        }
        let params = try ParamReader(order.params, allowed: Self.allowedKeys, operation: "phonepe refund")
        refundOf = try params.refundOf()
        originalTransactionId = try params.string(
            "originalTransactionId", length: 1...PhonePeRules.authRequestIdMaxLength, charset: .identifier)
        message = try params.optionalString("message", length: 1...Self.messageMaxLength, charset: .noControlCharacters) ?? Self.defaultMessage
        guard let amount = order.amount, amount > 0, order.currency == PhonePeRules.currency else {
            throw Rejection(.invalidCurrency, field: "currency", "a phonepe refund takes a positive amount in paise and currency INR")
        }
        self.amount = amount
        transactionId = Self.transactionId(for: order.key)
    }

    /// `RF` and 33 hex digits of the order's key: within PhonePe's 35 characters, and apart
    /// from the debits' ids, which the ledger derives with its own prefix.
    public static func transactionId(for key: OrderKey) -> String {
        var material = Array("phonepe-refund".utf8)
        for part in [key.merchant, key.orderId] {
            material.append(0)
            material += Array(part.utf8)
        }
        return "RF" + Digest.sha256Hex(material).prefix(33)
    }

    /// The signed refund, and the signed status call that resolves it.
    public func requests(merchant: PhonePeMerchant) throws(Rejection) -> (request: HTTPRequestSpec, status: HTTPRequestSpec) {
        let (baseURL, merchantId) = try merchant.endpoint.get()
        var writer = JSONObjectWriter(capacity: 256)
        writer.integer("amount", amount)
        writer.string("merchantId", merchantId)
        writer.string("merchantOrderId", transactionId)
        writer.string("message", message)
        writer.string("originalTransactionId", originalTransactionId)
        writer.string("transactionId", transactionId)
        let payload = Base64.encodeToString(writer.finish(), .standard)
        let path = PhonePeRules.refundPath
        let request = HTTPRequestSpec(
            method: .POST, url: baseURL + path,
            headers: [
                HTTPHeader("Content-Type", "application/json"),
                HTTPHeader("X-VERIFY", merchant.checksum.xVerify(payloadBase64: payload, apiPath: path)),
            ],
            body: Array("{\"request\":\"\(payload)\"}".utf8))
        let statusPath = PhonePeRules.transactionStatusPath(merchantId: merchantId, transactionId: transactionId)
        let status = HTTPRequestSpec(
            method: .GET, url: baseURL + statusPath,
            headers: [HTTPHeader("Content-Type", "application/json"), HTTPHeader("X-VERIFY", merchant.checksum.xVerify(path: statusPath))])
        return (request, status)
    }

    /// The answer to backToSource. A duplicate transactionId is this order's own earlier
    /// request, which may have refunded: the status call decides.
    public func classify(_ response: HTTPResponseSpec) -> ProviderVerdict {
        read(response, call: "refund", notFound: { .failed(code: .phonePe($0), message: "PhonePe knows no debit \(originalTransactionId)") })
    }

    /// The status call's answer. "Not found" before a resubmit means PhonePe never saw the
    /// refund; at the last check (`finalCheck`) a refund still pending is `unknown`, never
    /// "nothing moved": PhonePe may still pay it out.
    public func classifyStatus(_ response: HTTPResponseSpec, beforeResubmit: Bool, finalCheck: Bool) -> ProviderVerdict {
        let verdict = read(response, call: "refund status") { code in
            let reason = "PhonePe has no refund \(transactionId) (\(code))"
            return beforeResubmit ? .neverSeen(reason: reason) : .unknown(reason: reason)
        }
        if finalCheck, case .pending = verdict { return .unknown(reason: "PhonePe still reports refund \(transactionId) pending") }
        return verdict
    }

    private func read(_ response: HTTPResponseSpec, call: String, notFound: (String) -> ProviderVerdict) -> ProviderVerdict {
        let status = response.status
        if status == 429 || status >= 500 { return .unknown(reason: "PhonePe \(call) answered HTTP \(status)") }
        guard let envelope = PhonePeResponse(json: response.body) else {
            return .unknown(reason: "PhonePe \(call) answered HTTP \(status) without a readable response envelope")
        }
        guard let code = envelope.code, PhonePeRules.isIdentifier(code, maxLength: 64) else {
            return .unknown(reason: "PhonePe \(call) answered HTTP \(status) without a code")
        }
        let state = envelope.data?["paymentState"]?.stringValue ?? envelope.data?["state"]?.stringValue
        if code == "PAYMENT_SUCCESS" || (code == "SUCCESS" && ["COMPLETED", "SUCCESS"].contains(state)) {
            if let refunded = envelope.data?["amount"]?.integerValue, refunded != amount {
                return .failed(code: .amountMismatch, message: "PhonePe reports a refund of \(refunded), the order is for \(amount)")
            }
            return .succeeded(result(envelope.data))
        }
        if code == "PAYMENT_PENDING" || (code == "SUCCESS" && (state == nil || state == "PENDING")) {
            return .pending(["transactionId": .string(transactionId)])
        }
        if PhonePeRules.notFoundCodes.contains(code) { return notFound(code) }
        if PhonePeRules.refundUncertainCodes.contains(code) {
            return .unknown(reason: "PhonePe \(call) answered \(code); the refund's status decides")
        }
        if code == "SUCCESS", state == "FAILED" {
            let detail = envelope.data?["payResponseCode"]?.stringValue.flatMap { PhonePeRules.isIdentifier($0, maxLength: 64) ? $0 : nil }
            return .failed(code: detail.map { .phonePe($0) } ?? .phonePeRefundFailed, message: envelope.shortMessage)
        }
        return .failed(code: .phonePe(code), message: envelope.shortMessage)
    }

    private func result(_ data: [String: JSONValue]?) -> [String: JSONValue] {
        var result: [String: JSONValue] = [
            "transactionId": .string(transactionId), "originalTransactionId": .string(originalTransactionId), "amount": .integer(amount),
        ]
        if let reference = data?["providerReferenceId"]?.stringValue, PhonePeRules.isIdentifier(reference, maxLength: 64) {
            result["providerReferenceId"] = .string(reference)
        }
        return result
    }
}

extension PhonePeRules {
    public static let refundPath = "/v3/credit/backToSource"
    public static let transactionStatusPathPrefix = "/v3/transaction/"

    /// `GET /v3/transaction/{merchantId}/{transactionId}/status`, the v3 status of a refund.
    public static func transactionStatusPath(merchantId: String, transactionId: String) -> String {
        transactionStatusPathPrefix + merchantId + "/" + transactionId + "/status"
    }

    /// Answers to a refund that say nothing about whether it took effect: the duplicate
    /// refusal (this order's own earlier refund), PhonePe's own failure, a timeout.
    public static let refundUncertainCodes: Set<String> = [duplicateCode, "INTERNAL_SERVER_ERROR", "TIMED_OUT"]
}

extension OutcomeErrorCode {
    /// `failed`: the refund failed and PhonePe gave no usable `payResponseCode`.
    public static let phonePeRefundFailed = OutcomeErrorCode(rawValue: "REFUND_FAILED")
}

/// The debits of a PhonePe mandate paypipe made, and the debit a refund names, for the ledger.
struct PhonePeRefunding: Refunding {
    func refundTarget(of order: Order) -> RefundTarget? {
        guard let refund = try? PhonePeRefund(order: order) else { return nil }
        return RefundTarget(originalOrderId: refund.refundOf, captureReference: refund.originalTransactionId)
    }

    /// A completed recurring debit took the order's amount (the debit's reading refuses any
    /// other) under the order's transactionId.
    func captures(of order: Order, outcome: Outcome) -> [Capture] {
        guard order.operation == .debitExecute, outcome.status == .succeeded,
            let transactionId = outcome.result?["transactionId"]?.stringValue ?? PhonePeDebit.transactionId(of: order),
            let amount = order.amount, let currency = order.currency
        else { return [] }
        return [Capture(reference: transactionId, amount: amount, currency: currency)]
    }
}

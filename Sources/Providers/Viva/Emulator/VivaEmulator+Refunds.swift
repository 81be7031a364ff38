import Foundation
import PaypipeCore
import Sandbox

/// Viva's legacy "Cancel transaction" call as its page describes it, read here on its own:
/// `DELETE /api/transactions/{transactionId}?amount={cents}` with a bearer token of the Sale's
/// merchant refunds that much of a completed Sale (`statusId` F, or R once partly refunded) and
/// answers `{TransactionId (the refund's, new), StatusId "F", ErrorCode 0, ErrorText null,
/// TimeStamp}`. More than the Sale has left, or a Sale not completed, is refused with HTTP 400
/// and a non-zero `ErrorCode` (the page documents only that 0 means success). Nothing is
/// replayed: the same request twice refunds twice, each with its own TransactionId, and every
/// request is recorded. The Sale's record then reads `R` (the sandbox's choice where Viva's
/// documentation is silent for a partial refund). The ledger counts requests under
/// `viva:refund:<Sale transactionId>` and each refund made as `viva:refund:<refund's id>`.
extension VivaEmulator {
    package static let refundPrefix = "/api/transactions/"

    package struct RefundRequest: Sendable, Equatable {
        package var transactionId: String
        package var amount: Int64?
        /// The answer's ErrorCode, or the HTTP status of a refused request.
        package var errorCode: Int64
    }

    package func ledgerKey(_ request: HTTPRequestSpec) -> SandboxLedgerKey {
        guard request.method == .DELETE, request.url.hasPrefix(Self.refundPrefix) else { return .now(nil) }
        return .now("refund:" + Self.refundTarget(request.url).transactionId)
    }

    package static func refundTarget(_ url: String) -> (transactionId: String, amount: Int64?) {
        let rest = url.dropFirst(refundPrefix.count)
        let parts = rest.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        let transactionId = String(parts[0]).removingPercentEncoding ?? String(parts[0])
        let query = parts.count > 1 ? SandboxContext.queryParameters(String(parts[1])) : [:]
        return (transactionId, query["amount"].flatMap { Int64($0) })
    }

    /// The refund requests received, in order.
    package func refundRequests() -> [RefundRequest] { state.withLock { $0.refundRequests } }

    package func refund(_ request: HTTPRequestSpec, ledger: SandboxLedger? = nil) -> HTTPResponseSpec {
        let (transactionId, amount) = Self.refundTarget(request.url)
        let response = makeRefund(transactionId: transactionId, amount: amount, authorization: request.header("Authorization"))
        let answer = try? JSONValue.parse(response.body)
        let errorCode = answer?["ErrorCode"]?.integerValue ?? Int64(response.status)
        if errorCode == 0, let refundId = answer?["TransactionId"]?.stringValue { ledger?.tookEffect("viva:refund:" + refundId) }
        state.withLock { $0.refundRequests.append(RefundRequest(transactionId: transactionId, amount: amount, errorCode: errorCode)) }
        return response
    }

    private func makeRefund(transactionId: String, amount: Int64?, authorization: String?) -> HTTPResponseSpec {
        guard let authorization, authorization.hasPrefix("Bearer ") else { return HTTPResponseSpec(status: 401) }
        let now = SandboxContext.epochSeconds()
        return state.withLock { state -> HTTPResponseSpec in
            guard let grant = state.tokens[String(authorization.dropFirst(7))], grant.expires > now else { return HTTPResponseSpec(status: 401) }
            guard var sale = state.transactions[transactionId], sale.merchantKey == merchants[grant.merchant].config.merchantKey else {
                return SandboxContext.json(404, ["message": "transaction not found"])
            }
            guard let amount, amount > 0 else { return Self.refused(400, "amount must be a positive number of cents") }
            guard sale.statusId == "F" || sale.statusId == "R" else { return Self.refused(400, "the transaction cannot be refunded") }
            let refunded = state.refunded[transactionId] ?? 0
            guard refunded + amount <= sale.amount else { return Self.refused(400, "the amount exceeds what the transaction has left to refund") }
            state.refunded[transactionId] = refunded + amount
            sale.statusId = "R"
            state.transactions[transactionId] = sale
            let refundId = VivaSandbox.uuid(from: "refund|\(transactionId)|\(state.refundRequests.count)")
            return SandboxContext.json(
                200,
                [
                    "TransactionId": .string(refundId), "StatusId": "F", "ErrorCode": 0, "ErrorText": .null,
                    "TimeStamp": .string(Timestamp.iso8601(milliseconds: Timestamp.nowMilliseconds())), "Amount": .fraction(Double(amount) / 100),
                ])
        }
    }

    static func refused(_ status: Int, _ text: String) -> HTTPResponseSpec {
        SandboxContext.json(status, ["TransactionId": .null, "StatusId": .null, "ErrorCode": .integer(Int64(status)), "ErrorText": .string(text)])
    }
}

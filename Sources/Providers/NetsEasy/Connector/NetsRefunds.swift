import PaypipeCore

extension Operation {
    /// Gives back part or all of one charge (`POST /v1/charges/{chargeId}/refunds`).
    public static let netsRefund = Operation(.nets, RefundTarget.operationName)
}

/// Nets refunds (PROVIDERS-MONEY §2 [NX-REF], [SNEC NexiChargeClient.cs]): a refund is of one
/// charge, with an `Idempotency-Key` derived from the refund order, and answers `{refundId}`
/// only: Nets settles it later. Its state is read from the payment's `refunds[]`
/// (`GET /v1/payments/{paymentId}`, [SNEC RefundInfo.cs]): Pending, Completed, or one of the
/// states that gave nothing back (Failed, Cancelled, Expired).
public enum NetsRefunds {
    /// `refundOf` is the ledger's (the order refunded); `chargeId` the capture refunded;
    /// `paymentId` the payment the charge belongs to, read for the refund's state.
    public static let params = ["refundOf", "chargeId", "paymentId"]

    /// `POST {baseURL}/v1/charges/{chargeId}/refunds` with `{"amount"}`.
    public static func sign(_ order: Order, config: NetsConfig) throws(Rejection) -> HTTPRequestSpec {
        try NetsPayments.requireOperation(order, .netsRefund)
        let params = try ParamReader(order.params, allowed: Self.params, operation: "nets refund")
        _ = try params.string("refundOf", length: 1...64)
        _ = try params.netsSafeId("paymentId")
        let chargeId = try params.netsSafeId("chargeId")
        return try NetsPayments.postAmount(
            of: order, config: config, path: "/v1/charges/\(chargeId)/refunds", rule: "nets refund gives back a positive amount")
    }

    /// The refund's answer: 2xx `{refundId}` → `pending` until its state is read; a refusal
    /// (400: more than the charge has left, 404: no such charge) → `failed`.
    public static func readRefund(_ response: HTTPResponseSpec, order: Order) -> ProviderVerdict {
        guard (200...299).contains(response.status) else { return NetsPayments.classifyError(response, kind: .refundCharge) }
        guard let refundId = (try? JSONValue.parse(response.body))?["refundId"]?.stringValue, NetsIdentifiers.isSafeId(refundId) else {
            return .unknown(reason: "Nets answered \(response.status) to the refund without a refundId; it is asked again with the same key")
        }
        return .pending(references(order, refundId: refundId))
    }

    /// A pending refund's state, from the payment's `refunds[]`:
    /// Completed → `succeeded`; Failed, Cancelled or Expired → `failed` NETS_REFUND_FAILED;
    /// Pending → `pending`, except at the order's last check, where it is `unknown` (Nets may
    /// still give the money back, so the order may not end as if nothing moved).
    public static func readState(_ response: HTTPResponseSpec, order: Order, refundId: String, lastCheck: Bool) -> ProviderVerdict {
        switch response.status {
        case 200...299: break
        case 429, 500...599: return .retry(reason: "Nets answered \(response.status) to GET payment")
        default: return .unknown(reason: "Nets answered \(response.status) to GET payment")
        }
        guard let payment = (try? JSONValue.parse(response.body))?["payment"]?.objectValue else {
            return .unknown(reason: "Nets payment response has no payment object")
        }
        guard let refund = payment["refunds"]?.arrayValue?.first(where: { $0["refundId"]?.stringValue == refundId }) else {
            return .unknown(reason: "the payment lists no refund \(refundId.prefix(64))")
        }
        let state = refund["state"]?.stringValue ?? ""
        switch state {
        case "Completed":
            var result = references(order, refundId: refundId)
            result["refundedAmount"] = .integer(refund["amount"]?.integerValue ?? order.amount ?? 0)
            return .succeeded(result)
        case "Failed", "Cancelled", "Expired":
            return .failed(code: .netsRefundFailed, message: "Nets shows refund \(refundId.prefix(64)) \(state): nothing was given back")
        case "Pending" where !lastCheck: return .pending(references(order, refundId: refundId))
        default:
            return .unknown(reason: "Nets shows refund \(refundId.prefix(64)) as \(state.isEmpty ? "without a state" : String(state.prefix(32)))")
        }
    }

    static func references(_ order: Order, refundId: String) -> [String: JSONValue] {
        var result: [String: JSONValue] = ["refundId": .string(refundId)]
        for name in params { if let value = order.params[name] { result[name] = value } }
        return result
    }

    /// The status call of a pending refund: the payment it belongs to.
    public static func statusRequest(_ order: Order, config: NetsConfig) throws(Rejection) -> HTTPRequestSpec {
        let params = try ParamReader(order.params, allowed: Self.params, operation: "nets refund")
        return try NetsPayments.fetchPayment(paymentId: params.netsSafeId("paymentId"), config: config)
    }
}

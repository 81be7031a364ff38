import PaypipeCore

extension Operation {
    /// Charges what a subscription's checkout reserved: the order the ledger makes after a
    /// `createSubscription` succeeded, under `nets.firstPayment: charge`.
    public static let netsChargePayment = Operation(.nets, "chargePayment")
}

/// A subscription's first payment, charged by paypipe (`nets.firstPayment: charge`): the hosted
/// page only reserves it, and Nets charges a reservation only when asked
/// (`POST /v1/payments/{paymentId}/charges`, PROVIDERS-MONEY §2 [NX-CHG]). The charge carries
/// an `Idempotency-Key` derived from its order, whose id the ledger derives from the first
/// order's, so however often it is sent it is one charge. A lost answer is settled by reading
/// the payment (`summary.chargedAmount`, `charges[]`), never by charging again to find out.
public enum NetsFirstCharge {
    public static let params = ["paymentId", "firstPaymentOf"]
    /// The word in the charge order's id (`ScheduledAttempt.followingOrderId`).
    static let orderIdPurpose = "first"

    /// The charge of the reservation `order` (a succeeded `createSubscription`) made; nil when
    /// the merchant lets Nets charge at checkout, when nothing is to be charged (a zero-amount
    /// verification subscription) or when the outcome names no payment.
    public static func order(after order: Order, outcome: Outcome, mode: NetsFirstPayment) -> Order? {
        guard mode == .charge, order.operation == .createSubscription, let amount = order.amount, amount > 0,
            let paymentId = outcome.result?["paymentId"]?.stringValue, NetsIdentifiers.isSafeId(paymentId)
        else { return nil }
        return Order(
            orderId: ScheduledAttempt.followingOrderId(of: order.key, purpose: orderIdPurpose), merchant: order.merchant,
            operation: .netsChargePayment, amount: amount, currency: order.currency,
            params: ["paymentId": .string(paymentId), "firstPaymentOf": .string(order.orderId)])
    }

    /// `POST {baseURL}/v1/payments/{paymentId}/charges` with `{"amount"}`: the whole order,
    /// which is all the checkout reserved.
    public static func sign(_ order: Order, config: NetsConfig) throws(Rejection) -> HTTPRequestSpec {
        try NetsPayments.requireOperation(order, .netsChargePayment)
        let params = try ParamReader(order.params, allowed: Self.params, operation: "nets chargePayment")
        let paymentId = try params.netsSafeId("paymentId")
        return try NetsPayments.postAmount(
            of: order, config: config, path: "/v1/payments/\(paymentId)/charges", rule: "nets chargePayment charges a positive amount")
    }

    /// The charge's answer: 2xx `{chargeId}` → `succeeded` with what was charged.
    public static func readCharge(_ response: HTTPResponseSpec, order: Order) -> ProviderVerdict {
        guard (200...299).contains(response.status) else { return NetsPayments.classifyError(response, kind: .chargePayment) }
        guard let chargeId = (try? JSONValue.parse(response.body))?["chargeId"]?.stringValue, NetsIdentifiers.isSafeId(chargeId) else {
            return .unknown(reason: "Nets answered \(response.status) to the charge without a chargeId; the payment is read to find out")
        }
        return .succeeded(result(order, chargeId: chargeId, charged: order.amount ?? 0))
    }

    /// The payment read back after the charge's answer was lost (`GET /v1/payments/{paymentId}`):
    /// - charged at least the order's amount → `succeeded` with the charge Nets lists;
    /// - nothing charged, the reservation intact → `neverSeen`: the charge may be sent (with its
    ///   key) only where the submitter resolves before a resubmit;
    /// - anything else (part charged, unreadable, an error) → `unknown`, for a person or a later read.
    public static func readPayment(_ response: HTTPResponseSpec, order: Order) -> ProviderVerdict {
        switch response.status {
        case 200...299: break
        case 429, 500...599: return .retry(reason: "Nets answered \(response.status) to GET payment")
        default: return .unknown(reason: "Nets answered \(response.status) to GET payment")
        }
        guard let payment = (try? JSONValue.parse(response.body))?["payment"]?.objectValue else {
            return .unknown(reason: "Nets payment response has no payment object")
        }
        let charged = payment["summary"]?["chargedAmount"]?.integerValue ?? 0
        let expected = order.amount ?? 0
        if charged == 0 { return .neverSeen(reason: "Nets shows nothing charged on the payment") }
        guard charged >= expected, let chargeId = payment["charges"]?.arrayValue?.first?["chargeId"]?.stringValue,
            NetsIdentifiers.isSafeId(chargeId)
        else {
            return .unknown(reason: "Nets shows \(charged) charged on the payment, not the order's \(expected) in one charge")
        }
        return .succeeded(result(order, chargeId: chargeId, charged: charged))
    }

    static func result(_ order: Order, chargeId: String, charged: Int64) -> [String: JSONValue] {
        var result: [String: JSONValue] = ["chargeId": .string(chargeId), "chargedAmount": .integer(charged)]
        for name in params { if let value = order.params[name] { result[name] = value } }
        return result
    }

    /// The payment's read, with the charge's own credentials (the submitter holds no secret).
    public static func paymentRequest(following charge: HTTPRequestSpec) -> HTTPRequestSpec? {
        guard NetsRequestKind(charge) == .chargePayment, charge.url.hasSuffix("/charges") else { return nil }
        let headers = charge.headers.filter { !["content-type", "idempotency-key"].contains($0.name.lowercased()) }
        return HTTPRequestSpec(method: .GET, url: String(charge.url.dropLast("/charges".count)), headers: headers)
    }
}

extension NetsPayments {
    /// `POST {baseURL}{path}` with `{"amount"}` (the order's, which must be positive: `rule`
    /// says so) under the order's Idempotency-Key: a charge of a payment or a refund of a charge.
    static func postAmount(of order: Order, config: NetsConfig, path: String, rule: String) throws(Rejection) -> HTTPRequestSpec {
        guard let amount = order.amount, amount > 0 else { throw Rejection(.amountNotPositive, field: "amount", rule) }
        return try post(
            config: config, path: path, body: ["amount": .integer(amount)], idempotencyKey: NetsIdentifiers.idempotencyKey(for: order.key),
            includePlatformTag: true)
    }
}

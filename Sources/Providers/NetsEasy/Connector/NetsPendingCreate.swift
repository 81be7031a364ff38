import PaypipeCore

/// A created subscription payment that is still `pending`: resolved with
/// `GET /v1/payments/{paymentId}` when no webhook came, and read the same way when the
/// checkout-completed webhook arrives, so the `succeeded` outcome carries the `subscriptionId`.
public enum NetsPendingCreate {
    /// The status call for a pending create, from its pending outcome's `paymentId`; nil when
    /// the outcome carries none it could be (then nothing can be asked).
    public static func statusRequest(pending: [String: JSONValue], config: NetsConfig) throws(Rejection) -> HTTPRequestSpec? {
        guard let paymentId = pending["paymentId"]?.stringValue, NetsIdentifiers.isSafeId(paymentId) else { return nil }
        return try NetsPayments.fetchPayment(paymentId: paymentId, config: config)
    }

    /// Nets Easy's payment API reference: completed when `payment.subscription.id` is present (or
    /// money was reserved or charged); `payment.terminated` means the customer abandoned it;
    /// neither: still open.
    /// - subscription id → `succeeded` {paymentId, subscriptionId, amount?};
    /// - money reserved or charged but no subscription id → `unknown` (money moved; a person or
    ///   a later check decides);
    /// - terminated, nothing reserved → `failed` NETS_CHECKOUT_ABANDONED (nothing was taken);
    /// - still open → `pending` (nothing taken yet);
    /// - an answer that says nothing about the payment (4xx, unreadable) → `unknown`; 429/5xx → `retry`.
    public static func read(_ response: HTTPResponseSpec, paymentId: String) -> ProviderVerdict {
        switch response.status {
        case 200...299: break
        case 429, 500...599: return .retry(reason: "Nets answered \(response.status) to GET payment")
        default: return .unknown(reason: "Nets answered \(response.status) to GET payment \(paymentId)")
        }
        guard let payment = (try? JSONValue.parse(response.body))?["payment"]?.objectValue else {
            return .unknown(reason: "Nets payment response has no payment object")
        }
        let summary = payment["summary"]
        let taken = ["reservedAmount", "chargedAmount"].compactMap { summary?[$0]?.integerValue }.max() ?? 0
        if let subscriptionId = payment["subscription"]?["id"]?.stringValue {
            guard NetsIdentifiers.isSafeId(subscriptionId) else { return .unknown(reason: "payment.subscription.id is not a safe id") }
            var result: [String: JSONValue] = ["paymentId": .string(paymentId), "subscriptionId": .string(subscriptionId)]
            if taken > 0 { result["amount"] = .integer(taken) }
            // Charged at checkout (`nets.firstPayment: checkout`): what a refund may give back.
            if let charged = summary?["chargedAmount"]?.integerValue, charged > 0,
                let chargeId = payment["charges"]?.arrayValue?.first?["chargeId"]?.stringValue, NetsIdentifiers.isSafeId(chargeId)
            {
                result["chargedAmount"] = .integer(charged)
                result["chargeId"] = .string(chargeId)
            }
            return .succeeded(result)
        }
        if taken > 0 {
            return .unknown(reason: "Nets reports \(taken) reserved or charged on payment \(paymentId) but no subscription")
        }
        if let terminated = payment["terminated"], terminated != .null {
            return .failed(code: .netsCheckoutAbandoned, message: "the customer abandoned the checkout (payment terminated); nothing was taken")
        }
        return .pending(["paymentId": .string(paymentId)])
    }

    /// The paymentId a status request names (its last path segment).
    static func paymentId(of request: HTTPRequestSpec) -> String {
        NetsRequestKind.pathSegments(request.url).last.map(String.init) ?? ""
    }
}

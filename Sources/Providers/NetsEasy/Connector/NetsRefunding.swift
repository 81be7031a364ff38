import PaypipeCore

/// What a Nets refund gives back, for the ledger's checks: a charge (`params.chargeId`) of an
/// earlier order (`params.refundOf`). The orders that charge are a subscription's first payment
/// (`chargePayment`, or a `createSubscription` whose checkout charged it), and its scheduled
/// cycles (`chargeSubscription`); each reports its charge's `chargeId`.
struct NetsRefunding: Refunding {
    func refundTarget(of order: Order) -> RefundTarget? {
        guard order.operation == .netsRefund else { return nil }
        // Missing or mistyped, they are empty: the ledger then refuses the refund naming them.
        return RefundTarget(
            originalOrderId: order.params["refundOf"]?.stringValue ?? "", captureReference: order.params["chargeId"]?.stringValue ?? "")
    }

    func captures(of order: Order, outcome: Outcome) -> [Capture] {
        guard outcome.status == .succeeded, let chargeId = outcome.result?["chargeId"]?.stringValue, !chargeId.isEmpty,
            let currency = order.currency
        else { return [] }
        switch order.operation {
        case .netsChargePayment, .createSubscription:
            guard let charged = outcome.result?["chargedAmount"]?.integerValue, charged > 0 else { return [] }
            return [Capture(reference: chargeId, amount: charged, currency: currency)]
        case .chargeSubscription:
            guard let amount = order.amount, amount > 0 else { return [] }
            return [Capture(reference: chargeId, amount: amount, currency: currency)]
        default: return []
        }
    }
}

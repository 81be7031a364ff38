import PaypipeCore
import StageWire

/// Refunds (docs/protocol.md, "Refunds"): a refund order names an earlier order of its merchant
/// and provider (`params.refundOf`) and one of the captures that order's success reported. The
/// ledger admits it only when the refunds of that capture, this one included, stay within what
/// it captured, checked under the original order's lock in the transaction that admits it, so
/// that two refunds taken in at once by two ledgers cannot both pass on the same money.
extension LedgerCore {
    /// The refund `order` as the store will keep it, or the rule it breaks, naming the field
    /// and the amounts. Call inside the transaction that admits it.
    func checkRefund(_ order: Order, target: RefundTarget) throws -> Result<RefundRecord, Rejection> {
        let provider = order.provider.rawValue
        let originalId = target.originalOrderId
        guard !originalId.isEmpty else { return .failure(.missingParam("refundOf")) }
        guard let refunding = registry.connector(for: order.provider)?.refunding else {
            return .failure(Rejection(.unknownOperation, field: "operation", "\(provider) refunds are not made"))
        }
        let originalKey = OrderKey(merchant: order.merchant, orderId: originalId)
        guard originalId != order.orderId, let stored = try store.lockedForRefund(originalKey), let json = stored.orderJSON,
            case .order(let original) = Order.decode(json: json, catalog: registry.catalog), original.provider == order.provider,
            refunding.refundTarget(of: original) == nil
        else {
            return .failure(
                Rejection(
                    .refundOriginalUnknown, field: "params.refundOf",
                    "params.refundOf names no \(provider) order \(originalId.prefix(64)) of merchant \(order.merchant.prefix(64)) that a refund can give back"
                ))
        }
        let outcome = stored.outcome.flatMap { try? Outcome.parse(Array($0.utf8)) }
        guard let outcome, outcome.status == .succeeded else {
            return .failure(
                Rejection(
                    .refundOriginalNotSucceeded, field: "params.refundOf",
                    "order \(originalId.prefix(64)) is \(outcome?.status.rawValue ?? "still in flight"): only what a succeeded order captured can be refunded"
                ))
        }
        let captures = refunding.captures(of: original, outcome: outcome)
        let subscription = try subscription(paidBy: original)
        var found = captures.first { $0.reference == target.captureReference }
        if found == nil, refunding.refundsRenewalsThroughTheFirstOrder, let subscription {
            found = try store.renewalCapture(
                merchant: order.merchant, provider: Provider(subscription.provider), reference: subscription.reference,
                providerReference: target.captureReference)
        }
        guard let capture = found, !target.captureReference.isEmpty else {
            let known = captures.isEmpty ? "none" : captures.map { "\($0.reference.prefix(64))" }.joined(separator: ", ")
            let renewals = refunding.refundsRenewalsThroughTheFirstOrder && subscription != nil ? ", nor a renewal of its subscription" : ""
            return .failure(
                Rejection(
                    .refundCaptureUnknown, field: "params",
                    "order \(originalId.prefix(64)) captured no \"\(target.captureReference.prefix(64))\" (its captures: \(known))\(renewals)"))
        }
        guard let amount = order.amount else { return .failure(Rejection(.missingField, field: "amount", "a refund names the amount it gives back")) }
        guard order.currency == capture.currency else {
            return .failure(
                Rejection(
                    .refundCurrencyMismatch, field: "currency",
                    "currency \(order.currency ?? "none") is not capture \(capture.reference.prefix(64))'s \(capture.currency)"))
        }
        // A refund that ended failed or rejected gave nothing back; any other (in flight,
        // pending, unknown, in review, succeeded) may have or will.
        let earlier = try store.refunds(merchant: order.merchant, of: originalId).filter { refund in
            guard refund.captureReference == capture.reference, refund.orderId != order.orderId else { return false }
            let status = refund.outcome.flatMap { try? Outcome.parse(Array($0.utf8)) }?.status
            return status != .failed && status != .rejected
        }
        let held = earlier.reduce(Int64(0)) { $0 + $1.amount }
        guard amount <= capture.amount - held else {
            return .failure(
                Rejection(
                    .refundExceedsCaptured, field: "amount",
                    "amount \(amount) is more than the \(max(0, capture.amount - held)) left of capture \(capture.reference.prefix(64)) of order \(originalId.prefix(64)): it captured \(capture.amount) \(capture.currency), and \(held) is refunded or being refunded"
                ))
        }
        return .success(
            RefundRecord(
                orderId: order.orderId, originalOrderId: originalId, captureReference: capture.reference, amount: amount, currency: capture.currency,
                subscriptionProvider: subscription?.provider, subscription: subscription?.reference))
    }

    /// The subscription `order` paid for: a scheduled cycle's, or one it opened or the pipeline
    /// made it for.
    func subscription(paidBy order: Order) throws -> (provider: String, reference: String)? {
        if let step = ScheduledAttempt.step(ofOrderId: order.orderId),
            let plan = try store.schedule(merchant: order.merchant, digest: step.digest, locking: false)
        {
            return (plan.provider.rawValue, plan.reference)
        }
        return try store.subscription(paidBy: order.key)
    }

    /// A refund's final word, reported to the subscription its original order paid for
    /// (`refund.succeeded`, `refund.failed`); the subscription's state does not change. Call
    /// inside the transaction that recorded the outcome.
    func reportRefund(after outcome: Outcome, counters: inout Counters, now: Int64) throws -> [Effect] {
        guard outcome.operation == RefundTarget.operationName, outcome.status == .succeeded || outcome.status == .failed,
            registry.connector(for: Provider(outcome.provider))?.refunding != nil,
            let refund = try store.refund(OrderKey(merchant: outcome.merchant, orderId: outcome.orderId)),
            let provider = refund.subscriptionProvider, let subscription = refund.subscription
        else { return [] }
        let succeeded = outcome.status == .succeeded
        let event = SubscriptionEvent(
            merchant: outcome.merchant, provider: Provider(provider), subscription: subscription, dedupeKey: "refund|\(outcome.orderId)",
            kind: succeeded ? .refundSucceeded : .refundFailed, amount: refund.amount, currency: refund.currency,
            providerReference: outcome.orderId,
            reason: succeeded
                ? "refund of order \(refund.originalOrderId)" : "refund of order \(refund.originalOrderId) failed: \(outcome.error?.code ?? "FAILED")"
        )
        return try record(event, counters: &counters, now: now) ?? []
    }

    /// Admits the order a first order's success makes (`ProviderConnector.followingOrder`)
    /// and dispatches it, noting the subscription it pays for. Made before (a redelivered
    /// outcome), it is left as it is. Call inside the transaction that recorded the outcome.
    func admitFollowingOrder(_ order: Order, subscription: String, now: Int64) throws -> [Effect] {
        let references = registry.connector(for: order.provider)?.callbackReferences(for: order) ?? []
        let json = order.serialized
        guard try store.admit(order, json: json, references: references, now: now) == .new else { return [] }
        try store.linkOrder(order.key, toSubscription: subscription, provider: order.provider)
        let ticket = store.tickets.ticket(for: order.key, generation: 1)
        return [.dispatch(DispatchFrame.encode(orderJSON: json, acceptedAt: now, token: ticket.token))]
    }
}

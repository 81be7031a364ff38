import PaypipeCore
import StageWire

/// Cancelling a subscription (docs/protocol.md, "Cancelling a subscription"): a `cancel` order
/// is checked against the subscription's record before anything is sent, and its `succeeded`
/// outcome cancels the subscription in the ledger in the transaction that records it.
extension LedgerCore {
    /// The order as it is stored and dispatched, with what the ledger knows of the subscription
    /// (`SubscriptionCancel.Record`); or why it is rejected: the subscription is not known for
    /// this merchant and provider, or has already ended. Call inside the intake transaction.
    func recordedCancel(_ order: Order, _ cancel: SubscriptionCancel) throws -> Result<Order, Rejection> {
        guard let subscription = try store.cancellableSubscription(merchant: order.merchant, provider: order.provider, reference: cancel.subscription)
        else {
            return .failure(
                Rejection(
                    .subscriptionNotFound, field: "params.subscription",
                    "params.subscription names no \(order.provider.rawValue) subscription of merchant \(order.merchant.prefix(64)) whose first order succeeded: \(cancel.subscription.prefix(64))"
                ))
        }
        guard !subscription.state.isFinal else {
            return .failure(
                Rejection(
                    .subscriptionEnded, field: "params.subscription",
                    "params.subscription names subscription \(cancel.subscription.prefix(64)), which is \(subscription.state.rawValue): there is nothing left to cancel"
                ))
        }
        return .success(
            SubscriptionCancel.recorded(order, record: SubscriptionCancel.Record(orderId: subscription.orderId, target: subscription.chargeTarget)))
    }

    /// The outcome of a `cancel` of a provider that has no cancel call
    /// (`cancelsWithoutProviderCall`): the ledger's own to apply, as a `schedule` order is, in
    /// the intake transaction, with `cancelSubscription` after it.
    func cancelWithoutProviderCall(_ order: Order, _ cancel: SubscriptionCancel, now: Int64) -> Outcome {
        let result: [String: JSONValue] = ["subscription": .string(cancel.subscription), "at": .string(cancel.at.rawValue), "providerCall": "none"]
        return Outcome(order: order, status: .succeeded, result: result, attempts: 0, at: Timestamp.iso8601(milliseconds: now))
    }

    /// A `cancel` order's `succeeded` outcome: its subscription is cancelled here. Call inside
    /// the transaction that recorded the outcome.
    func cancelSubscription(after outcome: Outcome, counters: inout Counters, now: Int64) throws -> [Effect] {
        guard outcome.status == .succeeded, outcome.operation == SubscriptionCancel.operationName else { return [] }
        let key = OrderKey(merchant: outcome.merchant, orderId: outcome.orderId)
        guard let stored = try store.lookup(key), case .order(let order) = Order.decode(json: stored.orderJSON, catalog: registry.catalog),
            let cancel = try? SubscriptionCancel(order: order, fromUpstream: false)
        else { return [] }
        let periodEnd = outcome.result?[SubscriptionCancel.periodEndsAtResult]?.integerValue
        return try cancelSubscription(
            merchant: order.merchant, provider: order.provider, reference: cancel.subscription, at: cancel.at, providerPeriodEnd: periodEnd,
            reason: "cancel order \(order.orderId)", counters: &counters, now: now)
    }

    /// The ledger's whole part of cancelling a subscription, for any caller that decided it
    /// (a `cancel` order's success; a retry policy's exhaustion action): its schedule, if any,
    /// charges nothing more (a cycle in flight finishes as it began), its record says
    /// `cancelled` with `paidThrough`, and one `subscription.cancelled` event carries it.
    /// `providerPeriodEnd`: where the paid period ends as the provider counts it, for a
    /// subscription paypipe does not schedule. Call inside a store transaction.
    func cancelSubscription(
        merchant: String, provider: Provider, reference: String, at: SubscriptionCancel.When, providerPeriodEnd: Int64?, reason: String,
        counters: inout Counters, now: Int64
    ) throws -> [Effect] {
        var periodEnd = providerPeriodEnd
        if var plan = try store.schedule(merchant: merchant, provider: provider, reference: reference) {
            // The cycle under way (or next due) is the first one not paid for yet.
            periodEnd = plan.schedule.dueAt(cycle: plan.cycle) - scheduleClockOffset
            if plan.state != .completed && plan.state != .ended && plan.state != .cancelled {
                plan.leaveReview(to: .cancelled)
                if plan.orderId == nil { plan.dueAt = nil }
                try store.save(plan, now: now)
            }
        }
        let paidThrough = at == .now ? now : max(now, periodEnd ?? now)
        try store.recordPaidThrough(paidThrough, merchant: merchant, provider: provider, reference: reference)
        let cancelled = SubscriptionEvent(
            merchant: merchant, provider: provider, subscription: reference, dedupeKey: "cancelled", kind: .subscriptionCancelled,
            reason: reason, paidThrough: paidThrough)
        return try record(cancelled, counters: &counters, now: now) ?? []
    }
}

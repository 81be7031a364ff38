import PaypipeCore
import StageWire

/// Payments a provider takes by itself and reports only by callback (docs/protocol.md,
/// "Reconciliation"): the ledger watches when each falls due; a report that came moves the watch
/// to the next payment, and one that did not is asked for by a query order the pipeline makes
/// for itself, whose answer is recorded under the callback's own dedupe keys.
extension LedgerCore {
    /// The providers whose subscriptions' entitlement the pollers check.
    var checkedProviders: [Provider] {
        registry.connectors.filter { $0.entitlementChecking != nil }.map(\.provider)
    }

    /// Starts watching the payments of a subscription just opened. Call inside the transaction
    /// that opened it.
    func watchPayments(of order: Order, opening: SubscriptionOpening, now: Int64) throws {
        guard let reconciling = registry.connector(for: order.provider)?.reconciling,
            let (plan, first) = reconciling.plan(for: order, opening: opening, openedAt: scheduleTime(now))
        else { return }
        let watch = ReconciliationWatch(plan: plan, payment: first)
        try store.setPaymentWatch(
            watch, at: lookAt(watch, reconciling), merchant: order.merchant, provider: order.provider, reference: opening.reference,
            onlyIfUnwatched: true)
    }

    /// When the watch's payment is asked for if no report came (the schedules' clock); nil when
    /// the series has no such payment.
    func lookAt(_ watch: ReconciliationWatch, _ reconciling: any PaymentReconciling) -> Int64? {
        reconciling.dueAt(payment: watch.payment, plan: watch.plan).map { $0 + reconciling.window }
    }

    /// A payment's report recorded (from its callback or from a query's answer): the watch moves
    /// past it. Call inside the transaction that recorded it.
    func notePaymentReported(_ event: SubscriptionEvent) throws {
        guard let cycle = event.cycle, [.renewalSucceeded, .renewalSettled, .renewalFailed].contains(event.kind),
            let reconciling = registry.connector(for: event.provider)?.reconciling,
            let (found, _) = try store.paymentWatch(merchant: event.merchant, provider: event.provider, reference: event.subscription),
            cycle >= found.payment
        else { return }
        let watch = ReconciliationWatch(plan: found.plan, payment: cycle + 1)
        try store.setPaymentWatch(
            watch, at: lookAt(watch, reconciling), merchant: event.merchant, provider: event.provider, reference: event.subscription)
    }

    /// A series whose last payment the provider moved (a raised or lowered
    /// `subscriptionfinalnumber`): its watch follows, so a payment past the old end is still
    /// asked for if no report comes, also when the watch had stopped at the old end. Call inside
    /// the transaction that recorded the change.
    func moveWatchedSeriesEnd(to finalPayment: Int64?, merchant: String, provider: Provider, reference: String) throws {
        guard let reconciling = registry.connector(for: provider)?.reconciling,
            let (found, state) = try store.paymentWatch(merchant: merchant, provider: provider, reference: reference),
            !state.isFinal || state == .ended
        else { return }
        var watch = found
        watch.plan = reconciling.plan(found.plan, endingAt: finalPayment)
        try store.setPaymentWatch(watch, at: lookAt(watch, reconciling), merchant: merchant, provider: provider, reference: reference)
    }

    /// Due watches (in `redeliver`'s transaction): each unreported payment is asked for by a
    /// query order, admitted and dispatched with the watch's move, until `maxAsks` asks found
    /// nothing; then it is handed to a person (`schedule.review`) and the watch moves on.
    func reconcileDuePayments(counters: inout Counters, now: Int64, limit: Int) throws -> [Effect] {
        var effects: [Effect] = []
        let clock = scheduleTime(now)
        for connector in registry.connectors {
            guard let reconciling = connector.reconciling else { continue }
            let provider = connector.provider
            for due in try store.duePaymentWatches(provider: provider, now: clock, limit: limit) {
                var watch = due.watch
                if due.state.isFinal {
                    try store.setPaymentWatch(nil, at: nil, merchant: due.merchant, provider: provider, reference: due.reference)
                    continue
                }
                if watch.asks >= reconciling.maxAsks {
                    let review = SubscriptionEvent(
                        merchant: due.merchant, provider: provider, subscription: due.reference, dedupeKey: "unreported|\(watch.payment)",
                        kind: .scheduleReview, cycle: watch.payment,
                        reason:
                            "NOT_REPORTED: no callback reported payment \(watch.payment), and \(watch.asks) queries of \(provider.rawValue) did not find it"
                    )
                    effects += try record(review, counters: &counters, now: now) ?? []
                    watch = ReconciliationWatch(plan: watch.plan, payment: watch.payment + 1)
                    try store.setPaymentWatch(
                        watch, at: lookAt(watch, reconciling), merchant: due.merchant, provider: provider, reference: due.reference)
                    continue
                }
                let order = reconciling.query(
                    orderId: watch.orderId(merchant: due.merchant, provider: provider, subscription: due.reference), merchant: due.merchant,
                    subscription: due.reference, payment: watch.payment, plan: watch.plan)
                watch.asks += 1
                try store.setPaymentWatch(
                    watch, at: clock + reconciling.retryInterval, merchant: due.merchant, provider: provider, reference: due.reference)
                let json = order.serialized
                if case .new = try store.admit(order, json: json, references: connector.callbackReferences(for: order), now: now) {
                    let ticket = store.tickets.ticket(for: order.key, generation: 1)
                    effects.append(.dispatch(DispatchFrame.encode(orderJSON: json, acceptedAt: now, token: ticket.token)))
                }
            }
        }
        return effects
    }

    /// A query order's outcome: the payments its answer holds, recorded as their callbacks would
    /// have been (a payment already reported is a duplicate). Call inside the transaction that
    /// recorded the outcome.
    func reconcile(after outcome: Outcome, counters: inout Counters, now: Int64) throws -> [Effect] {
        let provider = Provider(outcome.provider)
        guard ReconciliationWatch.ask(ofOrderId: outcome.orderId) != nil, outcome.status == .succeeded,
            let reconciling = registry.connector(for: provider)?.reconciling,
            let stored = try store.lookup(OrderKey(merchant: outcome.merchant, orderId: outcome.orderId)),
            case .order(let order) = Order.decode(json: stored.orderJSON, catalog: registry.catalog)
        else { return [] }
        var effects: [Effect] = []
        for event in reconciling.events(of: order, outcome: outcome) {
            effects += try record(event, counters: &counters, now: now) ?? []
        }
        return effects
    }
}

import PaypipeCore
import StageWire

/// Subscriptions after their first order (docs/protocol.md, "Subscription events"): the record a
/// first order's success opens, the events callbacks and entitlement checks report against it,
/// and the end dates the ledger itself watches.
extension LedgerCore {
    /// Opens the subscription a `succeeded` outcome's order started, if its connector says it
    /// did; a correction also reports itself as the subscription's first event. Call inside the
    /// transaction that recorded the outcome.
    func openSubscription(after outcome: Outcome, corrected: Bool, counters: inout Counters, now: Int64) throws -> [Effect] {
        let provider = Provider(outcome.provider)
        guard let connector = registry.connector(for: provider), connector.opensSubscription(Operation(provider, outcome.operation)) else {
            return []
        }
        let key = OrderKey(merchant: outcome.merchant, orderId: outcome.orderId)
        guard let stored = try store.lookup(key), case .order(let order) = Order.decode(json: stored.orderJSON, catalog: registry.catalog),
            let opening = connector.subscriptionOpening(for: order, outcome: outcome)
        else { return [] }
        let checkAt = opening.expiresAt.map { min($0, now + entitlementRecheckMilliseconds) } ?? now + entitlementRecheckMilliseconds
        let target = connector.scheduledCharging?.target(of: order, outcome: outcome)
        try store.openSubscription(opening, provider: provider, key: key, checkAt: checkAt, chargeTarget: target, now: now)
        try attachSchedule(order: order, opening: opening, target: target, now: now)
        try watchPayments(of: order, opening: opening, now: now)
        var effects: [Effect] = []
        if let following = connector.followingOrder(after: order, outcome: outcome) {
            effects = try admitFollowingOrder(following, subscription: opening.reference, now: now)
        }
        guard corrected else { return effects }
        let correction = SubscriptionEvent(
            merchant: key.merchant, provider: provider, subscription: opening.reference, dedupeKey: "correction|\(key.orderId)", kind: .correction,
            amount: order.amount, currency: order.currency, reason: "the first order's outcome was corrected: the provider took the money")
        return effects + (try record(correction, counters: &counters, now: now) ?? [])
    }

    /// Records each event once, all or none: an event for a subscription the store does not
    /// know (its first order's outcome not recorded yet) records nothing, and the provider
    /// delivers the callback again.
    mutating func recordSubscriptionEvents(_ events: [SubscriptionEvent], now: Int64) throws -> (LedgerReply, [Effect]) {
        var counters = self.counters
        var unknown: String?
        let effects = try store.transaction { () throws -> [Effect] in
            var effects: [Effect] = []
            // One event (every provider's callback so far) needs no look first: recording an
            // event of an unknown subscription records nothing.
            for event in events where try events.count > 1 && !store.subscriptionExists(event) {
                unknown = event.subscription
                return []
            }
            for event in events {
                let recorded = try record(event, counters: &counters, now: now)
                guard let recorded else {
                    unknown = event.subscription
                    return []
                }
                effects += recorded
            }
            return effects
        }
        if let unknown { return (.unknownSubscription(unknown), []) }
        let duplicates = counters.subscriptionEventDuplicates - self.counters.subscriptionEventDuplicates
        self.counters = counters
        return (.eventsRecorded(recorded: events.count - duplicates, duplicates: duplicates), effects)
    }

    /// One event, and the end of the series when it was the last renewal.
    /// nil when the store knows no such subscription.
    func record(_ event: SubscriptionEvent, counters: inout Counters, now: Int64) throws -> [Effect]? {
        switch try store.recordSubscriptionEvent(event, publish: eventMerchants.contains(event.merchant), now: now) {
        case .unknownSubscription: return nil
        case .duplicate:
            counters.subscriptionEventDuplicates += 1
            return []
        case .recorded(let logged, let reachedFinalCycle):
            counters.subscriptionEvents[event.kind.rawValue, default: 0] += 1
            try notePaymentReported(event)
            var effects = logged.map { [Effect.emit(Array($0.utf8))] } ?? []
            if reachedFinalCycle {
                let ended = SubscriptionEvent(
                    merchant: event.merchant, provider: event.provider, subscription: event.subscription,
                    dedupeKey: "ended|final-cycle|\(event.cycle.map(String.init) ?? "")",
                    kind: .subscriptionEnded, cycle: event.cycle, reason: "the last payment of the series was taken")
                effects += try record(ended, counters: &counters, now: now) ?? []
            }
            if event.kind.state == .active { effects += try resumeHeldSchedule(of: event, counters: &counters, now: now) }
            return effects
        }
    }

    /// Entitlement checks from a poller: each reading is taken only under the ticket of its
    /// check's latest hand-out, and the event it makes is derived here, from the subscription
    /// as the store holds it, so a poller can report no event of its own making. Its next check
    /// is due at the entitlement's expiry, or one recheck interval on, whichever is sooner.
    mutating func recordChecks(_ results: [EntitlementCheckResult], now: Int64) throws -> (LedgerReply, [Effect]) {
        var counters = self.counters
        let interval = entitlementRecheckMilliseconds
        var reported = 0
        let effects = try store.transaction { () throws -> [Effect] in
            var effects: [Effect] = []
            reported = 0
            for result in results {
                guard
                    let handedOut = try store.handedOutCheck(
                        merchant: result.merchant, provider: result.provider, reference: result.reference, ticket: result.ticket)
                else {
                    counters.resultsRefused += 1
                    continue
                }
                // A check that got no answer is due again soon (`dueChecks` set it).
                guard let reading = result.reading else { continue }
                if let event = reading.event(
                    merchant: result.merchant, provider: result.provider, subscription: result.reference, state: handedOut.state,
                    stateSince: handedOut.since, knownExpiry: handedOut.expiresAt)
                {
                    reported += 1
                    effects += try record(event, counters: &counters, now: now) ?? []
                }
                let next = reading.expiresAt.map { $0 > now ? min($0, now + interval) : now + interval } ?? now + interval
                try store.scheduleCheck(merchant: result.merchant, provider: result.provider, reference: result.reference, at: next)
            }
            return effects
        }
        let duplicates = counters.subscriptionEventDuplicates - self.counters.subscriptionEventDuplicates
        self.counters = counters
        return (.eventsRecorded(recorded: reported - duplicates, duplicates: duplicates), effects)
    }

    /// Subscriptions whose end date has passed end, reported as an event (Nets subscriptions,
    /// which Nets itself reports nothing about). Call inside `redeliver`'s transaction.
    func endSubscriptions(counters: inout Counters, now: Int64, limit: Int) throws -> [Effect] {
        var effects: [Effect] = []
        for due in try store.subscriptionsPastEnd(now: now, limit: limit) {
            let ended = SubscriptionEvent(
                merchant: due.merchant, provider: due.provider, subscription: due.reference, dedupeKey: "ended|end-date", kind: .subscriptionEnded,
                reason: "the subscription's end date passed")
            effects += try record(ended, counters: &counters, now: now) ?? []
        }
        return effects
    }

    /// A succeeded order that moves where a subscription's series ends (its connector's
    /// `subscriptionChange`): the record's final cycle changes, and a series made longer is
    /// reported (`subscription.extended`), active again if it had ended on its old last payment.
    /// Call inside the transaction that recorded the outcome.
    func changeSubscription(after outcome: Outcome, counters: inout Counters, now: Int64) throws -> [Effect] {
        let provider = Provider(outcome.provider)
        guard outcome.status == .succeeded, let connector = registry.connector(for: provider),
            connector.changesSubscription(Operation(provider, outcome.operation))
        else { return [] }
        let key = OrderKey(merchant: outcome.merchant, orderId: outcome.orderId)
        guard let stored = try store.lookup(key), case .order(let order) = Order.decode(json: stored.orderJSON, catalog: registry.catalog),
            let change = connector.subscriptionChange(after: order, outcome: outcome),
            let before = try store.changeFinalCycle(change.finalCycle, merchant: key.merchant, provider: provider, reference: change.reference)
        else { return [] }
        try moveWatchedSeriesEnd(to: change.finalCycle, merchant: key.merchant, provider: provider, reference: change.reference)
        let longer = before.previous.map { previous in change.finalCycle.map { $0 > previous } ?? true } ?? false
        guard longer else { return [] }
        let extended = SubscriptionEvent(
            merchant: key.merchant, provider: provider, subscription: change.reference, dedupeKey: "extended|\(key.orderId)",
            kind: .subscriptionExtended, cycle: change.finalCycle,
            reason: change.finalCycle.map { "order \(key.orderId) moved the last payment to number \($0)" }
                ?? "order \(key.orderId) took the series' end away")
        return try record(extended, counters: &counters, now: now) ?? []
    }
}

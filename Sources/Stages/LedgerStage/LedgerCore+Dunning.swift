import PaypipeCore
import StageWire

/// What a schedule does when a step of its attempt fails (docs/protocol.md, "Declines"): the
/// provider's table says whether the failure is the customer's and whether trying again can
/// help (`DeclineClass`); the merchant's dunning says how often it is tried and what is done
/// once cycles go unpaid in a row. What the schedule knows of its past cycles is its events,
/// recorded in the same store under ids derived from the cycle and attempt, so the count is
/// the same whichever ledger moves the schedule and however often it restarts.
extension LedgerCore {
    /// The merchant's dunning; the defaults for a merchant that sets none.
    func dunningPolicy(of merchant: String) -> PaypipeConfig.Dunning { dunning[merchant] ?? PaypipeConfig.Dunning() }

    /// Moves the schedule on after its step's `failed` or `rejected` outcome. Call inside the
    /// transaction that recorded it, with the order no longer in flight.
    func stepFailed(
        _ plan: inout ScheduleRecord, outcome: Outcome, charging: any ScheduledCharging, running: Bool, counters: inout Counters, now: Int64
    ) throws -> [Effect] {
        let code = outcome.error?.code ?? "DECLINED"
        let policy = dunningPolicy(of: plan.merchant)
        switch DeclineClass.of(outcome, connector: registry.connector(for: plan.provider)) {
        case .notADecline:
            // Retrying cannot help and the customer refused nothing: no retry is used and the
            // subscription is not past due. The order's id is spent, so the cycle starts again
            // as a new attempt once a `schedule` order resumes or sets the schedule.
            let message = outcome.error.map { ": \($0.message.prefix(200))" } ?? ""
            let operation = outcome.operation
            plan.begin(cycle: plan.cycle, attempt: plan.attempt + 1)
            return try sendToReview(
                &plan,
                because:
                    "\(code): the \(operation) order of cycle \(plan.cycle) was \(outcome.status.rawValue), which is not the customer's decline\(message); fix the cause, then resume the schedule",
                catchUpThrough: nil, counters: &counters, now: now)
        case .hard:
            return try giveUp(&plan, because: "\(code): a hard decline, not retried", charging: charging, counters: &counters, now: now)
        case .soft:
            let retries = policy.retryAfterDays.map { $0.map { $0 * 86_400_000 } } ?? retryAfterMilliseconds
            let used = try retriesUsed(plan)
            guard used < retries.count else {
                return try giveUp(
                    &plan, because: "\(code) on all \(used + 1) declined attempts", charging: charging, counters: &counters, now: now)
            }
            let dueAt = scheduleTime(now) + retries[used]
            var retrying = plan.event(.renewalRetrying, dedupeKey: "retrying|\(plan.cycle)|\(plan.attempt)", cycle: plan.cycle, reason: code)
            retrying.dueAt = dueAt
            plan.begin(cycle: plan.cycle, attempt: plan.attempt + 1)
            plan.dueAt = running ? dueAt : nil
            try store.save(plan, now: now)
            return try record(retrying, counters: &counters, now: now) ?? []
        }
    }

    /// How many retries the cycle under way has used: its earlier attempts that were declined
    /// and retried (an attempt that went to review used none).
    private func retriesUsed(_ plan: ScheduleRecord) throws -> Int {
        guard plan.attempt > 1 else { return 0 }
        let ids = (1..<plan.attempt).map {
            plan.event(.renewalRetrying, dedupeKey: "retrying|\(plan.cycle)|\($0)", cycle: plan.cycle, reason: "").eventId
        }
        return try store.recordedEvents(ids).count
    }

    /// How many cycles right before the one under way were given up, counting back at most `limit`.
    private func unpaidCyclesBefore(_ plan: ScheduleRecord, limit: Int64) throws -> Int64 {
        let earlier = stride(from: plan.cycle - 1, through: max(1, plan.cycle - limit), by: -1).map { cycle in
            (cycle, plan.event(.renewalAbandoned, dedupeKey: "abandoned|\(cycle)", cycle: cycle, reason: "").eventId)
        }
        let recorded = try store.recordedEvents(earlier.map(\.1))
        return Int64(earlier.prefix { recorded.contains($0.1) }.count)
    }

    /// The cycle is given up (`renewal.abandoned`); once the merchant's `afterUnpaidCycles`
    /// cycles in a row were, its `onExhausted` action follows.
    private func giveUp(
        _ plan: inout ScheduleRecord, because reason: String, charging: any ScheduledCharging, counters: inout Counters, now: Int64
    ) throws -> [Effect] {
        let policy = dunningPolicy(of: plan.merchant)
        let unpaid = try unpaidCyclesBefore(plan, limit: policy.afterUnpaidCycles - 1) + 1
        let exhausted = unpaid >= policy.afterUnpaidCycles
        let action = policy.onExhausted.rawValue
        let standing =
            exhausted
            ? "\(unpaid) unpaid cycle\(unpaid == 1 ? "" : "s") in a row: dunning onExhausted \(action)"
            : "\(unpaid) of \(policy.afterUnpaidCycles) unpaid cycles in a row before dunning onExhausted \(action)"
        let abandoned = plan.event(.renewalAbandoned, dedupeKey: "abandoned|\(plan.cycle)", cycle: plan.cycle, reason: "\(reason); \(standing)")
        var effects = try record(abandoned, counters: &counters, now: now) ?? []
        guard exhausted, policy.onExhausted != .pastDue else {
            return effects + (try nextCycle(&plan, charging: charging, counters: &counters, now: now))
        }
        let cycle = plan.cycle
        plan.begin(cycle: cycle + 1, attempt: 1)
        plan.dueAt = nil
        let why = "dunning: \(unpaid) unpaid cycle\(unpaid == 1 ? "" : "s") in a row, the last given up for \(reason)"
        switch policy.onExhausted {
        case .pause:
            // A `schedule` order resumes it from the next cycle due.
            plan.leaveReview(to: .paused)
            try store.save(plan, now: now)
            let paused = plan.event(.subscriptionPaused, dedupeKey: "dunning|paused|\(cycle)", cycle: cycle, reason: why)
            effects += try record(paused, counters: &counters, now: now) ?? []
        case .cancel:
            // The ledger's one way of cancelling (schedule, record, event); only paypipe's own
            // charging stops: a provider that holds a mandate is not told here.
            try store.save(plan, now: now)
            effects += try cancelSubscription(
                merchant: plan.merchant, provider: plan.provider, reference: plan.reference, at: .now, providerPeriodEnd: nil, reason: why,
                counters: &counters, now: now)
        case .pastDue: break
        }
        return effects
    }

    /// A `resume` the merchant sent for a schedule its dunning paused (`onExhausted: pause`):
    /// the subscription dunning made `paused` is active again (`subscription.resumed`), or its
    /// schedule, charging again, would stay held as if the mandate were paused. Call inside the
    /// intake transaction, after the change.
    func liftDunningPause(_ change: ScheduleChange, of order: Order, counters: inout Counters, now: Int64) throws -> [Effect] {
        guard change.action == .resume,
            let plan = try store.schedule(merchant: order.merchant, provider: order.provider, reference: change.subscription),
            plan.state == .active, plan.dueAt != nil || plan.orderId != nil,
            try store.subscriptionState(merchant: order.merchant, provider: order.provider, reference: change.subscription) == .paused
        else { return [] }
        let resumed = plan.event(
            .subscriptionResumed, dedupeKey: "resumed|\(order.orderId)", cycle: plan.cycle,
            reason: "schedule order \(order.orderId) resumed what dunning paused")
        return try record(resumed, counters: &counters, now: now) ?? []
    }
}

import PaypipeCore
import StageWire

/// Subscriptions paypipe charges on schedule (docs/protocol.md, "Schedules"): each due step of
/// an attempt at a cycle becomes an order the pipeline makes for itself, in the transaction that
/// moves the schedule on, so a cycle is decided once under the store's locks however many
/// ledgers tick and however often they restart. Its order id, and every provider idempotency
/// reference derived from it, come from the subscription, the cycle and the attempt.
extension LedgerCore {
    /// The schedules' clock: the ledger's, plus the offset a test or demo set.
    func scheduleTime(_ now: Int64) -> Int64 { now + scheduleClockOffset }

    /// A first order whose schedule would start in the past (`ChargeSchedule.lateStart`),
    /// rejected. Checked here, not where the schedule is read (`FrameDecoder.scheduling`, the
    /// connectors): only the ledger keeps the schedules' clock, which tests and demos move
    /// (`scheduleClockOffset`), and it is that clock the schedule will be charged by.
    func lateStartRejected(_ item: FrameDecoder.IntakeItem, now: Int64) -> FrameDecoder.IntakeItem {
        guard case .order(let order, _, _) = item, let json = order.params["schedule"],
            let schedule = try? ChargeSchedule(json: json, field: "schedule", defaultAmount: order.amount, defaultCurrency: order.currency),
            let rejection = schedule.lateStart(cycle: 1, now: scheduleTime(now), field: "schedule")
        else { return item }
        return .rejected(rejection, identity: order.identity)
    }

    /// Attaches the schedule the first order carried (`params.schedule`), once its subscription
    /// opened. A second opening of the same subscription changes nothing. Call inside the
    /// transaction that opened it.
    func attachSchedule(order: Order, opening: SubscriptionOpening, target: JSONValue?, now: Int64) throws {
        guard let json = order.params["schedule"], let charging = registry.connector(for: order.provider)?.scheduledCharging,
            let schedule = try? ChargeSchedule(json: json, field: "schedule", defaultAmount: order.amount, defaultCurrency: order.currency),
            let target, try store.schedule(merchant: order.merchant, provider: order.provider, reference: opening.reference) == nil
        else { return }
        try store.save(
            newPlan(of: order, reference: opening.reference, schedule: schedule, target: target, charging: charging), now: now)
    }

    /// A new schedule of the subscription `reference` of `order`'s merchant and provider: its
    /// first cycle's first step due on time.
    func newPlan(
        of order: Order, reference: String, schedule: ChargeSchedule, target: JSONValue, charging: any ScheduledCharging
    ) -> ScheduleRecord {
        var plan = ScheduleRecord(
            merchant: order.merchant, provider: order.provider, reference: reference, schedule: schedule, target: target,
            state: .active, cycle: 1, attempt: 1, step: 0, dueAt: nil, orderId: nil, carried: nil)
        plan.dueAt = firstStepDue(plan, charging: charging)
        return plan
    }

    /// When the first step of the record's current attempt at its cycle is due.
    func firstStepDue(_ plan: ScheduleRecord, charging: any ScheduledCharging) -> Int64 {
        plan.schedule.dueAt(cycle: plan.cycle) - (charging.steps.first?.leadMilliseconds ?? 0)
    }

    /// A `schedule` order (`ScheduleChange`): applied, and answered with the schedule as it now
    /// stands, or rejected naming the rule. Applying one twice leaves what applying it once did,
    /// so two ledgers taking in the same new order at once do no harm; the second gets the first's outcome.
    func applyScheduleChange(_ change: ScheduleChange, of order: Order, now: Int64) throws -> Outcome {
        let at = Timestamp.iso8601(milliseconds: now)
        func rejected(_ rejection: Rejection) -> Outcome { Outcome.rejected(rejection, identity: order.identity, at: at) }
        guard let charging = registry.connector(for: order.provider)?.scheduledCharging else {
            return rejected(Rejection(.unknownOperation, field: "operation", "\(order.provider.rawValue) subscriptions are not charged on schedule"))
        }
        let existing = try store.schedule(merchant: order.merchant, provider: order.provider, reference: change.subscription)
        let scheduleNow = scheduleTime(now)
        var plan: ScheduleRecord
        switch (change.action, existing) {
        case (.set, .none):
            guard let schedule = change.schedule,
                let target = try store.chargeTarget(merchant: order.merchant, provider: order.provider, reference: change.subscription)
            else {
                return rejected(
                    Rejection(
                        .subscriptionNotFound, field: "params.subscription",
                        "no \(order.provider.rawValue) subscription \(change.subscription.prefix(64)) of merchant \(order.merchant.prefix(64)) whose first order succeeded is known"
                    ))
            }
            if let late = schedule.lateStart(cycle: 1, now: scheduleNow, field: "schedule") { return rejected(late) }
            plan = newPlan(of: order, reference: change.subscription, schedule: schedule, target: target, charging: charging)
        case (_, .none):
            return rejected(
                Rejection(.subscriptionNotFound, field: "params.subscription", "subscription \(change.subscription.prefix(64)) has no schedule"))
        case (let action, .some(let found)):
            plan = found
            if plan.state == .completed || plan.state == .ended || (plan.state == .cancelled && action != .cancel) {
                return rejected(
                    Rejection(.scheduleState, field: "params.action", "the schedule is \(plan.state.rawValue): it cannot be changed any more"))
            }
            // No order of it in flight: its next step waits for its time (or for `resume`).
            let waiting = plan.orderId == nil
            switch action {
            case .set:
                // From the next cycle not yet started; one in flight finishes as it began. Out of
                // review, the cycle it stopped at starts again under the new schedule.
                let schedule = change.schedule ?? plan.schedule
                let restarts = waiting && plan.step == 0 && (plan.attempt == 1 || plan.state == .review)
                // A paused schedule resumes from the present whatever its dates say.
                if plan.state != .paused,
                    let late = schedule.lateStart(cycle: restarts ? plan.cycle : plan.cycle + 1, now: scheduleNow, field: "schedule")
                {
                    return rejected(late)
                }
                plan.schedule = schedule
                if plan.state == .review { plan.leaveReview(to: .active) }
                if restarts && plan.state == .active { plan.dueAt = firstStepDue(plan, charging: charging) }
            case .pause:
                if waiting { plan.dueAt = nil }
                plan.leaveReview(to: .paused)
            case .resume:
                guard plan.state == .paused || plan.state == .review else { break }
                plan.leaveReview(to: .active)
                if waiting { resumeCycle(&plan, charging: charging, scheduleNow: scheduleNow) }
            case .cancel:
                plan.leaveReview(to: .cancelled)
                if waiting { plan.dueAt = nil }
            }
        }
        try store.save(plan, now: now)
        var result = plan.json
        if case .object(var o) = result {
            o.removeValue(forKey: "merchant")
            result = .object(o)
        }
        return Outcome(order: order, status: .succeeded, result: ["schedule": result], attempts: 0, at: at)
    }

    /// A resumed schedule charges from the first cycle due within the last day or later: the
    /// cycles that fell due while it was paused are not charged. An attempt the pause interrupted
    /// between its steps starts again as a new attempt (its notification may have lapsed).
    func resumeCycle(_ plan: inout ScheduleRecord, charging: any ScheduledCharging, scheduleNow: Int64) {
        plan.begin(cycle: plan.cycle, attempt: plan.step > 0 ? plan.attempt + 1 : plan.attempt)
        while plan.schedule.dueAt(cycle: plan.cycle) < scheduleNow - 86_400_000 && plan.schedule.includes(cycle: plan.cycle) {
            plan.begin(cycle: plan.cycle + 1, attempt: 1)
        }
        plan.dueAt = firstStepDue(plan, charging: charging)
    }

    /// A subscription the provider reports active again (PhonePe's unpause): a schedule its
    /// paused mandate held (`chargeDueSchedules`) carries on as a resumed one does, from the first
    /// cycle due within the last day; the cycles that fell due while it was paused are not charged
    /// and are reported as `renewal.skipped`. Call inside the transaction that recorded the event.
    func resumeHeldSchedule(of event: SubscriptionEvent, counters: inout Counters, now: Int64) throws -> [Effect] {
        guard var plan = try store.schedule(merchant: event.merchant, provider: event.provider, reference: event.subscription),
            plan.isHeld, let charging = registry.connector(for: plan.provider)?.scheduledCharging,
            try store.subscriptionState(merchant: event.merchant, provider: event.provider, reference: event.subscription) == .active
        else { return [] }
        let first = plan.cycle
        resumeCycle(&plan, charging: charging, scheduleNow: scheduleTime(now))
        try store.save(plan, now: now)
        guard plan.cycle > first else { return [] }
        var skipped = plan.event(
            .renewalSkipped, dedupeKey: "skipped|\(first)|\(plan.cycle - 1)", cycle: first, reason: "the mandate was paused when they fell due")
        skipped.lastCycle = plan.cycle - 1
        return try record(skipped, counters: &counters, now: now) ?? []
    }

    /// Turns due steps into orders (in `redeliver`'s transaction): each schedule is moved on and
    /// its order admitted together, so a crash leaves both or neither.
    func chargeDueSchedules(counters: inout Counters, now: Int64, limit: Int) throws -> [Effect] {
        var effects: [Effect] = []
        let scheduleNow = scheduleTime(now)
        for (found, subscriptionState) in try store.dueSchedules(now: scheduleNow, limit: limit) {
            var plan = found
            guard let connector = registry.connector(for: plan.provider), let charging = connector.scheduledCharging,
                plan.step < charging.steps.count
            else { continue }
            if subscriptionState?.isFinal ?? true {
                plan.leaveReview(to: .ended)
                plan.dueAt = nil
                try store.save(plan, now: now)
                continue
            }
            if subscriptionState == .paused {
                // The customer paused the mandate: nothing is notified or debited until the
                // provider says it is resumed (`resumeHeldSchedule`).
                plan.dueAt = nil
                try store.save(plan, now: now)
                continue
            }
            if !plan.schedule.includes(cycle: plan.cycle) {
                effects += try complete(&plan, counters: &counters, now: now)
                continue
            }
            if plan.step == 0 { effects += try limitCatchUp(&plan, counters: &counters, scheduleNow: scheduleNow, now: now) }
            let step = charging.steps[plan.step]
            let attempt = plan.attemptIdentity
            let order = Order(
                orderId: attempt.orderId(step: plan.step), merchant: plan.merchant, operation: step.operation,
                amount: plan.schedule.amount, currency: plan.schedule.currency,
                params: charging.params(step: plan.step, target: plan.target, attempt: attempt, carried: plan.carried))
            plan.orderId = order.orderId
            plan.dueAt = nil
            try store.save(plan, now: now)
            let json = order.serialized
            switch try store.admit(order, json: json, references: connector.callbackReferences(for: order), now: now) {
            case .new:
                counters.scheduledOrders += 1
                let ticket = store.tickets.ticket(for: order.key, generation: 1)
                effects.append(.dispatch(DispatchFrame.encode(orderJSON: json, acceptedAt: now, token: ticket.token)))
            case .duplicate(let stored):
                // Made before (the schedule was set back by hand): its outcome moves the schedule on.
                if let outcome = try? Outcome.parse(Array(stored.utf8)) {
                    effects += try advanceSchedule(after: outcome, counters: &counters, now: now)
                }
            case .duplicateInFlight: break
            case .referenceInUse(let reference):
                // Another order holds the reference this step derives, so the step cannot be
                // made: a new attempt derives new references, once an operator has looked.
                plan.orderId = nil
                plan.begin(cycle: plan.cycle, attempt: plan.attempt + 1)
                effects += try sendToReview(
                    &plan,
                    because:
                        "REFERENCE_IN_USE: the \(plan.provider.rawValue) reference \(reference.prefix(64)) of order \(order.orderId) is another order's",
                    catchUpThrough: nil, counters: &counters, now: now)
            }
        }
        return effects
    }

    /// Before a cycle is started: when more cycles are already due than the catch-up limit lets
    /// be charged back to back, the older ones are skipped (`renewal.skipped`) and the schedule
    /// goes to review, charging the most recent ones meanwhile, so that it is up to date when it
    /// stops. Counted afresh at every start, so a backlog however made (a start in the past, a
    /// change of interval, an outage, retries that outlast cycles) is bounded the same way.
    private func limitCatchUp(_ plan: inout ScheduleRecord, counters: inout Counters, scheduleNow: Int64, now: Int64) throws -> [Effect] {
        var lastDue = plan.schedule.lastCycle(dueBy: scheduleNow)
        if plan.state == .review { lastDue = min(lastDue, plan.catchUpThrough ?? 0) }
        guard lastDue - plan.cycle + 1 > maxCatchUpCycles else { return [] }
        let first = plan.cycle
        let last = lastDue - maxCatchUpCycles
        var skipped = plan.event(
            .renewalSkipped, dedupeKey: "skipped|\(first)|\(last)", cycle: first,
            reason: "more than schedules.maxCatchUpCycles (\(maxCatchUpCycles)) cycles were due at once")
        skipped.lastCycle = last
        var effects = try record(skipped, counters: &counters, now: now) ?? []
        plan.begin(cycle: last + 1, attempt: 1)
        effects += try sendToReview(
            &plan,
            because:
                "cycles \(first) to \(last) were not charged: \(lastDue - first + 1) cycles were due at once, more than schedules.maxCatchUpCycles (\(maxCatchUpCycles)); cycles \(last + 1) to \(lastDue) are charged",
            catchUpThrough: lastDue, counters: &counters, now: now)
        return effects
    }

    /// Stops the schedule for an operator (`schedule.review`): nothing more is charged but the
    /// cycles through `catchUpThrough`, until a `schedule` order resumes, sets or cancels it.
    func sendToReview(
        _ plan: inout ScheduleRecord, because reason: String, catchUpThrough: Int64?, counters: inout Counters, now: Int64
    ) throws -> [Effect] {
        plan.state = .review
        plan.review = reason
        plan.catchUpThrough = catchUpThrough
        if !plan.charges { plan.dueAt = nil }
        try store.save(plan, now: now)
        let review = plan.event(
            .scheduleReview, dedupeKey: "review|\(plan.cycle)|\(plan.attempt)|\(catchUpThrough.map(String.init) ?? "held")", cycle: plan.cycle,
            reason: reason)
        return try record(review, counters: &counters, now: now) ?? []
    }

    /// Moves a schedule on after an outcome of the order it made: the next step, the next cycle,
    /// a retry after a decline, or giving the cycle up. Only a final word moves it: a pending or
    /// unknown order is still being resolved, and one in review holds its schedule until it is
    /// resolved. Call inside the transaction that recorded the outcome.
    func advanceSchedule(after outcome: Outcome, counters: inout Counters, now: Int64) throws -> [Effect] {
        guard outcome.orderId.hasPrefix(ScheduledAttempt.orderIdPrefix),
            outcome.status == .succeeded || outcome.status == .failed || outcome.status == .rejected,
            let step = ScheduledAttempt.step(ofOrderId: outcome.orderId),
            var plan = try store.schedule(merchant: outcome.merchant, digest: step.digest),
            let charging = registry.connector(for: plan.provider)?.scheduledCharging
        else { return [] }
        guard plan.orderId == outcome.orderId, step.cycle == plan.cycle, step.attempt == plan.attempt, step.step == plan.step else {
            // A late correction: an attempt the schedule gave up as declined took the money after
            // all. While its retry has not started, the cycle is paid and the retry is not made;
            // once started, the provider's events tell upstream of both.
            guard outcome.status == .succeeded, step.cycle == plan.cycle, step.attempt < plan.attempt, plan.orderId == nil,
                step.step == charging.steps.count - 1
            else { return [] }
            return try nextCycle(&plan, charging: charging, counters: &counters, now: now)
        }
        plan.orderId = nil
        let running = plan.charges
        if outcome.status == .succeeded {
            if plan.step + 1 < charging.steps.count {
                let (carried, notBefore) = charging.carry(from: outcome)
                plan.step += 1
                plan.carried = carried
                let cycleDue = plan.schedule.dueAt(cycle: plan.cycle) - charging.steps[plan.step].leadMilliseconds
                plan.dueAt = running ? max(cycleDue, notBefore ?? cycleDue) : nil
                try store.save(plan, now: now)
                return []
            }
            return try nextCycle(&plan, charging: charging, counters: &counters, now: now)
        }
        return try stepFailed(&plan, outcome: outcome, charging: charging, running: running, counters: &counters, now: now)
    }

    /// The cycle is done (charged or given up): the next one is due on its date, or the
    /// schedule is complete.
    func nextCycle(_ plan: inout ScheduleRecord, charging: any ScheduledCharging, counters: inout Counters, now: Int64) throws -> [Effect] {
        plan.begin(cycle: plan.cycle + 1, attempt: 1)
        guard plan.schedule.includes(cycle: plan.cycle) else { return try complete(&plan, counters: &counters, now: now) }
        plan.dueAt = plan.charges ? firstStepDue(plan, charging: charging) : nil
        try store.save(plan, now: now)
        return []
    }

    /// Every cycle was charged or given up: the schedule is complete, and so is the subscription.
    private func complete(_ plan: inout ScheduleRecord, counters: inout Counters, now: Int64) throws -> [Effect] {
        plan.leaveReview(to: .completed)
        plan.dueAt = nil
        try store.save(plan, now: now)
        let ended = plan.event(
            .subscriptionEnded, dedupeKey: "ended|schedule", cycle: plan.cycle - 1, reason: "the schedule's last cycle was charged")
        return try self.record(ended, counters: &counters, now: now) ?? []
    }
}

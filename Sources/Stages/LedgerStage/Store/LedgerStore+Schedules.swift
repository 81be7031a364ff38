import PaypipeCore
import StageWire

/// Where a subscription's charge schedule stands (schema steps 5 and 7, `schedules`).
package struct ScheduleRecord: Sendable, Equatable {
    package enum State: String, Sendable {
        case active, paused, cancelled
        /// Every cycle of the schedule was charged or given up.
        case completed
        /// The subscription itself ended (revoked, cancelled or ended at the provider).
        case ended
        /// Stopped for an operator's word (`review` says why) until a `schedule` order resumes,
        /// sets or cancels it: the ledger met what it will not decide alone.
        case review
    }

    package var merchant: String
    package var provider: Provider
    package var reference: String
    package var schedule: ChargeSchedule
    /// What the connector kept to charge the subscription (`ScheduledCharging.target`).
    package var target: JSONValue
    package var state: State
    /// The cycle being charged, or next due.
    package var cycle: Int64
    /// The attempt at `cycle` (1 for the first).
    package var attempt: Int64
    /// The attempt's step being taken, or next due (0-based).
    package var step: Int
    /// When the step is due (epoch ms, on the schedules' clock); nil while its order is in flight
    /// or the schedule is not active.
    package var dueAt: Int64?
    /// The order of the step under way; nil while the step waits for its time.
    package var orderId: String?
    /// What the attempt's earlier steps left for the next (`ScheduledCharging.carry`).
    package var carried: JSONValue?
    /// Why the schedule is in review; nil otherwise.
    package var review: String? = nil
    /// In review, the last cycle still charged: the overdue cycles within the catch-up limit,
    /// which were due before the review began. nil: none.
    package var catchUpThrough: Int64? = nil

    /// Whether the cycle under way is charged: always while active; in review, only the
    /// overdue cycles the catch-up limit let through.
    package var charges: Bool {
        switch state {
        case .active: true
        case .review: cycle <= catchUpThrough ?? 0
        case .paused, .cancelled, .completed, .ended: false
        }
    }

    /// Held by its subscription's paused mandate: a step that should be waiting for its time
    /// has none (`LedgerCore.chargeDueSchedules` took it away), which nothing else leaves.
    package var isHeld: Bool { charges && orderId == nil && dueAt == nil }

    /// Back to `state`, and out of review.
    package mutating func leaveReview(to state: State) {
        self.state = state
        review = nil
        catchUpThrough = nil
    }

    /// Starts `attempt` at `cycle` from its first step.
    package mutating func begin(cycle: Int64, attempt: Int64) {
        self.cycle = cycle
        self.attempt = attempt
        step = 0
        carried = nil
    }

    /// An event the schedule reports of its subscription; one about renewals carries a cycle's
    /// amount.
    package func event(_ kind: SubscriptionEvent.Kind, dedupeKey: String, cycle: Int64, reason: String) -> SubscriptionEvent {
        let renewal = kind.rawValue.hasPrefix("renewal.")
        return SubscriptionEvent(
            merchant: merchant, provider: provider, subscription: reference, dedupeKey: dedupeKey, kind: kind,
            amount: renewal ? schedule.amount : nil, currency: renewal ? schedule.currency : nil, cycle: cycle, reason: reason)
    }

    package var attemptIdentity: ScheduledAttempt {
        ScheduledAttempt(merchant: merchant, provider: provider, subscription: reference, cycle: cycle, attempt: attempt)
    }

    package var json: JSONValue {
        [
            "merchant": .string(merchant), "provider": .string(provider.rawValue), "subscription": .string(reference),
            "schedule": schedule.json, "state": .string(state.rawValue), "cycle": .integer(cycle), "attempt": .integer(attempt),
            "step": .integer(Int64(step + 1)), "dueAt": dueAt.map { .string(Timestamp.iso8601(milliseconds: $0)) } ?? .null,
            "orderId": orderId.map(JSONValue.string) ?? .null, "review": review.map(JSONValue.string) ?? .null,
        ]
    }
}

extension LedgerStore {
    /// Schema step 5: one schedule per subscription paypipe charges.
    func createSchedules(integer: String) throws {
        // Idempotent, like the steps before it: a store that lost its version record runs them again.
        switch db.dialect {
        case .postgres: try db.execute("ALTER TABLE subscriptions ADD COLUMN IF NOT EXISTS charge_target TEXT")
        case .sqlite:
            if try db.query("SELECT 1 FROM pragma_table_info('subscriptions') WHERE name='charge_target'").isEmpty {
                try db.execute("ALTER TABLE subscriptions ADD COLUMN charge_target TEXT")
            }
        }
        try db.execute(
            """
            CREATE TABLE IF NOT EXISTS schedules(provider TEXT NOT NULL, reference TEXT NOT NULL, merchant TEXT NOT NULL,
              schedule_json TEXT NOT NULL, target_json TEXT NOT NULL, state TEXT NOT NULL, cycle \(integer) NOT NULL,
              attempt \(integer) NOT NULL, step \(integer) NOT NULL, due_at \(integer), order_id TEXT, carried_json TEXT,
              updated_at \(integer) NOT NULL, digest TEXT NOT NULL, PRIMARY KEY(reference, provider, merchant));
            CREATE INDEX IF NOT EXISTS schedules_due ON schedules(due_at) WHERE due_at IS NOT NULL;
            CREATE UNIQUE INDEX IF NOT EXISTS schedules_digest ON schedules(digest, merchant);
            """)
    }

    /// Schema step 10: why a schedule is in review, and the overdue cycles it still charges there.
    func addScheduleReview() throws {
        switch db.dialect {
        case .postgres:
            try db.execute("ALTER TABLE schedules ADD COLUMN IF NOT EXISTS review TEXT")
            try db.execute("ALTER TABLE schedules ADD COLUMN IF NOT EXISTS catch_up_through BIGINT")
        case .sqlite:
            // Idempotent, like the steps before it.
            if try db.query("SELECT 1 FROM pragma_table_info('schedules') WHERE name='review'").isEmpty {
                try db.execute("ALTER TABLE schedules ADD COLUMN review TEXT")
            }
            if try db.query("SELECT 1 FROM pragma_table_info('schedules') WHERE name='catch_up_through'").isEmpty {
                try db.execute("ALTER TABLE schedules ADD COLUMN catch_up_through INTEGER")
            }
        }
    }

    static func schedule(_ row: [StoreValue]) -> ScheduleRecord? {
        guard let merchant = row[0].text, let provider = row[1].text, let reference = row[2].text,
            let scheduleText = row[3].text, let scheduleJSON = try? JSONValue.parse(Array(scheduleText.utf8)),
            let schedule = try? ChargeSchedule(json: scheduleJSON, field: "schedule", defaultAmount: nil, defaultCurrency: nil),
            let targetText = row[4].text, let target = try? JSONValue.parse(Array(targetText.utf8)),
            let state = row[5].text.flatMap(ScheduleRecord.State.init(rawValue:)), let cycle = row[6].integer, let attempt = row[7].integer,
            let step = row[8].integer
        else { return nil }
        return ScheduleRecord(
            merchant: merchant, provider: Provider(provider), reference: reference, schedule: schedule, target: target, state: state,
            cycle: cycle, attempt: attempt, step: Int(step), dueAt: row[9].integer, orderId: row[10].text,
            carried: row[11].text.flatMap { try? JSONValue.parse(Array($0.utf8)) }, review: row[12].text, catchUpThrough: row[13].integer)
    }

    /// Writes `record` whole. Call inside `transaction`.
    package func save(_ record: ScheduleRecord, now: Int64) throws {
        try db.query(
            """
            INSERT INTO schedules(merchant, provider, reference, schedule_json, target_json, state, cycle, attempt, step, due_at, order_id, carried_json, updated_at, digest, review, catch_up_through) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)
            ON CONFLICT(reference, provider, merchant) DO UPDATE SET schedule_json=excluded.schedule_json, target_json=excluded.target_json,
              state=excluded.state, cycle=excluded.cycle, attempt=excluded.attempt, step=excluded.step, due_at=excluded.due_at,
              order_id=excluded.order_id, carried_json=excluded.carried_json, updated_at=excluded.updated_at, review=excluded.review,
              catch_up_through=excluded.catch_up_through
            """,
            [
                .text(record.merchant), .text(record.provider.rawValue), .text(record.reference), .text(record.schedule.json.serialized),
                .text(record.target.serialized), .text(record.state.rawValue), .integer(record.cycle), .integer(record.attempt),
                .integer(Int64(record.step)), Self.value(record.dueAt), record.orderId.map(StoreValue.text) ?? .null,
                record.carried.map { .text($0.serialized) } ?? .null, .integer(now), .text(record.attemptIdentity.subscriptionDigest),
                record.review.map(StoreValue.text) ?? .null, Self.value(record.catchUpThrough),
            ])
    }

    /// Schedules whose next step is due at `now` (the schedules' clock), oldest first, at most
    /// `limit`, each locked for this transaction (another ledger skips it), with the state of
    /// their subscription. Call inside `transaction`.
    package func dueSchedules(now: Int64, limit: Int) throws -> [(record: ScheduleRecord, subscription: SubscriptionState?)] {
        let bindings: [StoreValue] = [.integer(now), .integer(Int64(limit))]
        let rows: [[StoreValue]]
        switch db.dialect {
        case .sqlite:
            rows = try db.query(
                """
                SELECT schedules.merchant, schedules.provider, schedules.reference, schedules.schedule_json, schedules.target_json, schedules.state, schedules.cycle, schedules.attempt, schedules.step, schedules.due_at, schedules.order_id, schedules.carried_json, schedules.review, schedules.catch_up_through, subscriptions.state FROM schedules LEFT JOIN subscriptions ON subscriptions.reference=schedules.reference
                  AND subscriptions.provider=schedules.provider AND subscriptions.merchant=schedules.merchant
                WHERE schedules.due_at IS NOT NULL AND schedules.due_at <= ? ORDER BY schedules.due_at LIMIT ?
                """, bindings)
        case .postgres:
            rows = try db.query(
                """
                SELECT schedules.merchant, schedules.provider, schedules.reference, schedules.schedule_json, schedules.target_json, schedules.state, schedules.cycle, schedules.attempt, schedules.step, schedules.due_at, schedules.order_id, schedules.carried_json, schedules.review, schedules.catch_up_through, subscriptions.state FROM schedules LEFT JOIN subscriptions ON subscriptions.reference=schedules.reference
                  AND subscriptions.provider=schedules.provider AND subscriptions.merchant=schedules.merchant
                WHERE schedules.due_at IS NOT NULL AND schedules.due_at <= ? ORDER BY schedules.due_at LIMIT ?
                FOR UPDATE OF schedules SKIP LOCKED
                """, bindings)
        }
        return rows.compactMap { row in
            Self.schedule(row).map { ($0, row[14].text.flatMap(SubscriptionState.init(rawValue:))) }
        }
    }

    /// When the earliest step waiting to be made into an order was due (epoch ms, the
    /// schedules' clock), whether or not that time has come; nil when none waits. One look at
    /// `schedules_due`, which holds only the steps that wait.
    package func earliestDueStep() throws -> Int64? {
        try read { try db.query("SELECT MIN(due_at) FROM schedules WHERE due_at IS NOT NULL").first?[0].integer }
    }
}

extension StoreReads {
    /// The schedule whose orders' ids carry `digest` (`ScheduledAttempt.subscriptionDigest`),
    /// locked for this transaction unless only read (`locking`: a read-only session takes no
    /// lock). Call inside `transaction` when locking.
    package func schedule(merchant: String, digest: String, locking: Bool = true) throws -> ScheduleRecord? {
        let bindings: [StoreValue] = [.text(digest), .text(merchant)]
        let rows: [[StoreValue]]
        switch (db.dialect, locking) {
        case (.sqlite, _), (.postgres, false):
            rows = try db.query(
                "SELECT merchant, provider, reference, schedule_json, target_json, state, cycle, attempt, step, due_at, order_id, carried_json, review, catch_up_through FROM schedules WHERE digest=? AND merchant=?",
                bindings)
        case (.postgres, true):
            rows = try db.query(
                "SELECT merchant, provider, reference, schedule_json, target_json, state, cycle, attempt, step, due_at, order_id, carried_json, review, catch_up_through FROM schedules WHERE digest=? AND merchant=? FOR UPDATE",
                bindings)
        }
        return rows.first.flatMap(LedgerStore.schedule)
    }

    /// One subscription's schedule, locked for this transaction (on PostgreSQL, so that a change
    /// and a tick of two ledgers take turns at it) unless only read. Call inside `transaction`
    /// when locking.
    package func schedule(merchant: String, provider: Provider, reference: String, locking: Bool = true) throws -> ScheduleRecord? {
        let digest = ScheduledAttempt.subscriptionDigest(merchant: merchant, provider: provider, subscription: reference)
        return try schedule(merchant: merchant, digest: digest, locking: locking).flatMap {
            $0.reference == reference && $0.provider == provider ? $0 : nil
        }
    }

    /// Schedules for `paypipe schedules`, soonest due first. nil filters match all.
    package func schedules(merchant: String?, provider: Provider?, state: String?, limit: Int) throws -> [ScheduleRecord] {
        func optional(_ text: String?) -> StoreValue { text.map(StoreValue.text) ?? .null }
        return try db.query(
            """
            SELECT merchant, provider, reference, schedule_json, target_json, state, cycle, attempt, step, due_at, order_id, carried_json, review, catch_up_through FROM schedules WHERE (CAST(? AS TEXT) IS NULL OR merchant=?) AND (CAST(? AS TEXT) IS NULL OR provider=?)
              AND (CAST(? AS TEXT) IS NULL OR state=?)
            ORDER BY due_at IS NULL, due_at, reference LIMIT ?
            """,
            [optional(merchant), optional(merchant), optional(provider?.rawValue), optional(provider?.rawValue), optional(state), optional(state)]
                + [.integer(Int64(limit))]
        ).compactMap(LedgerStore.schedule)
    }
}

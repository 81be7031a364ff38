import PaypipeCore
import StageWire

/// What recording one subscription event came to.
package enum SubscriptionEventRecording: Sendable, Equatable {
    /// No subscription of the merchant has the event's reference: nothing was recorded.
    case unknownSubscription
    /// Already recorded (a provider's redelivery, or the same fact seen twice).
    case duplicate
    /// Newly recorded. `logged`: the message with its seq, for upstream (nil when the merchant
    /// takes no events); `reachedFinalCycle`: a renewal that was the series' last.
    case recorded(logged: String?, reachedFinalCycle: Bool)
}

extension LedgerStore {
    /// Subscriptions and their events (schema step 4): a record per subscription that outlives
    /// its first order, and every event recorded against it, by event id.
    func createSubscriptions(integer: String) throws {
        try db.execute(
            """
            CREATE TABLE IF NOT EXISTS subscriptions(provider TEXT NOT NULL, reference TEXT NOT NULL, merchant TEXT NOT NULL,
              order_id TEXT NOT NULL, state TEXT NOT NULL, opened_at \(integer) NOT NULL, updated_at \(integer) NOT NULL,
              final_cycle \(integer), ends_at \(integer), expires_at \(integer), check_json TEXT, check_at \(integer),
              PRIMARY KEY(reference, provider, merchant));
            CREATE INDEX IF NOT EXISTS subscriptions_checks ON subscriptions(check_at) WHERE check_at IS NOT NULL;
            CREATE INDEX IF NOT EXISTS subscriptions_ending ON subscriptions(ends_at) WHERE ends_at IS NOT NULL;
            CREATE TABLE IF NOT EXISTS subscription_events(event_id TEXT PRIMARY KEY, reference TEXT NOT NULL, provider TEXT NOT NULL,
              merchant TEXT NOT NULL, at \(integer) NOT NULL, seq \(integer), message TEXT NOT NULL);
            CREATE INDEX IF NOT EXISTS subscription_events_of ON subscription_events(reference, provider, merchant, at);
            """)
    }

    /// Entitlement checks name their hand-out (schema step 7): a reading is taken only with the
    /// ticket of the check's latest hand-out.
    func addCheckTickets(integer: String) throws {
        switch db.dialect {
        case .postgres: try db.execute("ALTER TABLE subscriptions ADD COLUMN IF NOT EXISTS check_ticket \(integer)")
        case .sqlite:
            if try db.query("SELECT 1 FROM pragma_table_info('subscriptions') WHERE name='check_ticket'").isEmpty {
                try db.execute("ALTER TABLE subscriptions ADD COLUMN check_ticket \(integer)")
            }
        }
    }

    /// Records the subscription a first order opened; a second opening of the same reference
    /// (a correction, a redelivered callback) changes nothing. `checkAt`: when its entitlement
    /// is first checked, for a provider that is checked. Call inside `transaction`.
    /// `chargeTarget`: what charging it on schedule takes (`ScheduledCharging.target`), for a
    /// provider paypipe charges.
    package func openSubscription(
        _ opening: SubscriptionOpening, provider: Provider, key: OrderKey, checkAt: Int64?, chargeTarget: JSONValue? = nil, now: Int64
    ) throws {
        try db.query(
            """
            INSERT INTO subscriptions(provider, reference, merchant, order_id, state, opened_at, updated_at, final_cycle, ends_at,
              expires_at, check_json, check_at, charge_target)
            VALUES(?,?,?,?,'active',?,?,?,?,?,?,?,?) ON CONFLICT DO NOTHING
            """,
            [
                .text(provider.rawValue), .text(opening.reference), .text(key.merchant), .text(key.orderId), .integer(now), .integer(now),
                Self.value(opening.finalCycle), Self.value(opening.endsAt), Self.value(opening.expiresAt),
                opening.check.map { .text($0.serialized) } ?? .null, Self.value(opening.check == nil ? nil : checkAt),
                chargeTarget.map { .text($0.serialized) } ?? .null,
            ])
    }

    /// What charging a subscription on schedule takes; nil when the store knows no such
    /// subscription, or its provider is not charged by paypipe.
    package func chargeTarget(merchant: String, provider: Provider, reference: String) throws -> JSONValue? {
        try db.query(
            "SELECT charge_target FROM subscriptions WHERE reference=? AND provider=? AND merchant=?",
            [.text(reference), .text(provider.rawValue), .text(merchant)]
        ).first?[0].text.flatMap { try? JSONValue.parse(Array($0.utf8)) }
    }

    /// Records `event` against its subscription, once per event id, moving the subscription to
    /// the state the event leaves it in (`SubscriptionState.after`). `publish`: the merchant takes events, so it is logged.
    /// Call inside `transaction`.
    package func recordSubscriptionEvent(_ event: SubscriptionEvent, publish: Bool, now: Int64) throws -> SubscriptionEventRecording {
        let subscription: [StoreValue] = [.text(event.subscription), .text(event.provider.rawValue), .text(event.merchant)]
        guard
            let row = try db.query(
                "SELECT order_id, state, final_cycle FROM subscriptions WHERE reference=? AND provider=? AND merchant=?", subscription
            ).first, let orderId = row[0].text, let current = row[1].text.flatMap(SubscriptionState.init(rawValue:))
        else { return .unknownSubscription }
        // Cancelled is said once: by paypipe's own cancel or by the provider, whichever comes first.
        if event.kind == .subscriptionCancelled && current == .cancelled { return .duplicate }
        let at = Timestamp.iso8601(milliseconds: now)
        let eventId = event.eventId
        let state = current.after(event.kind)
        let message = event.message(origin: OrderKey(merchant: event.merchant, orderId: orderId), state: state, at: at).serialized
        // Stamped before it is known to be new: the seq is only taken by `appendToLog`.
        let logged = publish ? try stamped(message) : nil
        let inserted = try db.write(
            "INSERT INTO subscription_events(event_id, reference, provider, merchant, at, seq, message) VALUES(?,?,?,?,?,?,?) ON CONFLICT DO NOTHING",
            [.text(eventId)] + subscription + [.integer(now), Self.value(logged?.seq), .text(logged?.text ?? message)])
        guard inserted == 1 else { return .duplicate }
        // `updated_at` is when its state last changed: a renewal of an active subscription changes none.
        if state != current || event.expiresAt != nil {
            try db.query(
                "UPDATE subscriptions SET state=?, updated_at=?, expires_at=COALESCE(?, expires_at) WHERE reference=? AND provider=? AND merchant=?",
                [.text(state.rawValue), .integer(now), Self.value(event.expiresAt)] + subscription)
        }
        if let logged { try appendToLog(logged, key: OrderKey(merchant: event.merchant, orderId: orderId), now: now) }
        let finalCycle = row[2].integer
        let reachedFinal = event.kind == .renewalSucceeded && finalCycle.map { final in (event.cycle ?? 0) >= final && final > 0 } == true
        return .recorded(logged: logged?.text, reachedFinalCycle: reachedFinal)
    }

    /// Which of the events `eventIds` name are recorded. Call inside `transaction`.
    package func recordedEvents(_ eventIds: [String]) throws -> Set<String> {
        // One look up the primary key each: a schedule asks about a few of its own cycles.
        try Set(eventIds.filter { id in try !db.query("SELECT 1 FROM subscription_events WHERE event_id=?", [.text(id)]).isEmpty })
    }

    /// Sets where the subscription's series ends (`final_cycle`; nil: no end). Returns its state
    /// and the final cycle it had; nil when the store knows no such subscription. Call inside
    /// `transaction`.
    package func changeFinalCycle(
        _ finalCycle: Int64?, merchant: String, provider: Provider, reference: String
    ) throws -> (state: SubscriptionState, previous: Int64?)? {
        let subscription: [StoreValue] = [.text(reference), .text(provider.rawValue), .text(merchant)]
        guard
            let row = try db.query("SELECT state, final_cycle FROM subscriptions WHERE reference=? AND provider=? AND merchant=?", subscription)
                .first,
            let state = row[0].text.flatMap(SubscriptionState.init(rawValue:))
        else { return nil }
        try db.query(
            "UPDATE subscriptions SET final_cycle=? WHERE reference=? AND provider=? AND merchant=?", [Self.value(finalCycle)] + subscription)
        return (state, row[1].integer)
    }

    /// Where the subscription stands; nil when the store knows no such subscription.
    package func subscriptionState(merchant: String, provider: Provider, reference: String) throws -> SubscriptionState? {
        try db.query(
            "SELECT state FROM subscriptions WHERE reference=? AND provider=? AND merchant=?",
            [.text(reference), .text(provider.rawValue), .text(merchant)]
        ).first?[0].text.flatMap(SubscriptionState.init(rawValue:))
    }

    /// Whether the subscription `event` names is recorded.
    package func subscriptionExists(_ event: SubscriptionEvent) throws -> Bool {
        try !db.query(
            "SELECT 1 FROM subscriptions WHERE reference=? AND provider=? AND merchant=?",
            [.text(event.subscription), .text(event.provider.rawValue), .text(event.merchant)]
        ).isEmpty
    }

    /// Subscriptions past their end date that have not ended yet, at most `limit`, each locked
    /// for this transaction (another ledger skips it). Call inside `transaction`.
    package func subscriptionsPastEnd(now: Int64, limit: Int) throws -> [(merchant: String, provider: Provider, reference: String)] {
        let rows: [[StoreValue]]
        switch db.dialect {
        case .sqlite:
            rows = try db.query(
                """
                SELECT merchant, provider, reference FROM subscriptions
                WHERE ends_at IS NOT NULL AND ends_at <= ? AND state NOT IN ('ended','cancelled','revoked') LIMIT ?
                """, [.integer(now), .integer(Int64(limit))])
        case .postgres:
            rows = try db.query(
                """
                SELECT merchant, provider, reference FROM subscriptions
                WHERE ends_at IS NOT NULL AND ends_at <= ? AND state NOT IN ('ended','cancelled','revoked') LIMIT ? FOR UPDATE SKIP LOCKED
                """, [.integer(now), .integer(Int64(limit))])
        }
        return rows.compactMap { row in
            guard let merchant = row[0].text, let provider = row[1].text, let reference = row[2].text else { return nil }
            return (merchant, Provider(provider), reference)
        }
    }

    /// The entitlement checks due at `now`, at most `limit`; each is not due again until
    /// `retryAt` (when its poller reports, `checked` sets the real next time). Call inside
    /// `transaction`.
    /// Only `providers`' subscriptions are checked: the others' check columns hold a payment
    /// watch (`LedgerStore+Reconciliation`).
    package func dueEntitlementChecks(providers: [Provider], now: Int64, retryAt: Int64, limit: Int) throws -> [DueEntitlementCheck] {
        var rows: [[StoreValue]] = []
        for provider in providers where rows.count < limit {
            let values: [StoreValue] = [.text(provider.rawValue), .integer(now), .integer(Int64(limit - rows.count))]
            switch db.dialect {
            case .sqlite:
                rows += try db.query(
                    """
                    SELECT merchant, provider, reference, state, expires_at, check_json FROM subscriptions
                    WHERE provider=? AND check_at IS NOT NULL AND check_at <= ? ORDER BY check_at LIMIT ?
                    """, values)
            case .postgres:
                rows += try db.query(
                    """
                    SELECT merchant, provider, reference, state, expires_at, check_json FROM subscriptions
                    WHERE provider=? AND check_at IS NOT NULL AND check_at <= ? ORDER BY check_at LIMIT ? FOR UPDATE SKIP LOCKED
                    """, values)
            }
        }
        var due: [DueEntitlementCheck] = []
        for row in rows {
            guard let merchant = row[0].text, let provider = row[1].text, let reference = row[2].text,
                let state = row[3].text.flatMap(SubscriptionState.init(rawValue:)), let text = row[5].text,
                let check = try? JSONValue.parse(Array(text.utf8))
            else { continue }
            let ticket = Int64.random(in: 1...Int64.max)
            try db.query(
                "UPDATE subscriptions SET check_at=?, check_ticket=? WHERE reference=? AND provider=? AND merchant=?",
                [.integer(retryAt), .integer(ticket), .text(reference), .text(provider), .text(merchant)])
            due.append(
                DueEntitlementCheck(
                    merchant: merchant, provider: Provider(provider), reference: reference, state: state, expiresAt: row[4].integer, check: check,
                    ticket: ticket))
        }
        return due
    }

    /// Where the subscription of a check handed out under `ticket` stands, and since when (its
    /// `updated_at`), for deriving the event of its reading; nil when the check was not handed out under that ticket (never,
    /// or handed out again since, or already answered). Takes the row's lock on PostgreSQL.
    /// Call inside `transaction`.
    package func handedOutCheck(
        merchant: String, provider: Provider, reference: String, ticket: Int64
    ) throws -> (state: SubscriptionState, since: Int64?, expiresAt: Int64?)? {
        let key: [StoreValue] = [.text(reference), .text(provider.rawValue), .text(merchant), .integer(ticket)]
        let rows: [[StoreValue]]
        switch db.dialect {
        case .sqlite:
            rows = try db.query(
                "SELECT state, updated_at, expires_at FROM subscriptions WHERE reference=? AND provider=? AND merchant=? AND check_ticket=?", key)
        case .postgres:
            rows = try db.query(
                "SELECT state, updated_at, expires_at FROM subscriptions WHERE reference=? AND provider=? AND merchant=? AND check_ticket=? FOR UPDATE",
                key)
        }
        guard let row = rows.first, let state = row[0].text.flatMap(SubscriptionState.init(rawValue:)) else { return nil }
        return (state, row[1].integer, row[2].integer)
    }

    /// When a checked subscription is next due (its state final: never); the answered hand-out's
    /// ticket is spent. Call inside `transaction`.
    package func scheduleCheck(merchant: String, provider: Provider, reference: String, at next: Int64) throws {
        try db.query(
            """
            UPDATE subscriptions SET check_at=CASE WHEN state IN ('ended','cancelled','revoked') THEN NULL ELSE ? END, check_ticket=NULL
            WHERE reference=? AND provider=? AND merchant=? AND check_at IS NOT NULL
            """, [.integer(next), .text(reference), .text(provider.rawValue), .text(merchant)])
    }

    static func value(_ integer: Int64?) -> StoreValue { integer.map(StoreValue.integer) ?? .null }
}

extension StoreReads {
    /// One subscription's record and its events, oldest first; nil when there is no such
    /// subscription.
    package func subscription(merchant: String, provider: Provider, reference: String, limit: Int = 1000) throws -> JSONValue? {
        let key: [StoreValue] = [.text(reference), .text(provider.rawValue), .text(merchant)]
        guard
            let row = try db.query(
                "SELECT order_id, state, opened_at, updated_at, final_cycle, ends_at, expires_at, paid_through FROM subscriptions WHERE reference=? AND provider=? AND merchant=?",
                key
            ).first
        else { return nil }
        let events = try db.query(
            "SELECT message FROM subscription_events WHERE reference=? AND provider=? AND merchant=? ORDER BY at, seq LIMIT ?",
            key + [.integer(Int64(limit))]
        ).compactMap { $0[0].text.flatMap { try? JSONValue.parse(Array($0.utf8)) } }
        func time(_ value: StoreValue) -> JSONValue { value.integer.map { .string(Timestamp.iso8601(milliseconds: $0)) } ?? .null }
        return [
            "merchant": .string(merchant), "provider": .string(provider.rawValue), "reference": .string(reference),
            "orderId": row[0].text.map(JSONValue.string) ?? .null, "state": row[1].text.map(JSONValue.string) ?? .null,
            "openedAt": time(row[2]), "updatedAt": time(row[3]), "finalCycle": row[4].integer.map(JSONValue.integer) ?? .null,
            "endsAt": time(row[5]), "expiresAt": time(row[6]), "paidThrough": time(row[7]), "events": .array(events),
            "schedule": try schedule(merchant: merchant, provider: provider, reference: reference, locking: false)?.json ?? .null,
        ]
    }
}

import PaypipeCore
import StageWire

extension LedgerStore {
    /// Orders without a terminal or pending outcome that nobody holds: their lease lapsed (the
    /// holder died), or nobody claimed their last dispatch before `cutoff`. Each is marked
    /// dispatched once more and returned with its new generation, unless submitters already
    /// claimed `maxDispatches` of its dispatches: then it is returned as exhausted, unchanged.
    /// A dispatch nobody claimed never reached a provider, so it does not count toward the cap;
    /// it waits twice as long each time it is sent again unclaimed (at most 32 × the delay), so a
    /// backlog in the queues is not flooded with copies. Call inside `transaction`.
    package func stalled(
        dispatchedBefore cutoff: Int64, now: Int64, limit: Int, maxDispatches: Int64, maxLeaseLife: Int64 = .max
    ) throws -> (redispatch: [Redispatch], exhausted: [Exhausted]) {
        let delay = now - cutoff
        // Two ranges, one per partial index (SQLite does not combine partial indexes for an OR):
        // unclaimed dispatches older than the cutoff, and lapsed leases. Without statistics the
        // planner prefers `orders_in_flight`'s equality on the state to `orders_held`'s range,
        // which would read every order in flight, so the second range names its index.
        let rows = try db.query(
            db.dialect == .postgres ? Self.stalledQueryLocking : Self.stalledQuery,
            [.integer(cutoff), .integer(cutoff), .integer(delay), .integer(now), .integer(Int64(limit))])
        var redispatch: [Redispatch] = [], exhausted: [Exhausted] = []
        for row in rows {
            guard let merchant = row[0].text, let orderId = row[1].text, let json = row[2].text, let acceptedAt = row[3].integer,
                let dispatches = row[4].integer, let attempts = row[7].integer
            else { continue }
            let key = OrderKey(merchant: merchant, orderId: orderId)
            var reason: String?
            if let claimedAt = row[8].integer, now - claimedAt >= maxLeaseLife {
                reason = "held by a submitter for \(now - claimedAt) ms, past timers.leaseMaxMs, without an outcome"
            } else if attempts >= maxDispatches {
                reason = "taken up by a submitter \(attempts) times without an outcome (timers.maxDispatches)"
            }
            if let reason {
                exhausted.append(Exhausted(key: key, provider: row[5].text ?? "", operation: row[6].text ?? "", attempts: attempts, reason: reason))
                continue
            }
            guard try markDispatched(merchant: merchant, orderId: orderId, dispatches: dispatches, now: now) else { continue }
            redispatch.append(Redispatch(json: json, acceptedAt: acceptedAt, key: key, generation: dispatches + 1))
        }
        return (redispatch, exhausted)
    }

    /// A new dispatch is a new generation: the previous holder's lease ends with it. Only the
    /// generation after `dispatches` is taken, so two ledgers that found the same stalled order
    /// never send one generation twice: false when another took it first.
    func markDispatched(merchant: String, orderId: String, dispatches: Int64, now: Int64) throws -> Bool {
        try db.write(
            """
            UPDATE orders SET dispatched_at=?, dispatches=dispatches+1, lease_until=NULL, claimed_generation=NULL, claimed_at=NULL
            WHERE merchant=? AND order_id=? AND dispatches=?
            """,
            [.integer(now), .text(merchant), .text(orderId), .integer(dispatches)]) == 1
    }

    /// Grants (or renews) each claim while the order is open or unknown, holding it until
    /// `until`. A claim must name a ticket the ledger issued for the order. The holder of a
    /// generation renews it, until it has held it `maxLife`: then the renewal is refused, its
    /// holder stops, and once the lease lapses the order goes to review. When nobody holds the
    /// order, its current generation is granted, and so is an older copy that is safe to send: a
    /// redelivery (generation 2 or more, which is resolved before anything is sent again), or the
    /// first copy while no copy was ever claimed. Otherwise, when copies wait in a backlog longer
    /// than the redelivery delay, every copy would arrive superseded and the order would never be
    /// taken up. Call inside `transaction`.
    package func claim(_ claims: [LeaseClaim], until: Int64, now: Int64, maxLife: Int64) throws -> [Bool] {
        let valid = claims.map { tickets.isValid($0.ticket, for: $0.key) }
        if let granted = try claimAll(claims, valid: valid, until: until, now: now, maxLife: maxLife) { return granted }
        return try zip(claims, valid).map { claim, isValid in
            guard isValid else { return false }
            let g = StoreValue.integer(claim.generation)
            return try db.write(
                """
                UPDATE orders SET lease_until=?, attempts=attempts + CASE WHEN claimed_generation IS NOT DISTINCT FROM ? THEN 0 ELSE 1 END,
                  claimed_at=CASE WHEN claimed_generation IS NOT DISTINCT FROM ? THEN COALESCE(claimed_at, ?) ELSE ? END, claimed_generation=?
                WHERE merchant=? AND order_id=? AND state IN ('open','unknown')
                  AND ((claimed_generation = ? AND COALESCE(claimed_at, ?) > ?)
                       OR (claimed_generation IS NULL AND ? <= dispatches AND (? = dispatches OR attempts = 0 OR ? >= 2)))
                """,
                [
                    .integer(until), g, g, .integer(now), .integer(now), g, .text(claim.key.merchant), .text(claim.key.orderId),
                    g, .integer(now), .integer(now - maxLife), g, g, g,
                ]) == 1
        }
    }

    /// Gives held leases back the time the ledgers were down, and no more: lease time runs only
    /// while some ledger of this store is alive, so an outage of the ledgers alone is not taken
    /// for their holders' death, while a holder that died stays dead across restarts (a ledger
    /// that crash-loops must not keep a dead submitter's order held until it goes to review).
    /// Leases are timed on each process's own monotonic clock, so the outage is measured from the
    /// last moment a ledger recorded itself alive (`recordAlive`), and no lease is pushed past
    /// `now + lease`, whichever way the wall clock moved between. A store no ledger ever recorded
    /// gives every held lease a whole one. Call inside `transaction`.
    package func resumeHeldLeases(now: Int64, lease: Int64) throws {
        if let lastAlive = try lastAlive() {
            let outage = max(0, now - lastAlive)
            try db.query(Self.shiftHeldLeasesStatement, [.integer(outage), .integer(now + lease), .integer(outage), .integer(now + lease)])
        } else {
            try db.query(Self.extendHeldLeasesStatement, [.integer(now + lease), .integer(now + lease)])
        }
        try recordAlive(now: now)
    }

    /// The moment a ledger of this store was last seen alive, on its own clock.
    package func recordAlive(now: Int64) throws {
        try db.query(
            "INSERT INTO meta(name, value) VALUES('ledger_alive_at', ?) ON CONFLICT(name) DO UPDATE SET value=excluded.value",
            [.text(String(now))])
    }

    func lastAlive() throws -> Int64? {
        try db.query("SELECT value FROM meta WHERE name='ledger_alive_at'").first?[0].text.flatMap { Int64($0) }
    }

    static let shiftHeldLeasesStatement: StaticString = """
        UPDATE orders INDEXED BY orders_held SET lease_until=CASE WHEN lease_until + ? < ? THEN lease_until + ? ELSE ? END
        WHERE state IN ('open','unknown') AND lease_until IS NOT NULL
        """

    static let extendHeldLeasesStatement: StaticString =
        "UPDATE orders INDEXED BY orders_held SET lease_until=? WHERE state IN ('open','unknown') AND lease_until IS NOT NULL AND lease_until <> ?"

    /// Unclaimed dispatches older than a cutoff (with the backoff of `stalled`), then lapsed leases.
    static let stalledQuery: StaticString = """
        SELECT merchant, order_id, order_json, accepted_at, dispatches, provider, operation, attempts, claimed_at FROM orders
        WHERE state IN ('open','unknown') AND order_json IS NOT NULL AND lease_until IS NULL AND dispatched_at < ?
          AND dispatched_at < ? - ? * ((1 << CAST(CASE WHEN dispatches - attempts <= 1 THEN 0 WHEN dispatches - attempts >= 6 THEN 5
                                                       ELSE dispatches - attempts - 1 END AS INTEGER)) - 1)
        UNION ALL
        SELECT merchant, order_id, order_json, accepted_at, dispatches, provider, operation, attempts, claimed_at FROM orders INDEXED BY orders_held
        WHERE state IN ('open','unknown') AND order_json IS NOT NULL AND lease_until < ?
        LIMIT ?
        """

    /// `stalledQuery` for several ledgers over one PostgreSQL database: the rows it finds are
    /// locked until the transaction that dispatches them again commits, and rows another ledger
    /// is dispatching are skipped rather than waited for.
    static let stalledQueryLocking: StaticString = """
        SELECT merchant, order_id, order_json, accepted_at, dispatches, provider, operation, attempts, claimed_at FROM orders
        WHERE state IN ('open','unknown') AND order_json IS NOT NULL
          AND ((lease_until IS NULL AND dispatched_at < ?
                AND dispatched_at < ? - ? * ((1 << CAST(CASE WHEN dispatches - attempts <= 1 THEN 0 WHEN dispatches - attempts >= 6 THEN 5
                                                            ELSE dispatches - attempts - 1 END AS INTEGER)) - 1))
               OR lease_until < ?)
        LIMIT ? FOR UPDATE SKIP LOCKED
        """

    /// How SQLite runs the statements that look for work by time, by name: each must search
    /// its partial index, never read every order in flight.
    package func queryPlans() throws -> [String: [String]] {
        guard let sqlite = db as? SQLiteConnection else { return [:] }
        return [
            "stalled": try sqlite.queryPlan(Self.stalledQuery), "extendHeldLeases": try sqlite.queryPlan(Self.extendHeldLeasesStatement),
            "shiftHeldLeases": try sqlite.queryPlan(Self.shiftHeldLeasesStatement),
        ]
    }
}

import PaypipeCore
import StageWire

/// PostgreSQL answers every statement in a round trip of its own, and a round trip costs more
/// than the row it writes: so on PostgreSQL the statements one pass of the ledger makes per
/// order (intake, claims, the submitters' results) are made once per pass, over arrays
/// (`unnest`). The rules stay those of the per-order statements, which SQLite, in process,
/// keeps running one by one. A batch holds only keys that occur once in it: an order named twice
/// goes the per-order way, in turn.
extension LedgerStore {
    /// Takes in, in one statement, the orders of an intake pass whose keys occur once in it, and
    /// the provider references of those it recorded; `admit` then finds them recorded. An order
    /// whose every reference is now its own is done; one whose reference another order holds is
    /// left to `admit`, which finds the holder and takes the order back. Call inside
    /// `transaction`, before their `admit`.
    package func prepareAdmissions(_ orders: [(order: Order, json: String, references: [String])], now: Int64) throws {
        guard db.dialect == .postgres, orders.count > 1 else { return }
        var keys: [OrderKey] = [], providers: [String] = [], references: [String] = []
        for (order, _, refs) in orders {
            for reference in refs {
                keys.append(order.key)
                providers.append(order.provider.rawValue)
                references.append(reference)
            }
        }
        let rows = try db.query(
            """
            WITH admitted AS (
              INSERT INTO orders(merchant, order_id, order_json, state, accepted_at, dispatched_at, dispatches, provider, operation)
              SELECT u.m, u.o, u.j, 'open', ?, ?, 1, u.p, u.op FROM unnest(?::text[], ?::text[], ?::text[], ?::text[], ?::text[]) AS u(m, o, j, p, op)
              ON CONFLICT DO NOTHING RETURNING merchant, order_id),
            indexed AS (
              INSERT INTO refs(provider, ref, merchant, order_id)
              SELECT r.p, r.r, r.m, r.o FROM unnest(?::text[], ?::text[], ?::text[], ?::text[]) AS r(p, r, m, o)
              JOIN admitted AS a ON a.merchant=r.m AND a.order_id=r.o
              ON CONFLICT DO NOTHING RETURNING merchant, order_id)
            SELECT 0, merchant, order_id FROM admitted UNION ALL SELECT 1, merchant, order_id FROM indexed
            """,
            [
                .integer(now), .integer(now), .texts(orders.map(\.order.merchant)), .texts(orders.map(\.order.orderId)), .texts(orders.map(\.json)),
                .texts(orders.map(\.order.provider.rawValue)), .texts(orders.map(\.order.operation.rawValue)), .texts(providers), .texts(references),
                .texts(keys.map(\.merchant)), .texts(keys.map(\.orderId)),
            ])
        var indexed: [OrderKey: Int] = [:]
        for row in rows {
            guard let merchant = row[1].text, let orderId = row[2].text else { continue }
            let key = OrderKey(merchant: merchant, orderId: orderId)
            if row[0].integer == 0 { batch.admitted.insert(key) } else { indexed[key, default: 0] += 1 }
        }
        for (order, _, refs) in orders where !refs.isEmpty && indexed[order.key] == refs.count { batch.referencesIndexed.insert(order.key) }
    }

    /// Whether `prepareAdmissions` indexed every reference of the order under `key`.
    func takeIndexedReferences(_ key: OrderKey) -> Bool {
        !batch.referencesIndexed.isEmpty && batch.referencesIndexed.remove(key) != nil
    }

    /// Whether `prepareAdmissions` recorded the order under `key` (once: the next order with it
    /// is a repeat).
    func takePreparedAdmission(_ key: OrderKey) -> Bool {
        !batch.admitted.isEmpty && batch.admitted.remove(key) != nil
    }

    /// Grants the claims of a pass in one statement, under the same rule as `claim`'s per-claim
    /// statement. nil when the batch is not for one (SQLite, or a key claimed twice).
    func claimAll(_ claims: [LeaseClaim], valid: [Bool], until: Int64, now: Int64, maxLife: Int64) throws -> [Bool]? {
        guard db.dialect == .postgres, claims.count > 1, Set(claims.map(\.key)).count == claims.count else { return nil }
        let granting = claims.indices.filter { valid[$0] }.map { claims[$0] }
        guard !granting.isEmpty else { return valid }
        let rows = try db.query(
            """
            UPDATE orders AS o SET lease_until=?, attempts=o.attempts + CASE WHEN o.claimed_generation IS NOT DISTINCT FROM u.g THEN 0 ELSE 1 END,
              claimed_at=CASE WHEN o.claimed_generation IS NOT DISTINCT FROM u.g THEN COALESCE(o.claimed_at, ?) ELSE ? END, claimed_generation=u.g
            FROM unnest(?::text[], ?::text[], ?::bigint[]) AS u(m, id, g)
            WHERE o.merchant=u.m AND o.order_id=u.id AND o.state IN ('open','unknown')
              AND ((o.claimed_generation = u.g AND COALESCE(o.claimed_at, ?) > ?)
                   OR (o.claimed_generation IS NULL AND u.g <= o.dispatches AND (u.g = o.dispatches OR o.attempts = 0 OR u.g >= 2)))
            RETURNING o.merchant, o.order_id
            """,
            [
                .integer(until), .integer(now), .integer(now), .texts(granting.map(\.key.merchant)), .texts(granting.map(\.key.orderId)),
                .integers(granting.map(\.generation)), .integer(now), .integer(now - maxLife),
            ])
        let granted = Set(rows.compactMap { row in row[0].text.flatMap { m in row[1].text.map { OrderKey(merchant: m, orderId: $0) } } })
        return claims.indices.map { valid[$0] && granted.contains(claims[$0].key) }
    }

    /// Moves, in one statement, the orders whose outcome in this pass is their claim holder's
    /// (the per-order `moveHeld`) and whose keys occur once in it; `record` then finds each one
    /// moved, gives it its seq in turn, and `finishRecords` writes the outcomes and their log
    /// entries. Call inside `transaction`, before their `record`.
    package func prepareRecords(_ results: [(outcome: Outcome, source: ResultSource, polled: Bool)], now: Int64) throws {
        guard db.dialect == .postgres, results.count > 1 else { return }
        var uses: [OrderKey: Int] = [:]
        for result in results { uses[OrderKey(merchant: result.outcome.merchant, orderId: result.outcome.orderId), default: 0] += 1 }
        var keys: [OrderKey] = [], generations: [Int64] = [], providers: [String] = [], operations: [String] = []
        var targets: [String] = [], polled: [Int64] = []
        for result in results {
            let key = OrderKey(merchant: result.outcome.merchant, orderId: result.outcome.orderId)
            guard uses[key] == 1, let generation = Self.heldGeneration(result.outcome, from: result.source) else { continue }
            keys.append(key)
            generations.append(generation)
            providers.append(result.outcome.provider)
            operations.append(result.outcome.operation)
            targets.append(Self.target(of: result.outcome).rawValue)
            polled.append(result.polled ? 1 : 0)
        }
        guard !keys.isEmpty else { return }
        batch.candidates = Set(keys)
        let rows = try db.query(
            """
            UPDATE orders AS o SET state=u.t,
              ended_at=CASE WHEN u.t='terminal' THEN ? ELSE o.ended_at END,
              pending_at=CASE WHEN u.t='pending' THEN ? ELSE o.pending_at END,
              dispatched_at=CASE WHEN u.t='pending' THEN ? ELSE o.dispatched_at END
            FROM unnest(?::text[], ?::text[], ?::bigint[], ?::text[], ?::text[], ?::text[], ?::bigint[]) AS u(m, id, g, p, op, t, pl)
            WHERE o.merchant=u.m AND o.order_id=u.id AND o.state='open' AND o.claimed_generation=u.g AND o.provider=u.p AND o.operation=u.op
            RETURNING o.merchant, o.order_id, CASE WHEN u.t='pending' AND u.pl=1 THEN o.order_json END
            """,
            [
                .integer(now), .integer(now), .integer(now), .texts(keys.map(\.merchant)), .texts(keys.map(\.orderId)), .integers(generations),
                .texts(providers), .texts(operations), .texts(targets), .integers(polled),
            ])
        for row in rows {
            guard let merchant = row[0].text, let orderId = row[1].text else { continue }
            batch.moved[OrderKey(merchant: merchant, orderId: orderId)] = row[2].text ?? ""
        }
    }

    /// The generation whose holder gives `outcome`, when `source` is the holder of the order's
    /// claim answering its submission: the outcomes `moveHeld` applies without reading the row.
    static func heldGeneration(_ outcome: Outcome, from source: ResultSource) -> Int64? {
        guard case .stage(let role, .submit, let ticket, true) = source, role == nil || role == .submitter, outcome.status != .rejected else {
            return nil
        }
        return ticket.generation
    }

    /// The state an outcome moves its order to.
    static func target(of outcome: Outcome) -> State {
        if outcome.status.isTerminal { return .terminal }
        if outcome.status == .unknown { return outcome.error?.needsReview == true ? .review : .unknown }
        return .pending
    }

    /// `record`'s part for an order `prepareRecords` moved: nil when it did not (the per-order
    /// way then decides, and skips the statement that would change nothing).
    func recordPrepared(
        _ outcome: Outcome, serialized: String, references: [String], polled: Bool, now: Int64, generation: Int64
    ) throws -> Recorded? {
        let key = OrderKey(merchant: outcome.merchant, orderId: outcome.orderId)
        guard !batch.candidates.isEmpty, batch.candidates.remove(key) != nil else { return nil }
        guard let json = batch.moved.removeValue(forKey: key) else { return nil }
        let target = Self.target(of: outcome)
        let stamped = try stamped(serialized)
        batch.outcomes.append((key, stamped))
        take(stamped)
        moved(from: .open, to: target)
        guard target == .pending else { return Recorded(emit: stamped.text) }
        for reference in references { batch.references.append((outcome.provider, reference, key)) }
        guard polled, !json.isEmpty else { return Recorded(emit: stamped.text) }
        return Recorded(emit: stamped.text, becamePending: Pending(json: json, since: now, key: key, generation: generation))
    }

    /// Writes what `recordPrepared` decided, in one statement: each order's outcome, its log
    /// entry, its references, and the log's head as far as this transaction has logged (which
    /// `closeLogEntries` then need not write again). Call inside `transaction`, after the pass's
    /// `record`s.
    package func finishRecords(now: Int64) throws {
        defer { batch = Batch() }
        guard !batch.outcomes.isEmpty, let last = lastSeqTaken else { return }
        let outcomes = batch.outcomes
        let references = batch.references
        try db.query(
            """
            WITH u AS (SELECT * FROM unnest(?::text[], ?::text[], ?::text[], ?::bigint[]) AS u(m, id, text, seq)),
              written AS (UPDATE orders AS o SET outcome=u.text FROM u WHERE o.merchant=u.m AND o.order_id=u.id),
              logged AS (INSERT INTO outcome_log(seq, at, outcome, merchant, order_id) SELECT u.seq, ?, u.text, u.m, u.id FROM u),
              indexed AS (
                INSERT INTO refs(provider, ref, merchant, order_id) SELECT * FROM unnest(?::text[], ?::text[], ?::text[], ?::text[])
                ON CONFLICT DO NOTHING),
              head AS (UPDATE log_head SET last_seq=GREATEST(last_seq, ?))
            UPDATE epochs SET last_seq=? WHERE epoch=?
            """,
            [
                .texts(outcomes.map(\.key.merchant)), .texts(outcomes.map(\.key.orderId)), .texts(outcomes.map(\.stamped.text)),
                .integers(outcomes.map(\.stamped.seq)), .integer(now), .texts(references.map(\.provider)), .texts(references.map(\.reference)),
                .texts(references.map(\.key.merchant)), .texts(references.map(\.key.orderId)), .integer(last), .integer(last), .text(epoch),
            ])
        logHeadWritten = last
    }
}

/// What a pass's set-wise statements decided, for the per-order calls that follow them in the
/// same transaction.
struct Batch {
    /// Orders `prepareAdmissions` recorded, and those of them whose references it indexed.
    var admitted: Set<OrderKey> = []
    var referencesIndexed: Set<OrderKey> = []
    /// Orders `prepareRecords` tried to move, and those it moved (with their order's JSON when
    /// the pollers need it).
    var candidates: Set<OrderKey> = []
    var moved: [OrderKey: String] = [:]
    /// Outcomes and references to write in `finishRecords`.
    var outcomes: [(key: OrderKey, stamped: (seq: Int64, text: String))] = []
    var references: [(provider: String, reference: String, key: OrderKey)] = []
}

import PaypipeCore
import StageWire

/// What the operators' commands read and write (docs/operations.md, "Finding and resolving an
/// order"): one order's story, lists of orders, and the audit trail of what operators did.
extension LedgerStore {
    /// Schema step 6: every operator action on an order (a resolution, a re-check), with who,
    /// why and when. Rows are never updated or deleted, retention included.
    func createOrderAudit(integer: String) throws {
        try db.execute(
            """
            CREATE TABLE IF NOT EXISTS order_audit(merchant TEXT NOT NULL, order_id TEXT NOT NULL, at \(integer) NOT NULL,
              action TEXT NOT NULL, actor TEXT NOT NULL, operator_key TEXT, reason TEXT NOT NULL, detail TEXT);
            CREATE INDEX IF NOT EXISTS order_audit_order ON order_audit(order_id, merchant);
            """)
    }

    /// Schema step 9: each logged outcome keyed by the order it is about, so that `order show`
    /// finds an order's outcomes by an index instead of reading the whole log. What the log
    /// already holds is keyed from its own text, as `appendToLog` keys what it logs from now on.
    func keyOutcomeLogByOrder() throws {
        // Idempotent, like the steps before it: a store of a release before schema versions runs every step.
        switch db.dialect {
        case .postgres:
            try db.execute(
                "ALTER TABLE outcome_log ADD COLUMN IF NOT EXISTS merchant TEXT; ALTER TABLE outcome_log ADD COLUMN IF NOT EXISTS order_id TEXT")
        case .sqlite:
            if try db.query("SELECT 1 FROM pragma_table_info('outcome_log') WHERE name='merchant'").isEmpty {
                try db.execute("ALTER TABLE outcome_log ADD COLUMN merchant TEXT; ALTER TABLE outcome_log ADD COLUMN order_id TEXT")
            }
        }
        var after: Int64 = 0
        while true {
            let rows = try db.query("SELECT seq, outcome FROM outcome_log WHERE seq > ? ORDER BY seq LIMIT 1000", [.integer(after)])
            guard let last = rows.last?[0].integer else { break }
            after = last
            var keyed: [(seq: Int64, merchant: String, orderId: String)] = []
            for row in rows {
                guard let seq = row[0].integer, let text = row[1].text, let outcome = try? JSONValue.parse(Array(text.utf8)),
                    let merchant = outcome["merchant"]?.stringValue, let orderId = outcome["orderId"]?.stringValue
                else { continue }
                keyed.append((seq, merchant, orderId))
            }
            switch db.dialect {
            case .sqlite:
                for entry in keyed {
                    try db.query(
                        "UPDATE outcome_log SET merchant=?, order_id=? WHERE seq=?",
                        [.text(entry.merchant), .text(entry.orderId), .integer(entry.seq)])
                }
            case .postgres:
                try db.query(
                    """
                    UPDATE outcome_log AS l SET merchant=u.m, order_id=u.id FROM unnest(?::bigint[], ?::text[], ?::text[]) AS u(seq, m, id)
                    WHERE l.seq=u.seq
                    """, [.integers(keyed.map(\.seq)), .texts(keyed.map(\.merchant)), .texts(keyed.map(\.orderId))])
            }
        }
        // SQLite's index holds the seq as the row's id already.
        switch db.dialect {
        case .sqlite: try db.execute("CREATE INDEX IF NOT EXISTS outcome_log_order ON outcome_log(order_id, merchant)")
        case .postgres: try db.execute("CREATE INDEX IF NOT EXISTS outcome_log_order ON outcome_log(order_id, merchant, seq)")
        }
    }

    /// Records an operator's action on `key`. Call inside `transaction`, with the change it records.
    func audit(_ key: OrderKey, action: String, by actor: String, operatorKey: String?, reason: String, detail: JSONValue?, now: Int64) throws {
        try db.query(
            "INSERT INTO order_audit(merchant, order_id, at, action, actor, operator_key, reason, detail) VALUES(?,?,?,?,?,?,?,?)",
            [
                .text(key.merchant), .text(key.orderId), .integer(now), .text(action), .text(actor), operatorKey.map(StoreValue.text) ?? .null,
                .text(reason), detail.map { .text($0.serialized) } ?? .null,
            ])
    }

    /// What deciding an operator action on an order needs to know.
    struct OperatorFacts {
        var state: State
        var provider: String
        var operation: String
        var json: String?
        var outcome: String?
        var generation: Int64
        var acceptedAt: Int64
        var pendingAt: Int64?
    }

    func operatorFacts(_ key: OrderKey) throws -> OperatorFacts? {
        guard
            let row = try db.query(
                "SELECT state, provider, operation, order_json, outcome, dispatches, accepted_at, pending_at FROM orders WHERE merchant=? AND order_id=?",
                [.text(key.merchant), .text(key.orderId)]
            ).first, let state = row[0].text.flatMap(State.init(rawValue:))
        else { return nil }
        return OperatorFacts(
            state: state, provider: row[1].text ?? "", operation: row[2].text ?? "", json: row[3].text, outcome: row[4].text,
            generation: row[5].integer ?? 1, acceptedAt: row[6].integer ?? 0, pendingAt: row[7].integer)
    }

    /// Marks a pending or review order dispatched now under a new generation, for an operator's
    /// re-check, so that only the answer to this check counts; false when it is no longer in
    /// `state` at `generation`.
    func markRechecked(_ key: OrderKey, state: State, generation: Int64, now: Int64) throws -> Bool {
        try db.write(
            "UPDATE orders SET dispatched_at=?, dispatches=dispatches+1 WHERE merchant=? AND order_id=? AND state=? AND dispatches=?",
            [.integer(now), .text(key.merchant), .text(key.orderId), .text(state.rawValue), .integer(generation)]) == 1
    }

    /// The oldest open (or unknown) and the oldest pending order's acceptance time per provider.
    package func oldestInFlight() throws -> (open: [String: Int64], pending: [String: Int64]) {
        try read {
            var open: [String: Int64] = [:], pending: [String: Int64] = [:]
            for row in try db.query("SELECT provider, MIN(accepted_at) FROM orders WHERE state IN ('open','unknown') GROUP BY provider") {
                if let provider = row[0].text, let at = row[1].integer { open[provider] = at }
            }
            for row in try db.query("SELECT provider, MIN(pending_at) FROM orders WHERE state='pending' GROUP BY provider") {
                if let provider = row[0].text, let at = row[1].integer { pending[provider] = at }
            }
            return (open, pending)
        }
    }

    /// When the oldest order in review got the outcome that sent it there (its `at`, epoch ms);
    /// nil when none waits. Through `orders_in_review`, which holds only orders in review.
    package func oldestInReview() throws -> Int64? {
        try read {
            let rows =
                switch db.dialect {
                case .sqlite: try db.query("SELECT MIN(json_extract(outcome, '$.at')) FROM orders WHERE state='review'")
                case .postgres: try db.query("SELECT MIN(outcome::jsonb->>'at') FROM orders WHERE state='review'")
                }
            return rows.first?[0].text.flatMap { Timestamp.milliseconds(iso8601: $0) }
        }
    }

    /// Every outcome logged for one order, by the log's index on the order's key
    /// (`outcome_log_order`): a lookup, however long the log.
    static let outcomesOfOrder: StaticString = "SELECT seq, at, outcome FROM outcome_log WHERE order_id=? AND merchant=? ORDER BY seq LIMIT ?"

    /// How the database would run `outcomesOfOrder` (EXPLAIN's lines), for the tests.
    package func outcomesOfOrderPlan() throws -> [String] {
        let bindings: [StoreValue] = [.text("o"), .text("m"), .integer(10)]
        if let sqlite = db as? SQLiteConnection { return try sqlite.queryPlan(Self.outcomesOfOrder) }
        if let postgres = db as? PostgresDatabase { return try postgres.queryPlan(Self.outcomesOfOrder, bindings) }
        return []
    }

    /// Param names whose values an operator's screen never shows: any name containing one of
    /// these, and the short ones only as the whole name.
    static let secretLooking = ["secret", "password", "token", "receipt", "cvv", "jwt", "signature", "authorization", "salt", "card"]
    static let secretNames: Set<String> = ["pan", "key", "apikey"]

    /// `value` with every member whose name looks like a secret replaced by "[redacted]".
    static func redacted(_ value: JSONValue) -> JSONValue {
        switch value {
        case .object(let object):
            var copy: [String: JSONValue] = [:]
            for (name, member) in object {
                let lower = name.lowercased()
                let secret = secretLooking.contains(where: lower.contains) || secretNames.contains(lower)
                copy[name] = secret ? .string("[redacted]") : redacted(member)
            }
            return .object(copy)
        case .array(let items): return .array(items.map(redacted))
        default: return value
        }
    }
}

extension StoreReads {
    /// One order's story: its state and times, its dispatches and claim, the order as received
    /// (secret-looking params redacted), the provider references it is known by, its callbacks,
    /// every outcome logged for it with its seq, and what operators did. nil: no such order.
    package func orderStory(_ key: OrderKey, outcomesLimit: Int = 200) throws -> JSONValue? {
        let k: [StoreValue] = [.text(key.merchant), .text(key.orderId)]
        guard
            let row = try read({
                try db.query(
                    """
                    SELECT state, provider, operation, order_json, outcome, accepted_at, dispatched_at, dispatches, pending_at, lease_until,
                      attempts, claimed_generation, claimed_at, corrected_at, ended_at FROM orders WHERE merchant=? AND order_id=?
                    """, k
                ).first
            })
        else { return nil }
        func time(_ value: StoreValue) -> JSONValue { value.integer.map { .string(Timestamp.iso8601(milliseconds: $0)) } ?? .null }
        func json(_ value: StoreValue) -> JSONValue { value.text.flatMap { try? JSONValue.parse(Array($0.utf8)) } ?? .null }
        let references = try db.query("SELECT provider, ref FROM refs WHERE order_id=? AND merchant=?", [k[1], k[0]]).map {
            JSONValue.object(["provider": .string($0[0].text ?? ""), "reference": .string($0[1].text ?? "")])
        }
        let callbacks = try db.query("SELECT event, at FROM callback_events WHERE order_id=? AND merchant=? ORDER BY at", [k[1], k[0]]).map {
            JSONValue.object(["event": .string($0[0].text ?? ""), "at": time($0[1])])
        }
        let outcomes = try db.query(
            LedgerStore.outcomesOfOrder, [k[1], k[0], .integer(Int64(outcomesLimit))]
        ).compactMap { row -> JSONValue? in
            guard case .object(let outcome) = json(row[2]) else { return nil }
            return .object(["seq": row[0].integer.map(JSONValue.integer) ?? .null, "loggedAt": time(row[1]), "outcome": .object(outcome)])
        }
        let audit = try db.query(
            "SELECT at, action, actor, operator_key, reason, detail FROM order_audit WHERE order_id=? AND merchant=? ORDER BY at", [k[1], k[0]]
        ).map { a in
            JSONValue.object([
                "at": time(a[0]), "action": .string(a[1].text ?? ""), "by": .string(a[2].text ?? ""),
                "operatorKey": a[3].text.map(JSONValue.string) ?? .null, "reason": .string(a[4].text ?? ""), "detail": json(a[5]),
            ])
        }
        let order = json(row[3])
        var story: [String: JSONValue] = [:]
        // A refund names what it gives back; an order that was refunded, what its refunds give.
        if let target = try db.query(
            "SELECT original_order_id, capture_reference, amount, currency FROM refunds WHERE merchant=? AND order_id=?", k
        ).first {
            story["refund"] = .object([
                "refundOf": .string(target[0].text ?? ""), "capture": .string(target[1].text ?? ""),
                "amount": target[2].integer.map(JSONValue.integer) ?? .null, "currency": .string(target[3].text ?? ""),
            ])
        }
        let refunds = try db.query(
            """
            SELECT r.order_id, r.capture_reference, r.amount, r.currency, o.outcome FROM refunds r
            LEFT JOIN orders o ON o.merchant=r.merchant AND o.order_id=r.order_id WHERE r.merchant=? AND r.original_order_id=? ORDER BY r.order_id
            """, k)
        if !refunds.isEmpty {
            var refunded: Int64 = 0
            let listed = refunds.map { refund -> JSONValue in
                let status = json(refund[4])["status"]?.stringValue
                if status == "succeeded" { refunded += refund[2].integer ?? 0 }
                return .object([
                    "orderId": .string(refund[0].text ?? ""), "capture": .string(refund[1].text ?? ""),
                    "amount": refund[2].integer.map(JSONValue.integer) ?? .null, "currency": .string(refund[3].text ?? ""),
                    "status": status.map(JSONValue.string) ?? "in flight",
                ])
            }
            story["refunds"] = .object(["refunded": .integer(refunded), "orders": .array(listed)])
        }
        return .object(
            story.merging(
                orderStoryFields(key, row: row, order: order, references: references, callbacks: callbacks, outcomes: outcomes, audit: audit)
            ) {
                first, _ in first
            })
    }

    private func orderStoryFields(
        _ key: OrderKey, row: [StoreValue], order: JSONValue, references: [JSONValue], callbacks: [JSONValue], outcomes: [JSONValue],
        audit: [JSONValue]
    ) -> [String: JSONValue] {
        func time(_ value: StoreValue) -> JSONValue { value.integer.map { .string(Timestamp.iso8601(milliseconds: $0)) } ?? .null }
        func json(_ value: StoreValue) -> JSONValue { value.text.flatMap { try? JSONValue.parse(Array($0.utf8)) } ?? .null }
        return [
            "merchant": .string(key.merchant), "orderId": .string(key.orderId), "state": .string(row[0].text ?? ""),
            "provider": .string(row[1].text ?? ""), "operation": .string(row[2].text ?? ""),
            "times": .object([
                "acceptedAt": time(row[5]), "lastDispatchedAt": time(row[6]), "pendingAt": time(row[8]), "endedAt": time(row[14]),
                "correctedAt": time(row[13]),
            ]),
            "dispatches": .object([
                "generation": row[7].integer.map(JSONValue.integer) ?? .null, "claimed": row[10].integer.map(JSONValue.integer) ?? .null,
                "claimedGeneration": row[11].integer.map(JSONValue.integer) ?? .null, "claimedAt": time(row[12]), "leaseUntil": time(row[9]),
            ]),
            "order": order == .null ? .string("compacted by retention") : LedgerStore.redacted(order),
            "outcome": json(row[4]), "references": .array(references), "callbacks": .array(callbacks), "outcomes": .array(outcomes),
            "audit": .array(audit),
        ]
    }

    /// The orders `filter` names, oldest first, each as a summary line's fields.
    package func listOrders(_ filter: AdminRequest.OrderFilter, now: Int64) throws -> [JSONValue] {
        let acceptedBefore = filter.olderThanMilliseconds.map { now - $0 } ?? Int64.max
        let rows = try read {
            try db.query(
                """
                SELECT merchant, order_id, state, provider, operation, accepted_at, dispatches, pending_at, ended_at, outcome FROM orders
                WHERE (CAST(? AS TEXT) IS NULL OR state = ?) AND (CAST(? AS TEXT) IS NULL OR merchant = ?)
                  AND (CAST(? AS TEXT) IS NULL OR provider = ?) AND (CAST(? AS TEXT) IS NULL OR operation = ?) AND accepted_at <= ?
                ORDER BY accepted_at LIMIT ?
                """,
                [
                    filter.state.map(StoreValue.text) ?? .null, filter.state.map(StoreValue.text) ?? .null,
                    filter.merchant.map(StoreValue.text) ?? .null, filter.merchant.map(StoreValue.text) ?? .null,
                    filter.provider.map(StoreValue.text) ?? .null, filter.provider.map(StoreValue.text) ?? .null,
                    filter.operation.map(StoreValue.text) ?? .null, filter.operation.map(StoreValue.text) ?? .null,
                    .integer(acceptedBefore), .integer(Int64(filter.limit)),
                ])
        }
        return rows.map { row in
            let outcome = row[9].text.flatMap { try? JSONValue.parse(Array($0.utf8)) }
            return .object([
                "merchant": .string(row[0].text ?? ""), "orderId": .string(row[1].text ?? ""), "state": .string(row[2].text ?? ""),
                "provider": .string(row[3].text ?? ""), "operation": .string(row[4].text ?? ""),
                "acceptedAt": row[5].integer.map { .string(Timestamp.iso8601(milliseconds: $0)) } ?? .null,
                "ageSeconds": row[5].integer.map { .integer(max(0, now - $0) / 1000) } ?? .null,
                "generation": row[6].integer.map(JSONValue.integer) ?? .null,
                "status": outcome?["status"] ?? .null, "code": outcome?["error"]?["code"] ?? .null,
            ])
        }
    }
}

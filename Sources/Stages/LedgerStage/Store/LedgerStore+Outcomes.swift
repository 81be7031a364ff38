import PaypipeCore
import StageWire

extension LedgerStore {
    /// The outcome's text with `"epoch"` (when given) and `"seq"` added. Spliced in before the
    /// closing brace, so that the stage's bytes are not parsed and written again; an outcome that
    /// somehow names a seq or an epoch of its own gets them replaced the long way.
    package static func withSeq(_ serialized: String, _ seq: Int64, epoch: String? = nil) -> String {
        var bytes = Array(serialized.utf8)
        while let last = bytes.last,
            last == UInt8(ascii: " ") || last == UInt8(ascii: "\n") || last == UInt8(ascii: "\r") || last == UInt8(ascii: "\t")
        {
            bytes.removeLast()
        }
        guard bytes.count > 2, bytes.first == UInt8(ascii: "{"), bytes.last == UInt8(ascii: "}"), !names(#""seq""#, in: bytes),
            !names(#""epoch""#, in: bytes)
        else {
            guard case .object(var object)? = try? JSONValue.parse(Array(serialized.utf8)) else { return serialized }
            object["seq"] = .integer(seq)
            if let epoch { object["epoch"] = .string(epoch) } else { object["epoch"] = nil }
            return JSONValue.object(object).serialized
        }
        bytes.removeLast()
        if let epoch {
            bytes.append(contentsOf: #","epoch":""#.utf8)
            bytes.append(contentsOf: epoch.utf8)
            bytes.append(UInt8(ascii: "\""))
        }
        bytes.append(contentsOf: #","seq":"#.utf8)
        bytes.append(contentsOf: String(seq).utf8)
        bytes.append(UInt8(ascii: "}"))
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Whether `key` (with its quotes) occurs anywhere in `bytes`.
    private static func names(_ key: StaticString, in bytes: [UInt8]) -> Bool {
        let needle = UnsafeBufferPointer(start: key.utf8Start, count: key.utf8CodeUnitCount)
        return bytes.withUnsafeBufferPointer { b in
            guard b.count >= needle.count else { return false }
            for i in 0...(b.count - needle.count) where b[i] == needle[0] {
                if (1..<needle.count).allSatisfy({ b[i + $0] == needle[$0] }) { return true }
            }
            return false
        }
    }

    /// Appends an outcome that belongs to no stored order to the log and returns it with its
    /// `seq`. Call inside `transaction`.
    package func logOutcome(_ serialized: String, key: OrderKey, now: Int64) throws -> String {
        let logged = try stamped(serialized)
        try appendToLog(logged, key: key, now: now)
        return logged.text
    }

    /// Applies an outcome from `source`, if `ResultAuthority` lets that source give it to the
    /// order. `references`: provider references the outcome carries, indexed when the order
    /// becomes pending; `polled`: the order's operation is the pollers' (its order is returned
    /// when it becomes pending). A genuine callback that says money was taken, for an order whose
    /// terminal outcome said none was, supersedes that outcome (a correction). Call inside
    /// `transaction`.
    package func record(
        _ outcome: Outcome, serialized: String, references: [String], polled: Bool, now: Int64, from source: ResultSource
    ) throws -> Recorded {
        let key = (merchant: StoreValue.text(outcome.merchant), orderId: StoreValue.text(outcome.orderId))
        let target = Self.target(of: outcome)
        // Nearly every result is a claim holder's for its open order: one statement, guarded by
        // exactly what `ResultAuthority` would check, applies it without reading the row first
        // (or one for the whole pass: `prepareRecords`).
        if let generation = Self.heldGeneration(outcome, from: source) {
            if let recorded = try recordPrepared(
                outcome, serialized: serialized, references: references, polled: polled, now: now, generation: generation)
            {
                return recorded
            }
            let stamped = try stamped(serialized)
            if try moveHeld(
                key, generation: generation, provider: outcome.provider, operation: outcome.operation, to: target, outcome: stamped.text,
                now: now)
            {
                return try applied(
                    stamped, outcome, from: .open, to: target, references: references, polled: polled, generation: generation, now: now)
            }
        }
        // Under the row's lock on PostgreSQL: another ledger's claim or dispatch cannot land
        // between reading the facts `ResultAuthority` judges and moving the order on them.
        let rows: [[StoreValue]]
        switch db.dialect {
        case .sqlite:
            rows = try db.query(
                "SELECT state, provider, operation, dispatches, claimed_generation, attempts, outcome FROM orders WHERE merchant=? AND order_id=?",
                [key.merchant, key.orderId])
        case .postgres:
            rows = try db.query(
                "SELECT state, provider, operation, dispatches, claimed_generation, attempts, outcome FROM orders WHERE merchant=? AND order_id=? FOR UPDATE",
                [key.merchant, key.orderId])
        }
        guard let row = rows.first, let state = row[0].text.flatMap(State.init(rawValue:)) else {
            return Recorded(refused: "no such order")
        }
        let facts = OrderFacts(
            state: state, provider: row[1].text, operation: row[2].text, generation: row[3].integer ?? 1, claimedGeneration: row[4].integer,
            attempts: row[5].integer ?? 0)
        if let refusal = ResultAuthority.refusal(outcome, from: source, order: facts, polled: polled) { return Recorded(refused: refusal) }
        if state == .terminal, source == .callback {
            return try correct(key, stored: row[6].text, with: outcome, now: now)
        }
        guard Self.allows(target, from: state) else { return Recorded() }
        let stamped = try stamped(serialized)
        guard try move(key, from: state, to: target, outcome: stamped.text, now: now) else { return Recorded() }
        return try applied(stamped, outcome, from: state, to: target, references: references, polled: polled, generation: facts.generation, now: now)
    }

    /// What follows an outcome's state change: its log entry, and for an order that has just
    /// become pending its references and, for the pollers, its order.
    private func applied(
        _ stamped: (seq: Int64, text: String), _ outcome: Outcome, from state: State, to target: State, references: [String], polled: Bool,
        generation: Int64, now: Int64
    ) throws -> Recorded {
        moved(from: state, to: target)
        let orderKey = OrderKey(merchant: outcome.merchant, orderId: outcome.orderId)
        try appendToLog(stamped, key: orderKey, now: now)
        // Already pending (a redelivered order's second pending outcome): forwarded, nothing else changes.
        guard target == .pending, state != .pending else { return Recorded(emit: stamped.text) }
        try index(references, provider: outcome.provider, key: orderKey)
        guard polled else { return Recorded(emit: stamped.text) }
        let json = try db.query("SELECT order_json FROM orders WHERE merchant=? AND order_id=?", [.text(orderKey.merchant), .text(orderKey.orderId)])
            .first?[0].text
        return Recorded(emit: stamped.text, becamePending: json.map { Pending(json: $0, since: now, key: orderKey, generation: generation) })
    }

    /// The holder of an open order's claim gives it an outcome of its own provider and operation.
    private func moveHeld(
        _ key: (merchant: StoreValue, orderId: StoreValue), generation: Int64, provider: String, operation: String, to target: State,
        outcome: String, now: Int64
    ) throws -> Bool {
        let holder: [StoreValue] = [key.merchant, key.orderId, .integer(generation), .text(provider), .text(operation)]
        let moved =
            switch target {
            case .terminal: try db.write(Self.endHeld, [.text(outcome), .integer(now)] + holder)
            case .pending: try db.write(Self.pendHeld, [.text(outcome), .integer(now), .integer(now)] + holder)
            case .review, .unknown, .open: try db.write(Self.markHeld, [.text(target.rawValue), .text(outcome)] + holder)
            }
        return moved == 1
    }

    static let endHeld: StaticString = """
        UPDATE orders SET state='terminal', outcome=?, ended_at=?
        WHERE merchant=? AND order_id=? AND state='open' AND claimed_generation=? AND provider=? AND operation=?
        """
    static let pendHeld: StaticString = """
        UPDATE orders SET state='pending', outcome=?, pending_at=?, dispatched_at=?
        WHERE merchant=? AND order_id=? AND state='open' AND claimed_generation=? AND provider=? AND operation=?
        """
    static let markHeld: StaticString = """
        UPDATE orders SET state=?, outcome=?
        WHERE merchant=? AND order_id=? AND state='open' AND claimed_generation=? AND provider=? AND operation=?
        """

    /// A genuine callback for an order that has ended: when its terminal outcome told upstream
    /// that no money was taken and the callback says money was, the callback's outcome replaces
    /// it, naming what it supersedes, and the order is listed for review; anything else changes
    /// nothing.
    private func correct(_ key: (merchant: StoreValue, orderId: StoreValue), stored: String?, with outcome: Outcome, now: Int64) throws -> Recorded {
        guard let stored, let previous = try? Outcome.parse(Array(stored.utf8)), previous.toldNoMoneyTaken, outcome.saysMoneyTaken else {
            return Recorded()
        }
        var correction = outcome
        correction.supersedes = Outcome.Supersedes(
            seq: (try? JSONValue.parse(Array(stored.utf8)))?["seq"]?.integerValue, status: previous.status, code: previous.error?.code)
        let stamped = try stamped(correction.serialized)
        let corrected = try db.write(
            "UPDATE orders SET outcome=?, corrected_at=? WHERE merchant=? AND order_id=? AND state='terminal'",
            [.text(stamped.text), .integer(now), key.merchant, key.orderId])
        guard corrected == 1 else { return Recorded() }
        try appendToLog(stamped, key: OrderKey(merchant: outcome.merchant, orderId: outcome.orderId), now: now)
        return Recorded(emit: stamped.text, corrected: true)
    }

    /// Which outcomes an order takes in each state. A terminal order keeps its first terminal
    /// outcome, so every copy upstream sees is identical; a pending order stays pending on an
    /// unknown, so that its own resolution (status check, poller) goes on and it is not sent to
    /// be submitted again; an order in review waits for an operator or a genuine callback.
    static func allows(_ target: State, from state: State) -> Bool {
        switch target {
        case .terminal: state != .terminal
        case .review: state == .open || state == .unknown || state == .pending
        case .unknown: state == .open || state == .unknown
        case .pending: state == .open || state == .unknown || state == .pending
        case .open: false
        }
    }

    /// Gives the order `outcome` and moves it from `state` to `target` (a pending order taking
    /// another pending outcome only takes the outcome), if it is still in `state`.
    private func move(
        _ key: (merchant: StoreValue, orderId: StoreValue), from state: State, to target: State, outcome: String, now: Int64
    ) throws -> Bool {
        let text = StoreValue.text(outcome), from = StoreValue.text(state.rawValue)
        let moved =
            switch (target, state) {
            case (.terminal, _):
                try db.write(
                    "UPDATE orders SET state='terminal', outcome=?, ended_at=? WHERE merchant=? AND order_id=? AND state=?",
                    [text, .integer(now), key.merchant, key.orderId, from])
            case (.pending, .pending):
                try db.write("UPDATE orders SET outcome=? WHERE merchant=? AND order_id=? AND state='pending'", [text, key.merchant, key.orderId])
            case (.pending, _):
                try db.write(
                    "UPDATE orders SET state='pending', outcome=?, pending_at=?, dispatched_at=? WHERE merchant=? AND order_id=? AND state=?",
                    [text, .integer(now), .integer(now), key.merchant, key.orderId, from])
            case (.review, _), (.unknown, _), (.open, _):
                try db.write(
                    "UPDATE orders SET state=?, outcome=? WHERE merchant=? AND order_id=? AND state=?",
                    [.text(target.rawValue), text, key.merchant, key.orderId, from])
            }
        return moved == 1
    }

}

extension StoreReads {
    /// Logged outcomes with a seq above `since`, oldest first, at most `limit`; `more` when
    /// further ones follow.
    package func outcomes(after since: Int64, limit: Int) throws -> (outcomes: [(seq: Int64, text: String)], more: Bool) {
        let rows = try db.query(
            "SELECT seq, outcome FROM outcome_log WHERE seq > ? ORDER BY seq LIMIT ?", [.integer(since), .integer(Int64(limit) + 1)])
        let outcomes = rows.prefix(limit).compactMap { row -> (seq: Int64, text: String)? in
            guard let seq = row[0].integer, let text = row[1].text else { return nil }
            return (seq, text)
        }
        return (outcomes, rows.count > limit)
    }

    /// The outcomes of orders in review, then the corrections (orders whose terminal outcome a
    /// genuine callback superseded), at most `limit` in all.
    package func reviewOutcomes(limit: Int) throws -> [String] {
        try db.query(
            """
            SELECT outcome FROM orders WHERE state='review'
            UNION ALL SELECT outcome FROM orders INDEXED BY orders_corrected WHERE corrected_at IS NOT NULL LIMIT ?
            """, [.integer(Int64(limit))]
        ).compactMap { $0[0].text }
    }
}

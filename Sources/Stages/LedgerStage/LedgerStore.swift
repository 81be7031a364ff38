import CSQLite
import PaypipeCore
import StageRuntime
import StageWire

/// The durable record of every accepted order (DESIGN.md "a durable record of every accepted
/// order that has no terminal outcome yet"), in SQLite with WAL. Writes are grouped: one
/// transaction (one fsync) per batch of frames, not per order.
package final class LedgerStore {
    package typealias State = OrderState

    /// What intake found for one order key.
    package enum Admission: Sendable, Equatable {
        /// First time seen: now recorded; dispatch it.
        case new
        /// Seen before: send its latest outcome again (a terminal one is identical bytes every time).
        case duplicate(replay: String)
        /// Seen before, still in progress, no outcome yet: nothing to do.
        case duplicateInFlight
        /// New, but a provider reference it names belongs to another order of its merchant: not
        /// recorded.
        case referenceInUse(String)
    }

    let db: SQLiteConnection
    /// Checks and issues the tokens of dispatch tickets, under the key this store keeps.
    package private(set) var tickets = DispatchTickets(key: (0, 0))

    package init(path: String) throws {
        db = try SQLiteConnection(path: path)
        try db.execute("PRAGMA journal_mode=WAL")
        try db.execute("PRAGMA synchronous=FULL")
        // Every order's row is written three times within seconds (intake, claim, outcome): a
        // longer WAL copies each hot page into the database once per checkpoint instead of
        // several times. The page cache stays at SQLite's default 2 MiB: 8 MiB cost the ledger
        // 7 MiB more at W1's peak and bought nothing, with none or 2,000,000 orders stored
        // (paypipe-ledger-bench), since the partial indexes hold only the orders in flight.
        try db.execute("PRAGMA wal_autocheckpoint=10000")
        try db.execute("PRAGMA cache_size=-2048")
        try db.execute("PRAGMA temp_store=MEMORY")
        // Keys lead with the column that tells rows apart (`order_id`, `ref`). Led by one that
        // nearly every row shares (the merchant, the provider), each comparison in a B-tree seek
        // ties on it and goes SQLite's slow way for the rest of the key: leading with the id
        // cut the store's instructions per W1 order by 5.4 % (paypipe-store-bench under
        // callgrind). Stores created before keep their keys: every statement names both
        // columns, so either order serves it.
        try db.execute("""
            CREATE TABLE IF NOT EXISTS orders(
              merchant TEXT NOT NULL, order_id TEXT NOT NULL, order_json TEXT,
              state TEXT NOT NULL, outcome TEXT, accepted_at INTEGER NOT NULL,
              dispatched_at INTEGER NOT NULL, dispatches INTEGER NOT NULL,
              PRIMARY KEY(order_id, merchant)) WITHOUT ROWID
            """)
        // Added with the callback validator and the Cleeng poller; older ledgers gain the columns.
        let columns = Set(try db.query("PRAGMA table_info(orders)").compactMap { $0[1].text })
        // lease_until: until when a submitter's claim on the order's current dispatch holds.
        // attempts: how many of its dispatches a submitter claimed (took up), the last one being
        // claimed_generation; only those count toward timers.maxDispatches.
        for (name, type) in [
            ("provider", "TEXT"), ("operation", "TEXT"), ("pending_at", "INTEGER"), ("lease_until", "INTEGER"),
            ("attempts", "INTEGER NOT NULL DEFAULT 0"), ("claimed_generation", "INTEGER"),
            // claimed_at: when claimed_generation was first claimed (a lease's longest life counts from it).
            // corrected_at: when a genuine callback superseded a terminal outcome that said no money was taken.
            ("claimed_at", "INTEGER"), ("corrected_at", "INTEGER"),
        ]
        where !columns.contains(name) {
            try db.execute("ALTER TABLE orders ADD COLUMN \(name) \(type)")
        }
        // Partial indexes: an ended order, which in time is nearly every row, is in none of them,
        // so each state change rewrites a few small, hot index pages. Stores from before had
        // full indexes over every row. Only a held lease is indexed (`orders_held`): an order
        // then enters it when claimed and leaves it when it ends, two B-tree writes where
        // `orders_leased`, which also held every unclaimed order, took four.
        try db.execute("""
            DROP INDEX IF EXISTS orders_redelivery;
            DROP INDEX IF EXISTS orders_lease;
            DROP INDEX IF EXISTS orders_async;
            DROP INDEX IF EXISTS orders_leased;
            CREATE INDEX IF NOT EXISTS orders_in_flight ON orders(state, dispatched_at) WHERE state IN ('open','unknown');
            CREATE INDEX IF NOT EXISTS orders_held ON orders(lease_until) WHERE state IN ('open','unknown') AND lease_until IS NOT NULL;
            CREATE INDEX IF NOT EXISTS orders_pending ON orders(provider, operation, pending_at) WHERE state='pending';
            CREATE INDEX IF NOT EXISTS orders_in_review ON orders(state) WHERE state='review';
            CREATE INDEX IF NOT EXISTS orders_corrected ON orders(corrected_at) WHERE corrected_at IS NOT NULL;
            """)
        // Provider references that callbacks name instead of the orderId (PhonePe authRequestId,
        // Nets paymentId), per merchant: two merchants may use the same reference.
        try db.execute("""
            CREATE TABLE IF NOT EXISTS refs(provider TEXT NOT NULL, ref TEXT NOT NULL, merchant TEXT NOT NULL,
              order_id TEXT NOT NULL, PRIMARY KEY(ref, provider, merchant)) WITHOUT ROWID
            """)
        try db.transaction { try keyReferencesByMerchant() }
        // What the store keeps about itself: the key of its dispatch tickets.
        try db.execute("CREATE TABLE IF NOT EXISTS meta(name TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID")
        tickets = DispatchTickets(key: try db.transaction { try ticketKey() })
        // Every authentic callback event already handed on: a provider's redelivery changes nothing.
        try db.execute("""
            CREATE TABLE IF NOT EXISTS callback_events(event TEXT PRIMARY KEY, merchant TEXT NOT NULL,
              order_id TEXT NOT NULL, at INTEGER NOT NULL) WITHOUT ROWID
            """)
        // Every outcome emitted, by seq (PROTOCOL.md §6): upstream replays what it missed.
        // AUTOINCREMENT so that a seq is never handed out twice, even after retention emptied the log.
        try db.execute("CREATE TABLE IF NOT EXISTS outcome_log(seq INTEGER PRIMARY KEY AUTOINCREMENT, at INTEGER NOT NULL, outcome TEXT NOT NULL)")
        // No index on `at`: retention takes the lowest seqs first (`pruneOutcomes`), so the index
        // was one more B-tree insert per logged outcome for nothing. Stores from before had it.
        try db.execute("DROP INDEX IF EXISTS outcome_log_at")
        try db.transaction { try addRetentionAndRunningCounts() }
    }

    /// When terminal orders ended (for retention), and how many orders are in each state (see
    /// `countRunning`). Stores from before gain the end times: their terminal orders count as
    /// ended now, so none is compacted early.
    private func addRetentionAndRunningCounts() throws {
        let columns = Set(try db.query("PRAGMA table_info(orders)").compactMap { $0[1].text })
        if !columns.contains("ended_at") {
            try db.execute("ALTER TABLE orders ADD COLUMN ended_at INTEGER")
            try db.query("UPDATE orders SET ended_at=? WHERE state='terminal'", [.integer(Timestamp.nowMilliseconds())])
        }
        // The two statements that end an order set its end time themselves (`admitRejection`,
        // `record`): stores from before had triggers do it, which ran a second update of the
        // row per order (about a tenth of SQLite's instructions per order, by callgrind).
        try db.execute("""
            DROP TRIGGER IF EXISTS orders_ended_on_insert;
            DROP TRIGGER IF EXISTS orders_ended_on_update;
            CREATE INDEX IF NOT EXISTS orders_to_compact ON orders(ended_at) WHERE order_json IS NOT NULL AND ended_at IS NOT NULL;
            CREATE INDEX IF NOT EXISTS orders_ended ON orders(ended_at) WHERE ended_at IS NOT NULL;
            CREATE INDEX IF NOT EXISTS refs_order ON refs(order_id, merchant);
            CREATE INDEX IF NOT EXISTS callback_events_order ON callback_events(order_id, merchant);
            """)
        try countRunning()
    }

    /// Stores from before keyed references by (ref, provider) alone, so a second merchant's order
    /// naming the same reference lost its index entry silently.
    private func keyReferencesByMerchant() throws {
        let keyColumns = try db.query("PRAGMA table_info(refs)").filter { ($0[5].integer ?? 0) > 0 }.compactMap { $0[1].text }
        guard !keyColumns.contains("merchant") else { return }
        try db.execute("""
            CREATE TABLE refs_by_merchant(provider TEXT NOT NULL, ref TEXT NOT NULL, merchant TEXT NOT NULL,
              order_id TEXT NOT NULL, PRIMARY KEY(ref, provider, merchant)) WITHOUT ROWID;
            INSERT INTO refs_by_merchant(provider, ref, merchant, order_id) SELECT provider, ref, merchant, order_id FROM refs;
            DROP TABLE refs;
            ALTER TABLE refs_by_merchant RENAME TO refs;
            """)
    }

    /// The key of this store's dispatch tickets, made on first use.
    private func ticketKey() throws -> (UInt64, UInt64) {
        if let text = try db.query("SELECT value FROM meta WHERE name='ticket_key'").first?[0].text {
            let parts = text.split(separator: ":").compactMap { UInt64($0, radix: 16) }
            guard parts.count == 2 else { throw SQLiteError(message: "meta.ticket_key is corrupt") }
            return (parts[0], parts[1])
        }
        let key = DispatchTickets.newKey()
        try db.query(
            "INSERT INTO meta(name, value) VALUES('ticket_key', ?)", [.text(String(key.0, radix: 16) + ":" + String(key.1, radix: 16))])
        return key
    }

    /// How many orders are in each state but `terminal`: counted once on opening (by the partial
    /// indexes, so ended orders are not scanned), then kept here by the statements that change a
    /// state (`moved`), with no write to the WAL and no trigger per state change; a transaction
    /// that fails puts them back. Stores from before kept them in a table by triggers; those go.
    private func countRunning() throws {
        try db.execute("""
            DROP TRIGGER IF EXISTS orders_count_insert;
            DROP TRIGGER IF EXISTS orders_count_update;
            DROP TRIGGER IF EXISTS orders_count_delete;
            DROP TABLE IF EXISTS main.state_counts;
            """)
        let rows = try db.query("""
            SELECT state, COUNT(*) FROM orders WHERE state IN ('open','unknown') GROUP BY state
            UNION ALL SELECT 'pending', COUNT(*) FROM orders WHERE state='pending'
            UNION ALL SELECT 'review', COUNT(*) FROM orders WHERE state='review'
            """)
        running = [:]
        for row in rows {
            if let state = row[0].text.flatMap(State.init(rawValue:)), let n = row[1].integer { running[state] = Int(n) }
        }
    }

    private var running: [State: Int] = [:]

    /// One order changed from `old` (nil: it was not stored) to `new`.
    private func moved(from old: State?, to new: State) {
        guard old != new else { return }
        if let old, old != .terminal { running[old, default: 0] -= 1 }
        if new != .terminal { running[new, default: 0] += 1 }
    }

    /// `body` in one transaction. Called inside another (a group commit), `body` joins it and
    /// commits or rolls back with the rest.
    package func transaction<T>(_ body: () throws -> T) throws -> T {
        if inTransaction { return try body() }
        inTransaction = true
        // Read again in every transaction: a rolled-back one may have taken seqs it never wrote.
        nextSeq = nil
        defer {
            inTransaction = false
            nextSeq = nil
        }
        let counted = running
        do {
            return try db.transaction(body)
        } catch {
            running = counted
            throw error
        }
    }

    private var inTransaction = false

    /// The seq the next logged outcome gets, once read from the log's AUTOINCREMENT counter.
    private var nextSeq: Int64?

    /// `serialized` as it is logged and emitted: with the next seq. The seq is taken only by
    /// `appendToLog`, so an outcome that changes nothing does not use one up.
    private func stamped(_ serialized: String) throws -> (seq: Int64, text: String) {
        let seq: Int64
        if let nextSeq {
            seq = nextSeq
        } else {
            seq = (try db.query("SELECT seq FROM sqlite_sequence WHERE name='outcome_log'").first?[0].integer ?? 0) + 1
            nextSeq = seq
        }
        return (seq, Self.withSeq(serialized, seq))
    }

    /// The outcome's text with `"seq"` added. Spliced in before the closing brace, so that the
    /// stage's bytes are not parsed and written again; an outcome that somehow names a seq of
    /// its own gets it replaced the long way.
    package static func withSeq(_ serialized: String, _ seq: Int64) -> String {
        var bytes = Array(serialized.utf8)
        while let last = bytes.last, last == UInt8(ascii: " ") || last == UInt8(ascii: "\n") || last == UInt8(ascii: "\r") || last == UInt8(ascii: "\t") {
            bytes.removeLast()
        }
        let namesSeq = bytes.withUnsafeBufferPointer { b in
            let quote = UInt8(ascii: "\""), s = UInt8(ascii: "s"), e = UInt8(ascii: "e"), q = UInt8(ascii: "q")
            var i = 0
            while i + 4 < b.count {
                if b[i] == quote, b[i + 1] == s, b[i + 2] == e, b[i + 3] == q, b[i + 4] == quote { return true }
                i += 1
            }
            return false
        }
        guard bytes.count > 2, bytes.first == UInt8(ascii: "{"), bytes.last == UInt8(ascii: "}"), !namesSeq else {
            guard case .object(var object)? = try? JSONValue.parse(Array(serialized.utf8)) else { return serialized }
            object["seq"] = .integer(seq)
            return JSONValue.object(object).serialized
        }
        bytes.removeLast()
        bytes.append(contentsOf: #","seq":"#.utf8)
        bytes.append(contentsOf: String(seq).utf8)
        bytes.append(UInt8(ascii: "}"))
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Logs a stamped outcome under its seq.
    private func appendToLog(_ stamped: (seq: Int64, text: String), now: Int64) throws {
        try db.query("INSERT INTO outcome_log(seq, at, outcome) VALUES(?,?,?)", [.integer(stamped.seq), .integer(now), .text(stamped.text)])
        nextSeq = stamped.seq + 1
    }

    /// Records a valid order unless its key is known, with the provider references a callback
    /// may name it by (indexed now, before any request leaves). Call inside `transaction`.
    package func admit(_ order: Order, json: String, references: [String], now: Int64) throws -> Admission {
        try db.query(
            "INSERT OR IGNORE INTO orders(merchant, order_id, order_json, state, accepted_at, dispatched_at, dispatches, provider, operation) VALUES(?,?,?,'open',?,?,1,?,?)",
            [.text(order.merchant), .text(order.orderId), .text(json), .integer(now), .integer(now),
             .text(order.provider.rawValue), .text(order.operation.rawValue)])
        guard db.changes == 1 else { return try existing(merchant: order.merchant, orderId: order.orderId) }
        if let taken = try index(references, provider: order.provider.rawValue, key: order.key) {
            try db.query("DELETE FROM refs WHERE merchant=? AND order_id=?", [.text(order.merchant), .text(order.orderId)])
            try db.query("DELETE FROM orders WHERE merchant=? AND order_id=?", [.text(order.merchant), .text(order.orderId)])
            return .referenceInUse(taken)
        }
        moved(from: nil, to: .open)
        return .new
    }

    /// Indexes the references under `key`; returns the first one that another order of the
    /// same merchant already holds (it stays that order's).
    @discardableResult
    private func index(_ references: [String], provider: String, key: OrderKey) throws -> String? {
        for reference in references {
            try db.query(
                "INSERT OR IGNORE INTO refs(provider, ref, merchant, order_id) VALUES(?,?,?,?)",
                [.text(provider), .text(reference), .text(key.merchant), .text(key.orderId)])
            guard db.changes == 0 else { continue }
            let owner = try db.query(
                "SELECT order_id FROM refs WHERE ref=? AND provider=? AND merchant=?", [.text(reference), .text(provider), .text(key.merchant)])
            if let other = owner.first?[0].text, other != key.orderId { return reference }
        }
        return nil
    }

    /// What intake made of a rejected order whose key could be read.
    package enum RejectionAdmission: Sendable, Equatable {
        /// The key was new: the rejection is its terminal outcome, logged; emit these bytes.
        case recorded(String)
        /// The key was known: what a repeated order gets.
        case known(Admission)
    }

    /// Records an intake rejection as the key's terminal outcome, unless the key already exists.
    /// Call inside `transaction`.
    package func admitRejection(_ key: OrderKey, outcome: String, now: Int64) throws -> RejectionAdmission {
        let logged = try stamped(outcome)
        try db.query(
            "INSERT OR IGNORE INTO orders(merchant, order_id, order_json, state, outcome, accepted_at, dispatched_at, dispatches, ended_at) VALUES(?,?,NULL,'terminal',?,?,?,0,?)",
            [.text(key.merchant), .text(key.orderId), .text(logged.text), .integer(now), .integer(now), .integer(now)])
        guard db.changes == 1 else { return .known(try existing(merchant: key.merchant, orderId: key.orderId)) }
        try appendToLog(logged, now: now)
        return .recorded(logged.text)
    }

    /// Appends an outcome that belongs to no stored order to the log and returns it with its
    /// `seq`. Call inside `transaction`.
    package func logOutcome(_ serialized: String, now: Int64) throws -> String {
        let logged = try stamped(serialized)
        try appendToLog(logged, now: now)
        return logged.text
    }

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

    /// Removes the log's oldest outcomes that were recorded before `cutoff`, lowest seq first and
    /// at most `limit`; returns how many. The one writer hands out seqs in commit order, so the
    /// lowest seqs are the oldest, and retention stops at the first younger one (after the wall
    /// clock stepped back, what follows it waits until it is old too: kept longer, never less).
    /// The orders keep their latest outcome, so repeated orders are still answered.
    package func pruneOutcomes(recordedBefore cutoff: Int64, limit: Int) throws -> Int {
        // The oldest first, alone: most ticks find nothing to remove and read one row.
        guard let oldest = try db.query("SELECT at FROM outcome_log ORDER BY seq LIMIT 1").first?[0].integer, oldest < cutoff else {
            return 0
        }
        var last: Int64?
        for row in try db.query("SELECT seq, at FROM outcome_log ORDER BY seq LIMIT ?", [.integer(Int64(limit))]) {
            guard let seq = row[0].integer, let at = row[1].integer, at < cutoff else { break }
            last = seq
        }
        guard let last else { return 0 }
        try db.query("DELETE FROM outcome_log WHERE seq <= ?", [.integer(last)])
        return db.changes
    }

    private func existing(merchant: String, orderId: String) throws -> Admission {
        let rows = try db.query("SELECT state, outcome FROM orders WHERE merchant=? AND order_id=?", [.text(merchant), .text(orderId)])
        if let row = rows.first, let outcome = row[1].text { return .duplicate(replay: outcome) }
        return .duplicateInFlight
    }

    /// What recording an outcome led to.
    package struct Recorded: Sendable, Equatable {
        /// The bytes to send upstream, or nil when the order was already terminal (a second
        /// terminal outcome from a redelivery is dropped: the first one stands, so every copy
        /// upstream sees is identical) or the outcome was refused.
        package var emit: String?
        /// Set when a Cleeng order has just become pending.
        package var becamePending: Pending?
        /// Why the outcome was not the sender's to give (`ResultAuthority`); nothing changed.
        package var refused: String?
        /// The outcome superseded a terminal one that said no money was taken (a correction).
        package var corrected = false
    }

    package struct Pending: Sendable, Equatable {
        package var json: String
        package var since: Int64
        package var key: OrderKey
        package var generation: Int64
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
        let key = (merchant: SQLiteValue.text(outcome.merchant), orderId: SQLiteValue.text(outcome.orderId))
        let target: State =
            if outcome.status.isTerminal { .terminal }
            else if outcome.status == .unknown { outcome.error?.needsReview == true ? .review : .unknown }
            else { .pending }
        // Nearly every result is a claim holder's for its open order: one statement, guarded by
        // exactly what `ResultAuthority` would check, applies it without reading the row first.
        if case .stage(let role, .submit, let ticket, true) = source, role == nil || role == .submitter, outcome.status != .rejected {
            let stamped = try stamped(serialized)
            if try moveHeld(key, generation: ticket.generation, provider: outcome.provider, operation: outcome.operation, to: target, outcome: stamped.text, now: now) {
                return try applied(stamped, outcome, from: .open, to: target, references: references, polled: polled, generation: ticket.generation, now: now)
            }
        }
        let rows = try db.query(
            "SELECT state, provider, operation, dispatches, claimed_generation, attempts, outcome FROM orders WHERE merchant=? AND order_id=?",
            [key.merchant, key.orderId])
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
        try appendToLog(stamped, now: now)
        // Already pending (a redelivered order's second pending outcome): forwarded, nothing else changes.
        guard target == .pending, state != .pending else { return Recorded(emit: stamped.text) }
        let orderKey = OrderKey(merchant: outcome.merchant, orderId: outcome.orderId)
        try index(references, provider: outcome.provider, key: orderKey)
        guard polled else { return Recorded(emit: stamped.text) }
        let json = try db.query("SELECT order_json FROM orders WHERE merchant=? AND order_id=?", [.text(orderKey.merchant), .text(orderKey.orderId)])
            .first?[0].text
        return Recorded(emit: stamped.text, becamePending: json.map { Pending(json: $0, since: now, key: orderKey, generation: generation) })
    }

    /// The holder of an open order's claim gives it an outcome of its own provider and operation.
    private func moveHeld(
        _ key: (merchant: SQLiteValue, orderId: SQLiteValue), generation: Int64, provider: String, operation: String, to target: State,
        outcome: String, now: Int64
    ) throws -> Bool {
        let holder: [SQLiteValue] = [key.merchant, key.orderId, .integer(generation), .text(provider), .text(operation)]
        switch target {
        case .terminal:
            try db.query(Self.endHeld, [.text(outcome), .integer(now)] + holder)
        case .pending:
            try db.query(Self.pendHeld, [.text(outcome), .integer(now), .integer(now)] + holder)
        case .review, .unknown, .open:
            try db.query(Self.markHeld, [.text(target.rawValue), .text(outcome)] + holder)
        }
        return db.changes == 1
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
    private func correct(_ key: (merchant: SQLiteValue, orderId: SQLiteValue), stored: String?, with outcome: Outcome, now: Int64) throws -> Recorded {
        guard let stored, let previous = try? Outcome.parse(Array(stored.utf8)), previous.toldNoMoneyTaken, outcome.saysMoneyTaken else {
            return Recorded()
        }
        var correction = outcome
        correction.supersedes = Outcome.Supersedes(
            seq: (try? JSONValue.parse(Array(stored.utf8)))?["seq"]?.integerValue, status: previous.status, code: previous.error?.code)
        let stamped = try stamped(correction.serialized)
        try db.query(
            "UPDATE orders SET outcome=?, corrected_at=? WHERE merchant=? AND order_id=? AND state='terminal'",
            [.text(stamped.text), .integer(now), key.merchant, key.orderId])
        guard db.changes == 1 else { return Recorded() }
        try appendToLog(stamped, now: now)
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
    private func move(_ key: (merchant: SQLiteValue, orderId: SQLiteValue), from state: State, to target: State, outcome: String, now: Int64) throws -> Bool {
        let text = SQLiteValue.text(outcome), from = SQLiteValue.text(state.rawValue)
        switch (target, state) {
        case (.terminal, _):
            try db.query(
                "UPDATE orders SET state='terminal', outcome=?, ended_at=? WHERE merchant=? AND order_id=? AND state=?",
                [text, .integer(now), key.merchant, key.orderId, from])
        case (.pending, .pending):
            try db.query("UPDATE orders SET outcome=? WHERE merchant=? AND order_id=? AND state='pending'", [text, key.merchant, key.orderId])
        case (.pending, _):
            try db.query(
                "UPDATE orders SET state='pending', outcome=?, pending_at=?, dispatched_at=? WHERE merchant=? AND order_id=? AND state=?",
                [text, .integer(now), .integer(now), key.merchant, key.orderId, from])
        case (.review, _), (.unknown, _), (.open, _):
            try db.query("UPDATE orders SET state=?, outcome=? WHERE merchant=? AND order_id=? AND state=?", [.text(target.rawValue), text, key.merchant, key.orderId, from])
        }
        return db.changes == 1
    }

    /// A stalled order dispatched again, as its new generation.
    package struct Redispatch: Sendable, Equatable {
        package var json: String
        package var acceptedAt: Int64
        package var key: OrderKey
        package var generation: Int64
    }

    /// A stalled order that has had its dispatches: it goes to review instead.
    package struct Exhausted: Sendable, Equatable {
        package var key: OrderKey
        package var provider: String
        package var operation: String
        /// Dispatches a submitter claimed and then lost (it died, or never answered).
        package var attempts: Int64
        /// Why it goes to review.
        package var reason: String
    }

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
            Self.stalledQuery,
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
            try markDispatched(merchant: merchant, orderId: orderId, now: now)
            redispatch.append(Redispatch(json: json, acceptedAt: acceptedAt, key: key, generation: dispatches + 1))
        }
        return (redispatch, exhausted)
    }

    /// A new dispatch is a new generation: the previous holder's lease ends with it.
    func markDispatched(merchant: String, orderId: String, now: Int64) throws {
        try db.query(
            "UPDATE orders SET dispatched_at=?, dispatches=dispatches+1, lease_until=NULL, claimed_generation=NULL, claimed_at=NULL WHERE merchant=? AND order_id=?",
            [.integer(now), .text(merchant), .text(orderId)])
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
        try claims.map { claim in
            guard tickets.isValid(claim.ticket, for: claim.key) else { return false }
            let g = SQLiteValue.integer(claim.generation)
            try db.query(
                """
                UPDATE orders SET lease_until=?, attempts=attempts + (claimed_generation IS NOT ?),
                  claimed_at=CASE WHEN claimed_generation IS ? THEN COALESCE(claimed_at, ?) ELSE ? END, claimed_generation=?
                WHERE merchant=? AND order_id=? AND state IN ('open','unknown')
                  AND ((claimed_generation = ? AND COALESCE(claimed_at, ?) > ?)
                       OR (claimed_generation IS NULL AND ? <= dispatches AND (? = dispatches OR attempts = 0 OR ? >= 2)))
                """,
                [.integer(until), g, g, .integer(now), .integer(now), g, .text(claim.key.merchant), .text(claim.key.orderId),
                 g, .integer(now), .integer(now - maxLife), g, g, g])
            return db.changes == 1
        }
    }

    /// Every held lease runs until `until`: after a ledger restart its holders get a whole lease
    /// to renew, so an outage of the ledger alone is not taken for their death. Leases are timed
    /// on the ledger's monotonic clock, which starts anew with each process, so a lease stored by
    /// the previous one is measured again from now, whichever way the wall clock moved between.
    package func extendHeldLeases(until: Int64) throws {
        try db.query(Self.extendHeldLeasesStatement, [.integer(until), .integer(until)])
    }

    static let extendHeldLeasesStatement: StaticString =
        "UPDATE orders INDEXED BY orders_held SET lease_until=? WHERE state IN ('open','unknown') AND lease_until IS NOT NULL AND lease_until <> ?"

    /// Unclaimed dispatches older than a cutoff (with the backoff of `stalled`), then lapsed leases.
    static let stalledQuery: StaticString = """
        SELECT merchant, order_id, order_json, accepted_at, dispatches, provider, operation, attempts, claimed_at FROM orders
        WHERE state IN ('open','unknown') AND order_json IS NOT NULL AND lease_until IS NULL AND dispatched_at < ?
          AND dispatched_at < ? - ? * ((1 << MIN(MAX(dispatches - attempts, 1) - 1, 5)) - 1)
        UNION ALL
        SELECT merchant, order_id, order_json, accepted_at, dispatches, provider, operation, attempts, claimed_at FROM orders INDEXED BY orders_held
        WHERE state IN ('open','unknown') AND order_json IS NOT NULL AND lease_until < ?
        LIMIT ?
        """

    /// How SQLite runs the statements that look for work by time, by name: each must search
    /// its partial index, never read every order in flight.
    package func queryPlans() throws -> [String: [String]] {
        ["stalled": try db.queryPlan(Self.stalledQuery), "extendHeldLeases": try db.queryPlan(Self.extendHeldLeasesStatement)]
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

    /// How many orders are in each state but `terminal`, for the states that have any (the
    /// running counts: no scan of the orders).
    package func counts() throws -> [State: Int] {
        running.filter { $0.value > 0 }
    }
}

extension LedgerStore {
    /// Terminal orders that ended before `cutoff` lose their contents, provider references and
    /// callback events, at most `limit` of them; the key and its outcome stay, so a repeated
    /// order is still answered. Returns how many. Call inside `transaction`.
    package func compactOrders(endedBefore cutoff: Int64, limit: Int) throws -> Int {
        try retire(
            // By the index of uncompacted orders only: compacted ones keep their end time for years.
            "SELECT merchant, order_id FROM orders INDEXED BY orders_to_compact WHERE order_json IS NOT NULL AND ended_at < ? ORDER BY ended_at LIMIT ?",
            cutoff: cutoff, limit: limit, then: "UPDATE orders SET order_json=NULL WHERE merchant=? AND order_id=?")
    }

    /// Terminal orders that ended before `cutoff` are forgotten, at most `limit` of them: the
    /// same key is then a new order. Returns how many. Call inside `transaction`.
    package func forgetOrders(endedBefore cutoff: Int64, limit: Int) throws -> Int {
        try retire(
            "SELECT merchant, order_id FROM orders WHERE ended_at < ? ORDER BY ended_at LIMIT ?",
            cutoff: cutoff, limit: limit, then: "DELETE FROM orders WHERE merchant=? AND order_id=?")
    }

    /// The orders `selection` finds lose their references and callback events, then `statement`
    /// runs on each key.
    private func retire(_ selection: StaticString, cutoff: Int64, limit: Int, then statement: StaticString) throws -> Int {
        let keys = try db.query(selection, [.integer(cutoff), .integer(Int64(limit))])
        for key in keys {
            try db.query("DELETE FROM refs WHERE merchant=? AND order_id=?", key)
            try db.query("DELETE FROM callback_events WHERE merchant=? AND order_id=?", key)
            try db.query(statement, key)
        }
        return keys.count
    }
}

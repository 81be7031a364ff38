import CSQLite
import PaypipeCore
import StageRuntime
import StageWire

/// The durable record of every accepted order, in SQLite with WAL. Writes are grouped: one
/// transaction (one fsync) per batch of frames, not per order.
package final class LedgerStore: LedgerStorage {
    let db: SQLiteConnection
    /// Checks and issues the tokens of dispatch tickets, under the key this store keeps.
    package private(set) var tickets = DispatchTickets(key: (0, 0))

    package init(path: String) throws {
        db = try SQLiteConnection(path: path)
        try db.execute("PRAGMA journal_mode=WAL")
        try db.execute("PRAGMA synchronous=FULL")
        // Every order's row is written three times within seconds (intake, claim, outcome): a
        // longer WAL copies each hot page into the database once per checkpoint instead of
        // several times. The page cache stays at SQLite's default 2 MiB: the partial indexes
        // hold only the orders in flight, so a larger cache would cost memory and buy nothing,
        // however many orders are stored.
        try db.execute("PRAGMA wal_autocheckpoint=10000")
        try db.execute("PRAGMA cache_size=-2048")
        try db.execute("PRAGMA temp_store=MEMORY")
        tickets = DispatchTickets(key: try createSchema())
    }

    /// How many orders are in each state but `terminal`: counted once on opening (by the partial
    /// indexes, so ended orders are not scanned), then kept here by the statements that change a
    /// state (`moved`), with no write to the WAL and no trigger per state change; a transaction
    /// that fails puts them back. A store of an earlier release that keeps them in a table by
    /// triggers loses both.
    func countRunning() throws {
        try db.execute(
            """
            DROP TRIGGER IF EXISTS orders_count_insert;
            DROP TRIGGER IF EXISTS orders_count_update;
            DROP TRIGGER IF EXISTS orders_count_delete;
            DROP TABLE IF EXISTS main.state_counts;
            """)
        let rows = try db.query(
            """
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
    func moved(from old: State?, to new: State) {
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
    func stamped(_ serialized: String) throws -> (seq: Int64, text: String) {
        let seq: Int64
        if let nextSeq {
            seq = nextSeq
        } else {
            seq = (try db.query("SELECT seq FROM sqlite_sequence WHERE name='outcome_log'").first?[0].integer ?? 0) + 1
            nextSeq = seq
        }
        return (seq, Self.withSeq(serialized, seq))
    }

    /// Logs a stamped outcome under its seq.
    func appendToLog(_ stamped: (seq: Int64, text: String), now: Int64) throws {
        try db.query("INSERT INTO outcome_log(seq, at, outcome) VALUES(?,?,?)", [.integer(stamped.seq), .integer(now), .text(stamped.text)])
        nextSeq = stamped.seq + 1
    }

    /// How many orders are in each state but `terminal`, for the states that have any (the
    /// running counts: no scan of the orders).
    package func counts() throws -> [State: Int] {
        running.filter { $0.value > 0 }
    }
}

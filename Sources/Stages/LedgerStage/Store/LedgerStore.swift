import Logging
import PaypipeCore
import StageRuntime
import StageWire

/// The durable record of every accepted order, in SQLite (WAL, on the ledger's own disk) or in
/// PostgreSQL: the same statements and rules over either database (`StoreDatabase`). Writes are
/// grouped: one transaction (one commit on disk) per batch of frames, not per order.
package final class LedgerStore: LedgerStorage, StoreReads {
    package let db: any StoreDatabase
    /// Checks and issues the tokens of dispatch tickets, under the key this store keeps.
    package private(set) var tickets = DispatchTickets(key: (0, 0))
    /// This opening of the store (see `openEpoch`), which every outcome logged from now on names.
    package internal(set) var epoch = "" { didSet { currentEpoch.epoch = epoch } }
    /// `epoch`, for the replay answers read on a connection of their own (`StoreReader`).
    package let currentEpoch = CurrentEpoch()
    /// Holds the SQLite file's single-writer lock while the store is open.
    private let writerLock: StoreWriterLock?

    /// How a store is opened: by a ledger that brings its schema forward (`store.migrations`
    /// `onStart`), by one that needs it at this release's schema already (`job`), or by
    /// `paypipe-ledger migrate`, which only migrates and so begins no epoch.
    package enum Opening: Sendable {
        case migrating
        case atSchema
        case forMigration
    }

    /// The SQLite store in the file at `path`, which no other ledger may have open.
    package convenience init(path: String, opening: Opening = .migrating) throws {
        let lock = try StoreWriterLock(storePath: path)
        let db = try SQLiteConnection(path: path)
        try db.execute("PRAGMA journal_mode=WAL")
        try db.execute("PRAGMA synchronous=FULL")
        // Every order's row is written three times within seconds (intake, claim, outcome): a
        // longer WAL copies each hot page into the database once per checkpoint instead of
        // several times. The page cache stays at SQLite's default size: the partial indexes
        // hold only the orders in flight, so a larger cache would cost memory and buy nothing,
        // however many orders are stored.
        try db.execute("PRAGMA wal_autocheckpoint=10000")
        try db.execute("PRAGMA cache_size=-2048")
        try db.execute("PRAGMA temp_store=MEMORY")
        try self.init(db: db, lock: lock, opening: opening)
    }

    /// The store in a PostgreSQL database.
    package convenience init(
        postgres settings: PostgresSettings, opening: Opening = .migrating, logger: Logger = Logger(label: "paypipe-ledger.store")
    ) throws {
        try self.init(db: try PostgresDatabase(settings: settings, logger: logger), lock: nil, opening: opening)
    }

    /// The store `settings` name.
    package convenience init(
        _ settings: StoreSettings, opening: Opening = .migrating, logger: Logger = Logger(label: "paypipe-ledger.store")
    )
        throws
    {
        switch settings {
        case .sqlite(let path): try self.init(path: path, opening: opening)
        case .postgres(let postgres): try self.init(postgres: postgres, opening: opening, logger: logger)
        }
    }

    private init(db: any StoreDatabase, lock: StoreWriterLock?, opening: Opening) throws {
        self.db = db
        writerLock = lock
        switch opening {
        case .forMigration: return
        case .migrating: try migrate()
        case .atSchema: try requireSchema()
        }
        tickets = DispatchTickets(key: try db.transaction { try ticketKey() })
        try opened()
    }

    /// What the store keeps in memory about its database, read anew at each connection.
    private func opened() throws {
        try db.transaction {
            try openEpoch()
            try countRunning()
        }
    }

    /// How many orders are in each state but `terminal`: counted once on opening (by the partial
    /// indexes, so ended orders are not scanned), then kept here by the statements that change a
    /// state (`moved`), with no write per state change; a transaction that fails puts them back.
    func countRunning() throws {
        let rows = try db.query(
            """
            SELECT state, COUNT(*) FROM orders WHERE state IN ('open','unknown') GROUP BY state
            UNION ALL SELECT 'pending', COUNT(*) FROM orders WHERE state='pending'
            UNION ALL SELECT 'review', COUNT(*) FROM orders WHERE state='review'
            """)
        running = [:]
        countedAt = Timestamp.monotonicMilliseconds()
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
    /// commits or rolls back with the rest. `logsOutcomes`: the transaction is expected to append
    /// to the outcome log, so it takes the log's lock before anything else (`lockLog`). One that
    /// is not (claims, reads, an intake of valid orders) takes it only if it logs after all,
    /// after rows of its own: that can deadlock only with another ledger writing the same order
    /// at the same moment, and PostgreSQL then fails one of the two, which is retried.
    package func transaction<T>(logsOutcomes: Bool = true, _ body: () throws -> T) throws -> T {
        if inTransaction { return try body() }
        try openIfReconnected()
        inTransaction = true
        // Read again in every transaction: a rolled-back one may have taken seqs it never wrote.
        nextSeq = nil
        firstSeq = nil
        lastCommittedSeqs = nil
        logHeadWritten = nil
        batch = Batch()
        defer {
            inTransaction = false
            nextSeq = nil
        }
        let counted = running
        do {
            let value = try db.transaction { () throws -> T in
                // SQLite has one writer: its counter is read when the first seq is taken.
                if logsOutcomes, db.dialect == .postgres { try lockLog() }
                let value = try body()
                try closeLogEntries()
                return value
            }
            if let firstSeq, let nextSeq, nextSeq > firstSeq { lastCommittedSeqs = firstSeq...(nextSeq - 1) }
            return value
        } catch {
            running = counted
            batch = Batch()
            throw error
        }
    }

    private var inTransaction = false

    /// The seqs the last committed transaction logged, in order; nil when it logged none. What
    /// other ledgers logged below them was committed before them (`lockLog`).
    package private(set) var lastCommittedSeqs: ClosedRange<Int64>?

    /// The first seq this transaction may hand out, once the log is locked.
    private var firstSeq: Int64?

    /// Seqs have to reach upstream in the order they are handed out, also from several ledgers
    /// over one PostgreSQL database, whose own sequences commit out of order. So the log has one
    /// counter row, `log_head`, and a transaction that logs locks it before anything else: seqs
    /// are handed out by one transaction at a time, each commits before the next can take any,
    /// and a reader that sees seq N has already been able to see every seq below it. Taking it
    /// first, before any order's row, keeps two ledgers from each holding what the other waits
    /// for. SQLite has one writer, so it only reads the counter.
    func lockLog() throws {
        guard firstSeq == nil else { return }
        let last: Int64
        switch db.dialect {
        case .sqlite: last = try lastSeq()
        case .postgres:
            // The row's own value: a transaction that waited for the lock reads the row as the
            // one before it left it (`closeLogEntries`), where a subquery would still see the
            // log as it was when this statement began.
            last = try db.query("SELECT last_seq FROM log_head FOR UPDATE").first?[0].integer ?? 0
        }
        firstSeq = last + 1
        nextSeq = last + 1
    }

    /// Records the highest seq this transaction logged in its epoch, for `replayContinues`, and
    /// on PostgreSQL in `log_head`, where the next transaction to lock it reads it.
    private func closeLogEntries() throws {
        guard let lastSeqTaken, lastSeqTaken != logHeadWritten else { return }
        let last = StoreValue.integer(lastSeqTaken)
        switch db.dialect {
        case .sqlite: try db.query("UPDATE epochs SET last_seq=? WHERE epoch=?", [last, .text(epoch)])
        case .postgres:
            try db.query(
                "WITH head AS (UPDATE log_head SET last_seq=GREATEST(last_seq, ?)) UPDATE epochs SET last_seq=? WHERE epoch=?",
                [last, last, .text(epoch)])
        }
    }

    /// The highest seq this transaction has handed out; nil when it logged nothing.
    var lastSeqTaken: Int64? {
        guard let firstSeq, let nextSeq, nextSeq > firstSeq else { return nil }
        return nextSeq - 1
    }

    /// The seq up to which this transaction has already written the log's head and its epoch's
    /// last seq (`finishRecords`), so that `closeLogEntries` sends no second statement for it.
    var logHeadWritten: Int64?

    /// What a pass's set-wise statements decided (`LedgerStore+Batches`).
    var batch = Batch()

    /// The seq the next logged outcome gets, once read from the log's counter.
    private var nextSeq: Int64?

    /// `serialized` as it is logged and emitted: with this epoch and the next seq. The seq is
    /// taken only by `appendToLog`, so an outcome that changes nothing does not use one up.
    func stamped(_ serialized: String) throws -> (seq: Int64, text: String) {
        if nextSeq == nil { try lockLog() }
        let seq = nextSeq ?? 1
        return (seq, Self.withSeq(serialized, seq, epoch: epoch))
    }

    /// The highest seq ever handed out, also when retention has emptied the log since: SQLite
    /// keeps it in the log's AUTOINCREMENT counter; PostgreSQL's in `log_head`, which every
    /// transaction that logs brings up to date (and stores of schema 2 kept the highest seq
    /// retention removed in).
    func lastSeq() throws -> Int64 {
        switch db.dialect {
        case .sqlite:
            try db.query("SELECT seq FROM sqlite_sequence WHERE name='outcome_log'").first?[0].integer ?? 0
        case .postgres:
            try db.query("SELECT GREATEST((SELECT MAX(seq) FROM outcome_log), (SELECT last_seq FROM log_head))").first?[0].integer ?? 0
        }
    }

    /// Logs a stamped outcome under its seq, and under the key of the order it is about, by
    /// which an operator's `order show` finds it (`outcome_log_order`).
    func appendToLog(_ stamped: (seq: Int64, text: String), key: OrderKey, now: Int64) throws {
        try db.query(
            "INSERT INTO outcome_log(seq, at, outcome, merchant, order_id) VALUES(?,?,?,?,?)",
            [.integer(stamped.seq), .integer(now), .text(stamped.text), .text(key.merchant), .text(key.orderId)])
        take(stamped)
    }

    /// The stamped outcome's seq is used: the next outcome gets the one after, whether its log
    /// entry is written now or with the pass's others (`finishRecords`).
    func take(_ stamped: (seq: Int64, text: String)) {
        nextSeq = stamped.seq + 1
    }

    /// How many orders are in each state but `terminal`, for the states that have any (the
    /// running counts: no scan of the orders).
    package func counts() throws -> [State: Int] {
        // Other ledgers over the same PostgreSQL database move orders too: their changes are
        // read back now and then rather than known.
        if db.dialect == .postgres, Timestamp.monotonicMilliseconds() - countedAt >= Self.recountMilliseconds {
            try read { try countRunning() }
        }
        return running.filter { $0.value > 0 }
    }

    static let recountMilliseconds: Int64 = 5000

    /// When `countRunning` last read the counts (monotonic).
    private var countedAt: Int64 = 0

    /// Whether other ledgers may write to this store at the same time (PostgreSQL).
    package var isShared: Bool { db.dialect == .postgres }

    /// The highest seq any ledger has logged and committed.
    package func lastLoggedSeq() throws -> Int64 {
        try read { try lastSeq() }
    }

    /// `body`'s one statement on its own, outside a transaction (on PostgreSQL one round trip
    /// rather than three), on a connection opened if the last one was lost.
    package func read<T>(_ body: () throws -> T) throws -> T {
        if inTransaction { return try body() }
        try openIfReconnected()
        return try body()
    }

    /// A new connection (after a server restart or a failover) begins an epoch and counts the
    /// orders again (`opened`) before anything else runs on it; when that fails on a connection
    /// that stays open (a lock timeout), it is done at the next try, not skipped.
    private func openIfReconnected() throws {
        if try db.connectIfNeeded() { unopened = true }
        guard unopened else { return }
        try opened()
        unopened = false
    }

    /// A connection opened but not yet through `opened`.
    private var unopened = false

    /// The key of this store's dispatch tickets, made on first use.
    private func ticketKey() throws -> (UInt64, UInt64) {
        let fresh = DispatchTickets.newKey()
        try db.query(
            "INSERT INTO meta(name, value) VALUES('ticket_key', ?) ON CONFLICT DO NOTHING",
            [.text(String(fresh.0, radix: 16) + ":" + String(fresh.1, radix: 16))])
        let text = try db.query("SELECT value FROM meta WHERE name='ticket_key'").first?[0].text ?? ""
        let parts = text.split(separator: ":").compactMap { UInt64($0, radix: 16) }
        guard parts.count == 2 else { throw StoreError(message: "meta.ticket_key is corrupt") }
        return (parts[0], parts[1])
    }
}

import Logging
import PaypipeCore

/// A store that a later release migrated: no restart of this ledger can open it.
package struct StoreSchemaTooNew: Error, CustomStringConvertible {
    package let description: String
}

/// A store that `paypipe-ledger migrate` has not brought to this release's schema yet, opened by
/// a ledger that leaves migrations to it (`store.migrations` job).
package struct StoreSchemaBehind: Error, CustomStringConvertible {
    package let version: Int
    package var description: String {
        "store: the store's schema is version \(version); this paypipe needs \(LedgerStore.schemaVersion) and store.migrations is job: run `paypipe-ledger migrate`"
    }
}

/// One forward step of a store's schema. Steps are never edited once released: a change is a
/// new step, so that every store, however old, reaches the same schema by the same path.
struct StoreMigration {
    let version: Int
    /// A step that runs transactions of its own (SQLite's first, which brings stores of every
    /// earlier release up to date one change at a time), and so can run again after a crash.
    /// Every other step runs in the transaction that records it.
    var ownsTransactions = false
    let apply: (LedgerStore) throws -> Void
}

extension LedgerStore {
    /// The steps for this store's database, in order.
    var migrations: [StoreMigration] {
        switch db.dialect {
        case .sqlite:
            [
                StoreMigration(version: 1, ownsTransactions: true) { try $0.createSQLiteSchemaVersion1() },
                StoreMigration(version: 2) { try $0.createEpochs(integer: "INTEGER") },
                StoreMigration(version: 3) { try $0.addEpochsLastSeq(integer: "INTEGER") },
                StoreMigration(version: 4) { try $0.createSubscriptions(integer: "INTEGER") },
                StoreMigration(version: 5) { try $0.createSchedules(integer: "INTEGER") },
                StoreMigration(version: 6) { try $0.createOrderAudit(integer: "INTEGER") },
                StoreMigration(version: 7) { try $0.addCheckTickets(integer: "INTEGER") },
                StoreMigration(version: 8) { try $0.keyCallbackEventsByMerchant() },
                StoreMigration(version: 9) { try $0.keyOutcomeLogByOrder() },
                StoreMigration(version: 10) { try $0.addScheduleReview() },
                StoreMigration(version: 11) { try $0.db.createStoreBackups() },
                StoreMigration(version: 12) { try $0.createRefunds(integer: "INTEGER") },
                StoreMigration(version: 13) { try $0.addPaidThrough(integer: "INTEGER") },
            ]
        case .postgres:
            [
                StoreMigration(version: 1) { try $0.createPostgresSchemaVersion1() },
                StoreMigration(version: 2) { try $0.createEpochs(integer: "BIGINT") },
                StoreMigration(version: 3) {
                    try $0.addEpochsLastSeq(integer: "BIGINT")
                    // `log_head` now holds the highest seq handed out, not only the highest removed.
                    try $0.db.query("UPDATE log_head SET last_seq=GREATEST(last_seq, COALESCE((SELECT MAX(seq) FROM outcome_log), 0))")
                },
                StoreMigration(version: 4) { try $0.createSubscriptions(integer: "BIGINT") },
                StoreMigration(version: 5) { try $0.createSchedules(integer: "BIGINT") },
                StoreMigration(version: 6) { try $0.createOrderAudit(integer: "BIGINT") },
                StoreMigration(version: 7) { try $0.addCheckTickets(integer: "BIGINT") },
                StoreMigration(version: 8) { try $0.keyCallbackEventsByMerchant() },
                StoreMigration(version: 9) { try $0.keyOutcomeLogByOrder() },
                StoreMigration(version: 10) { try $0.addScheduleReview() },
                StoreMigration(version: 11) { try $0.db.createStoreBackups() },
                StoreMigration(version: 12) { try $0.createRefunds(integer: "BIGINT") },
                StoreMigration(version: 13) { try $0.addPaidThrough(integer: "BIGINT") },
            ]
        }
    }

    /// The schema version this paypipe writes.
    package static let schemaVersion = 13

    /// Brings the schema to `schemaVersion`, recording each step in `meta`; refuses a store
    /// whose schema is newer than this paypipe knows, which an older ledger would corrupt.
    /// Ledgers starting together over one PostgreSQL database take turns (an advisory lock).
    func migrate() throws {
        // Even the table that records the version: two ledgers creating it at once would both
        // try, and one would fail.
        try db.transaction {
            try takeStoreLock()
            try db.execute("CREATE TABLE IF NOT EXISTS meta(name TEXT PRIMARY KEY, value TEXT NOT NULL)")
        }
        let steps = migrations
        precondition(steps.last?.version == Self.schemaVersion)
        for step in steps {
            let applyOnItsOwn = try db.transaction { () throws -> Bool in
                try takeStoreLock()
                let current = try storedSchemaVersion()
                try Self.refuseNewer(current)
                guard current < step.version, !step.ownsTransactions else { return current < step.version }
                try step.apply(self)
                try recordSchemaVersion(step.version)
                return false
            }
            guard applyOnItsOwn else { continue }
            try step.apply(self)
            try db.transaction { try recordSchemaVersion(step.version) }
        }
    }

    /// An older ledger would corrupt a store that a later release migrated.
    static func refuseNewer(_ version: Int) throws(StoreSchemaTooNew) {
        guard version > schemaVersion else { return }
        throw StoreSchemaTooNew(
            description:
                "store: the store's schema is version \(version), newer than this paypipe knows (\(schemaVersion)): run the paypipe release that wrote it, or a later one"
        )
    }

    /// A ledger that leaves migrations to `paypipe-ledger migrate` opens only a store at this
    /// release's schema, read under the lock the migration holds while it changes it.
    func requireSchema() throws {
        try db.transaction {
            try takeStoreLock()
            let current = try db.recordedSchemaVersion()
            try Self.refuseNewer(current)
            guard current == Self.schemaVersion else { throw StoreSchemaBehind(version: current) }
        }
    }

    /// Ledgers starting together over one PostgreSQL database take turns at what each does once
    /// per opening (the schema, the epoch): a lock held until the transaction ends. SQLite has
    /// one ledger per file.
    func takeStoreLock() throws { try db.takeStoreLock() }

    private func recordSchemaVersion(_ version: Int) throws {
        try db.query(
            "INSERT INTO meta(name, value) VALUES('schema_version', ?) ON CONFLICT(name) DO UPDATE SET value=excluded.value", [.text(String(version))]
        )
    }

    /// 0 for a store made before schema versions were recorded.
    func storedSchemaVersion() throws -> Int { try db.recordedSchemaVersion() }

    /// The schema version of the store `settings` name, read as a plain connection reads it:
    /// without a ledger's writer lock, a migration or an epoch. What a ledger polls while it
    /// waits for `paypipe-ledger migrate`; a newer schema than this release knows is refused.
    package static func schemaVersion(of settings: StoreSettings, logger: Logger) throws -> Int {
        let db: any StoreDatabase
        switch settings {
        case .sqlite(let path): db = try SQLiteConnection(path: path)
        case .postgres(let postgres): db = try PostgresDatabase(settings: postgres, logger: logger, readOnly: true)
        }
        let version = try db.recordedSchemaVersion()
        try refuseNewer(version)
        return version
    }

    /// The PostgreSQL schema: the tables, keys and partial indexes of SQLite's, and the log's
    /// counter, which SQLite keeps in `sqlite_sequence`.
    func createPostgresSchemaVersion1() throws {
        try db.execute(
            """
            CREATE TABLE orders(
              merchant TEXT NOT NULL, order_id TEXT NOT NULL, order_json TEXT,
              state TEXT NOT NULL, outcome TEXT, accepted_at BIGINT NOT NULL,
              dispatched_at BIGINT NOT NULL, dispatches BIGINT NOT NULL,
              provider TEXT, operation TEXT, pending_at BIGINT, lease_until BIGINT,
              attempts BIGINT NOT NULL DEFAULT 0, claimed_generation BIGINT, claimed_at BIGINT,
              corrected_at BIGINT, ended_at BIGINT,
              PRIMARY KEY(order_id, merchant));
            CREATE INDEX orders_in_flight ON orders(state, dispatched_at) WHERE state IN ('open','unknown');
            CREATE INDEX orders_held ON orders(lease_until) WHERE state IN ('open','unknown') AND lease_until IS NOT NULL;
            CREATE INDEX orders_pending ON orders(provider, operation, pending_at) WHERE state='pending';
            CREATE INDEX orders_in_review ON orders(state) WHERE state='review';
            CREATE INDEX orders_corrected ON orders(corrected_at) WHERE corrected_at IS NOT NULL;
            CREATE INDEX orders_to_compact ON orders(ended_at) WHERE order_json IS NOT NULL AND ended_at IS NOT NULL;
            CREATE INDEX orders_ended ON orders(ended_at) WHERE ended_at IS NOT NULL;
            CREATE TABLE refs(provider TEXT NOT NULL, ref TEXT NOT NULL, merchant TEXT NOT NULL,
              order_id TEXT NOT NULL, PRIMARY KEY(ref, provider, merchant));
            CREATE INDEX refs_order ON refs(order_id, merchant);
            CREATE TABLE callback_events(event TEXT PRIMARY KEY, merchant TEXT NOT NULL,
              order_id TEXT NOT NULL, at BIGINT NOT NULL);
            CREATE INDEX callback_events_order ON callback_events(order_id, merchant);
            CREATE TABLE outcome_log(seq BIGINT PRIMARY KEY, at BIGINT NOT NULL, outcome TEXT NOT NULL);
            CREATE TABLE log_head(one BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one), last_seq BIGINT NOT NULL);
            INSERT INTO log_head(last_seq) VALUES(0);
            """)
    }

    /// Each opening of the store is an epoch (`openEpoch`).
    func createEpochs(integer: String) throws {
        try db.execute(
            """
            CREATE TABLE IF NOT EXISTS epochs(epoch TEXT PRIMARY KEY, number \(integer) NOT NULL UNIQUE,
              opened_after \(integer) NOT NULL, opened_at \(integer) NOT NULL)
            """)
    }

    /// Each epoch keeps the highest seq logged in it (`replayContinues`). Epochs opened before
    /// had one writer at a time, so each ended where the next began.
    func addEpochsLastSeq(integer: String) throws {
        try db.execute("ALTER TABLE epochs ADD COLUMN last_seq \(integer)")
        try db.query(
            """
            UPDATE epochs SET last_seq=COALESCE((SELECT MIN(later.opened_after) FROM epochs AS later WHERE later.number > epochs.number), ?)
            """, [.integer(try lastSeq())])
    }
}

extension StoreDatabase {
    /// The lock behind `LedgerStore.takeStoreLock`, for what changes the schema from outside a
    /// ledger (`recordBackup`). Call inside a transaction.
    func takeStoreLock() throws {
        if dialect == .postgres { try query("SELECT 1 FROM pg_advisory_xact_lock(7027566457)") }
    }

    /// The store's schema version; 0 also when the store is empty (no `meta` yet).
    func recordedSchemaVersion() throws -> Int {
        guard try hasTable("meta") else { return 0 }
        guard let text = try query("SELECT value FROM meta WHERE name='schema_version'").first?[0].text else { return 0 }
        guard let version = Int(text) else { throw StoreError(message: "meta.schema_version is not a number") }
        return version
    }

    /// Whether the store's schema (PostgreSQL's `store.schema`) holds a table of this name.
    func hasTable(_ name: String) throws -> Bool {
        let rows =
            switch dialect {
            case .sqlite: try query("SELECT COUNT(*) FROM sqlite_master WHERE type='table' AND name=?", [.text(name)])
            case .postgres:
                try query(
                    "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema=current_schema() AND table_name=?", [.text(name)])
            }
        return (rows.first?[0].integer ?? 0) > 0
    }
}

import PaypipeCore
import StageWire

extension LedgerStore {
    /// The SQLite schema as it stood when schema versions began: made anew, or brought up to it
    /// from any earlier release's store, so that a ledger opened on an older store keeps its
    /// orders. Every step can run again, so it needs no transaction of its own.
    func createSQLiteSchemaVersion1() throws {
        // Keys lead with the column that tells rows apart (`order_id`, `ref`). Led by one that
        // nearly every row shares (the merchant, the provider), each comparison in a B-tree seek
        // ties on it and goes SQLite's slow way for the rest of the key. Stores created with the
        // other key order keep it: every statement names both columns, so either order serves it.
        try db.execute(
            """
            CREATE TABLE IF NOT EXISTS orders(
              merchant TEXT NOT NULL, order_id TEXT NOT NULL, order_json TEXT,
              state TEXT NOT NULL, outcome TEXT, accepted_at INTEGER NOT NULL,
              dispatched_at INTEGER NOT NULL, dispatches INTEGER NOT NULL,
              PRIMARY KEY(order_id, merchant)) WITHOUT ROWID
            """)
        // Columns a store of an earlier release lacks are added.
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
        // so each state change rewrites a few small, hot index pages. Only a held lease is indexed
        // (`orders_held`): an order enters it when claimed and leaves it when it ends, and an
        // unclaimed order costs it no write. The indexes of earlier releases (full ones over
        // every row, and `orders_leased`, which also held every unclaimed order) are dropped.
        try db.execute(
            """
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
        try db.execute(
            """
            CREATE TABLE IF NOT EXISTS refs(provider TEXT NOT NULL, ref TEXT NOT NULL, merchant TEXT NOT NULL,
              order_id TEXT NOT NULL, PRIMARY KEY(ref, provider, merchant)) WITHOUT ROWID
            """)
        try db.transaction { try keyReferencesByMerchant() }
        // Every authentic callback event already handed on: a provider's redelivery changes nothing.
        try db.execute(
            """
            CREATE TABLE IF NOT EXISTS callback_events(event TEXT PRIMARY KEY, merchant TEXT NOT NULL,
              order_id TEXT NOT NULL, at INTEGER NOT NULL) WITHOUT ROWID
            """)
        // Every outcome emitted, by seq: upstream replays what it missed.
        // AUTOINCREMENT so that a seq is never handed out twice, even after retention emptied the log.
        try db.execute("CREATE TABLE IF NOT EXISTS outcome_log(seq INTEGER PRIMARY KEY AUTOINCREMENT, at INTEGER NOT NULL, outcome TEXT NOT NULL)")
        // No index on `at`: retention takes the lowest seqs first (`pruneOutcomes`), so an index
        // would be one more B-tree insert per logged outcome for nothing. An existing one goes.
        try db.execute("DROP INDEX IF EXISTS outcome_log_at")
        try db.transaction { try addRetention() }
    }

    /// When terminal orders ended (for retention). A store without end times gains them: its
    /// terminal orders count as ended now, so none is compacted early. The running counts an
    /// earlier release kept in a table by triggers go (`countRunning` keeps them in memory).
    private func addRetention() throws {
        let columns = Set(try db.query("PRAGMA table_info(orders)").compactMap { $0[1].text })
        if !columns.contains("ended_at") {
            try db.execute("ALTER TABLE orders ADD COLUMN ended_at INTEGER")
            try db.query("UPDATE orders SET ended_at=? WHERE state='terminal'", [.integer(Timestamp.nowMilliseconds())])
        }
        // The two statements that end an order set its end time themselves (`admitRejection`,
        // `record`): a trigger would run a second update of the row per order, so the triggers
        // an earlier release created are dropped.
        try db.execute(
            """
            DROP TRIGGER IF EXISTS orders_ended_on_insert;
            DROP TRIGGER IF EXISTS orders_ended_on_update;
            CREATE INDEX IF NOT EXISTS orders_to_compact ON orders(ended_at) WHERE order_json IS NOT NULL AND ended_at IS NOT NULL;
            CREATE INDEX IF NOT EXISTS orders_ended ON orders(ended_at) WHERE ended_at IS NOT NULL;
            CREATE INDEX IF NOT EXISTS refs_order ON refs(order_id, merchant);
            CREATE INDEX IF NOT EXISTS callback_events_order ON callback_events(order_id, merchant);
            DROP TRIGGER IF EXISTS orders_count_insert;
            DROP TRIGGER IF EXISTS orders_count_update;
            DROP TRIGGER IF EXISTS orders_count_delete;
            DROP TABLE IF EXISTS main.state_counts;
            """)
    }

    /// A store that keys references by (ref, provider) alone is rekeyed with the merchant: under
    /// that key a second merchant's order naming the same reference would lose its index entry
    /// silently.
    private func keyReferencesByMerchant() throws {
        let keyColumns = try db.query("PRAGMA table_info(refs)").filter { ($0[5].integer ?? 0) > 0 }.compactMap { $0[1].text }
        guard !keyColumns.contains("merchant") else { return }
        try db.execute(
            """
            CREATE TABLE refs_by_merchant(provider TEXT NOT NULL, ref TEXT NOT NULL, merchant TEXT NOT NULL,
              order_id TEXT NOT NULL, PRIMARY KEY(ref, provider, merchant)) WITHOUT ROWID;
            INSERT INTO refs_by_merchant(provider, ref, merchant, order_id) SELECT provider, ref, merchant, order_id FROM refs;
            DROP TABLE refs;
            ALTER TABLE refs_by_merchant RENAME TO refs;
            """)
    }
}

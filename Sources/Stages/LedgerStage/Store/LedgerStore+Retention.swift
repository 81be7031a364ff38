import PaypipeCore
import StageWire

extension LedgerStore {
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
        // SQLite's AUTOINCREMENT counter remembers the seqs it removes; PostgreSQL's log does here.
        if db.dialect == .postgres { try db.query("UPDATE log_head SET last_seq=GREATEST(last_seq, ?)", [.integer(last)]) }
        return try db.write("DELETE FROM outcome_log WHERE seq <= ?", [.integer(last)])
    }

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

import PaypipeCore
import StageRuntime
import StageWire

/// The store's side of the asynchronous flows: order lookups for the callback validators,
/// the durable hand-off of callback verdicts, and the orders the Cleeng pollers and the
/// PhonePe missed-callback check work on.
extension LedgerStore {
    package func lookup(_ key: OrderKey) throws -> StoredOrder? {
        let rows = try db.query(
            "SELECT order_json, state, pending_at FROM orders WHERE merchant=? AND order_id=?", [.text(key.merchant), .text(key.orderId)])
        guard let row = rows.first, let json = row[0].text, let state = row[1].text.flatMap(State.init(rawValue:)) else { return nil }
        return StoredOrder(key: key, orderJSON: json, state: state, pendingAt: row[2].integer)
    }

    /// The order of `merchant` a provider reference names (PhonePe authRequestId, Nets paymentId).
    package func lookup(provider: Provider, ref: String, merchant: String) throws -> StoredOrder? {
        let rows = try db.query(
            "SELECT order_id FROM refs WHERE ref=? AND provider=? AND merchant=?", [.text(ref), .text(provider.rawValue), .text(merchant)])
        guard let orderId = rows.first?[0].text else { return nil }
        return try lookup(OrderKey(merchant: merchant, orderId: orderId))
    }

    /// Records a callback event id; false when it was already recorded (a redelivery).
    /// Call inside `transaction`, together with the outcome it leads to.
    package func recordCallbackEvent(_ event: String, for key: OrderKey, now: Int64) throws -> Bool {
        try db.write(
            "INSERT INTO callback_events(event, merchant, order_id, at) VALUES(?,?,?,?) ON CONFLICT DO NOTHING",
            [.text(event), .text(key.merchant), .text(key.orderId), .integer(now)]) == 1
    }

    /// Takes back an event recorded in this transaction whose callback changed nothing.
    package func forgetCallbackEvent(_ event: String, of merchant: String) throws {
        try db.query("DELETE FROM callback_events WHERE event=? AND merchant=?", [.text(event), .text(merchant)])
    }

    /// Callback event ids are each merchant's own (schema step 8): the same id in two tenants'
    /// callbacks is two events, so one tenant cannot mask another's callback.
    func keyCallbackEventsByMerchant() throws {
        switch db.dialect {
        case .postgres:
            try db.execute(
                """
                ALTER TABLE callback_events DROP CONSTRAINT IF EXISTS callback_events_pkey;
                ALTER TABLE callback_events ADD PRIMARY KEY (merchant, event);
                """)
        case .sqlite:
            try db.execute(
                """
                CREATE TABLE callback_events_by_merchant(event TEXT NOT NULL, merchant TEXT NOT NULL,
                  order_id TEXT NOT NULL, at INTEGER NOT NULL, PRIMARY KEY(merchant, event)) WITHOUT ROWID;
                INSERT INTO callback_events_by_merchant(event, merchant, order_id, at) SELECT event, merchant, order_id, at FROM callback_events;
                DROP TABLE callback_events;
                ALTER TABLE callback_events_by_merchant RENAME TO callback_events;
                CREATE INDEX IF NOT EXISTS callback_events_order ON callback_events(order_id, merchant);
                """)
        }
    }

    /// Pending orders of one provider and operation whose pending time is before `pendingBefore`
    /// and whose last dispatch is before `dispatchedBefore`; marked dispatched at `now` (a new
    /// generation) and returned with the `result` of their stored pending outcome. Call inside
    /// `transaction`.
    package func pendingToDispatch(
        operation: Operation, pendingBefore: Int64, dispatchedBefore: Int64, now: Int64, limit: Int
    ) throws -> [PendingDispatch] {
        let rows = try db.query(
            db.dialect == .postgres ? Self.pendingDueLocking : Self.pendingDue,
            [
                .text(operation.provider.rawValue), .integer(pendingBefore), .text(operation.rawValue), .integer(dispatchedBefore),
                .integer(Int64(limit)),
            ])
        var result: [PendingDispatch] = []
        for row in rows {
            guard let merchant = row[0].text, let orderId = row[1].text, let json = row[2].text, let pendingAt = row[3].integer else { continue }
            let dispatches = row[5].integer ?? 1
            guard try markDispatched(merchant: merchant, orderId: orderId, dispatches: dispatches, now: now) else { continue }
            let outcome = row[4].text.flatMap { try? JSONValue.parse(Array($0.utf8)) }
            result.append(
                PendingDispatch(
                    json: json, pendingAt: pendingAt, result: outcome?["result"]?.objectValue ?? [:],
                    key: OrderKey(merchant: merchant, orderId: orderId),
                    generation: dispatches + 1))
        }
        return result
    }

    static let pendingDue: StaticString = """
        SELECT merchant, order_id, order_json, pending_at, outcome, dispatches FROM orders
        WHERE provider=? AND state='pending' AND pending_at < ? AND operation=? AND dispatched_at < ? LIMIT ?
        """

    /// `pendingDue` for several ledgers over one PostgreSQL database: what another ledger is
    /// dispatching is skipped (`stalledQueryLocking`).
    static let pendingDueLocking: StaticString = """
        SELECT merchant, order_id, order_json, pending_at, outcome, dispatches FROM orders
        WHERE provider=? AND state='pending' AND pending_at < ? AND operation=? AND dispatched_at < ? LIMIT ? FOR UPDATE SKIP LOCKED
        """
}

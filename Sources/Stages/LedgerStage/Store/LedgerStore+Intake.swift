import PaypipeCore
import StageWire

extension LedgerStore {
    /// Records a valid order unless its key is known, with the provider references a callback
    /// may name it by (indexed now, before any request leaves). Call inside `transaction`.
    package func admit(_ order: Order, json: String, references: [String], now: Int64) throws -> Admission {
        if !takePreparedAdmission(order.key) {
            let inserted = try db.write(
                "INSERT INTO orders(merchant, order_id, order_json, state, accepted_at, dispatched_at, dispatches, provider, operation) VALUES(?,?,?,'open',?,?,1,?,?) ON CONFLICT DO NOTHING",
                [
                    .text(order.merchant), .text(order.orderId), .text(json), .integer(now), .integer(now),
                    .text(order.provider.rawValue), .text(order.operation.rawValue),
                ])
            guard inserted == 1 else { return try existing(merchant: order.merchant, orderId: order.orderId) }
        }
        if !takeIndexedReferences(order.key), let taken = try index(references, provider: order.provider.rawValue, key: order.key) {
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
    func index(_ references: [String], provider: String, key: OrderKey) throws -> String? {
        for reference in references {
            let inserted = try db.write(
                "INSERT INTO refs(provider, ref, merchant, order_id) VALUES(?,?,?,?) ON CONFLICT DO NOTHING",
                [.text(provider), .text(reference), .text(key.merchant), .text(key.orderId)])
            guard inserted == 0 else { continue }
            let owner = try db.query(
                "SELECT order_id FROM refs WHERE ref=? AND provider=? AND merchant=?", [.text(reference), .text(provider), .text(key.merchant)])
            if let other = owner.first?[0].text, other != key.orderId { return reference }
        }
        return nil
    }

    /// Records an intake rejection as the key's terminal outcome, unless the key already exists.
    /// Call inside `transaction`.
    package func admitRejection(_ key: OrderKey, outcome: String, now: Int64) throws -> RejectionAdmission {
        let logged = try stamped(outcome)
        let inserted = try db.write(
            "INSERT INTO orders(merchant, order_id, order_json, state, outcome, accepted_at, dispatched_at, dispatches, ended_at) VALUES(?,?,NULL,'terminal',?,?,?,0,?) ON CONFLICT DO NOTHING",
            [.text(key.merchant), .text(key.orderId), .text(logged.text), .integer(now), .integer(now), .integer(now)])
        guard inserted == 1 else { return .known(try existing(merchant: key.merchant, orderId: key.orderId)) }
        try appendToLog(logged, key: key, now: now)
        return .recorded(logged.text)
    }

    /// What an order sent again under `key` gets, or nil when the key is new. Call inside `transaction`.
    package func known(_ key: OrderKey) throws -> Admission? {
        guard try !db.query("SELECT 1 FROM orders WHERE merchant=? AND order_id=?", [.text(key.merchant), .text(key.orderId)]).isEmpty else {
            return nil
        }
        return try existing(merchant: key.merchant, orderId: key.orderId)
    }

    private func existing(merchant: String, orderId: String) throws -> Admission {
        let rows = try db.query("SELECT state, outcome FROM orders WHERE merchant=? AND order_id=?", [.text(merchant), .text(orderId)])
        if let row = rows.first, let outcome = row[1].text { return .duplicate(replay: outcome) }
        return .duplicateInFlight
    }
}

import PaypipeCore
import StageWire

/// A refund as the ledger admitted it (`refunds`, schema step 12).
package struct RefundRecord: Sendable, Equatable {
    package var orderId: String
    package var originalOrderId: String
    package var captureReference: String
    package var amount: Int64
    package var currency: String
    /// The subscription the refunded order paid for, if any: its refund's end is reported there.
    package var subscriptionProvider: String?
    package var subscription: String?
    /// The refund's latest outcome (nil while it has none).
    package var outcome: String?
}

extension LedgerStore {
    /// Schema step 12: every refund admitted, with the order and capture it gives back, so that
    /// the refunds of one capture are kept within it; and the subscription an order the
    /// pipeline made after a first order paid for (`order_subscriptions`), which its id does
    /// not tell.
    func createRefunds(integer: String) throws {
        try db.execute(
            """
            CREATE TABLE IF NOT EXISTS refunds(merchant TEXT NOT NULL, order_id TEXT NOT NULL, original_order_id TEXT NOT NULL,
              capture_reference TEXT NOT NULL, amount \(integer) NOT NULL, currency TEXT NOT NULL, subscription_provider TEXT,
              subscription TEXT, admitted_at \(integer) NOT NULL, PRIMARY KEY(merchant, order_id));
            CREATE INDEX IF NOT EXISTS refunds_of ON refunds(merchant, original_order_id);
            CREATE TABLE IF NOT EXISTS order_subscriptions(merchant TEXT NOT NULL, order_id TEXT NOT NULL, provider TEXT NOT NULL,
              reference TEXT NOT NULL, PRIMARY KEY(merchant, order_id));
            """)
    }

    /// The order `key`'s JSON and latest outcome, locked until the transaction ends on
    /// PostgreSQL: refunds of one order are admitted one at a time, however many ledgers take
    /// them in. nil when no such order (or only its rejection) is stored.
    package func lockedForRefund(_ key: OrderKey) throws -> (orderJSON: String?, outcome: String?)? {
        let bindings: [StoreValue] = [.text(key.merchant), .text(key.orderId)]
        let rows =
            switch db.dialect {
            case .sqlite: try db.query("SELECT order_json, outcome FROM orders WHERE merchant=? AND order_id=?", bindings)
            case .postgres: try db.query("SELECT order_json, outcome FROM orders WHERE merchant=? AND order_id=? FOR UPDATE", bindings)
            }
        guard let row = rows.first else { return nil }
        return (row[0].text, row[1].text)
    }

    /// Every refund admitted of the order `originalOrderId`, with its latest outcome.
    package func refunds(merchant: String, of originalOrderId: String) throws -> [RefundRecord] {
        try db.query(
            """
            SELECT r.order_id, r.capture_reference, r.amount, r.currency, r.subscription_provider, r.subscription, o.outcome
            FROM refunds r LEFT JOIN orders o ON o.merchant=r.merchant AND o.order_id=r.order_id
            WHERE r.merchant=? AND r.original_order_id=? ORDER BY r.order_id
            """, [.text(merchant), .text(originalOrderId)]
        ).map { row in
            RefundRecord(
                orderId: row[0].text ?? "", originalOrderId: originalOrderId, captureReference: row[1].text ?? "", amount: row[2].integer ?? 0,
                currency: row[3].text ?? "", subscriptionProvider: row[4].text, subscription: row[5].text, outcome: row[6].text)
        }
    }

    /// The refund admitted as the order `key`, if it is one.
    package func refund(_ key: OrderKey) throws -> RefundRecord? {
        let rows = try db.query(
            "SELECT original_order_id, capture_reference, amount, currency, subscription_provider, subscription FROM refunds WHERE merchant=? AND order_id=?",
            [.text(key.merchant), .text(key.orderId)])
        guard let row = rows.first else { return nil }
        return RefundRecord(
            orderId: key.orderId, originalOrderId: row[0].text ?? "", captureReference: row[1].text ?? "", amount: row[2].integer ?? 0,
            currency: row[3].text ?? "", subscriptionProvider: row[4].text, subscription: row[5].text, outcome: nil)
    }

    /// Records a refund just admitted. Call inside the transaction that admitted its order.
    package func recordRefund(_ refund: RefundRecord, merchant: String, now: Int64) throws {
        try db.query(
            """
            INSERT INTO refunds(merchant, order_id, original_order_id, capture_reference, amount, currency, subscription_provider,
              subscription, admitted_at) VALUES(?,?,?,?,?,?,?,?,?) ON CONFLICT DO NOTHING
            """,
            [
                .text(merchant), .text(refund.orderId), .text(refund.originalOrderId), .text(refund.captureReference), .integer(refund.amount),
                .text(refund.currency), refund.subscriptionProvider.map { .text($0) } ?? .null, refund.subscription.map { .text($0) } ?? .null,
                .integer(now),
            ])
    }

    /// Notes that the order `key` the pipeline made pays for the subscription `reference`.
    package func linkOrder(_ key: OrderKey, toSubscription reference: String, provider: Provider) throws {
        try db.query(
            "INSERT INTO order_subscriptions(merchant, order_id, provider, reference) VALUES(?,?,?,?) ON CONFLICT DO NOTHING",
            [.text(key.merchant), .text(key.orderId), .text(provider.rawValue), .text(reference)])
    }

    /// The subscription the order `key` paid for: one it opened, or one the pipeline made the
    /// order for (`linkOrder`); scheduled cycles are found by their schedule.
    package func subscription(paidBy key: OrderKey) throws -> (provider: String, reference: String)? {
        let bindings: [StoreValue] = [.text(key.merchant), .text(key.orderId)]
        let row =
            try db.query("SELECT provider, reference FROM order_subscriptions WHERE merchant=? AND order_id=?", bindings).first
            ?? db.query("SELECT provider, reference FROM subscriptions WHERE merchant=? AND order_id=?", bindings).first
        guard let row, let provider = row[0].text, let reference = row[1].text else { return nil }
        return (provider, reference)
    }

    /// A renewal the provider took by itself and reported as `renewal.succeeded` under
    /// `providerReference`, as a capture a refund may give back; nil when the subscription has
    /// no such renewal. Call inside `transaction`.
    package func renewalCapture(merchant: String, provider: Provider, reference: String, providerReference: String) throws -> Capture? {
        let rows = try db.query(
            "SELECT message FROM subscription_events WHERE reference=? AND provider=? AND merchant=?",
            [.text(reference), .text(provider.rawValue), .text(merchant)])
        for row in rows {
            guard let text = row[0].text, let event = try? JSONValue.parse(Array(text.utf8)),
                event["type"]?.stringValue == SubscriptionEvent.Kind.renewalSucceeded.rawValue,
                event["providerReference"]?.stringValue == providerReference, let amount = event["amount"]?.integerValue, amount > 0,
                let currency = event["currency"]?.stringValue
            else { continue }
            return Capture(reference: providerReference, amount: amount, currency: currency)
        }
        return nil
    }
}

import PaypipeCore

/// What a `cancel` order needs of the subscription it names.
package struct CancellableSubscription: Sendable, Equatable {
    /// The order that opened it.
    package var orderId: String
    package var state: SubscriptionState
    /// What charging it on schedule takes; nil for a provider that charges by itself.
    package var chargeTarget: JSONValue?
}

extension LedgerStore {
    /// Schema step 12 (cancellations): until when a cancelled subscription was paid.
    func addPaidThrough(integer: String) throws {
        switch db.dialect {
        case .postgres: try db.execute("ALTER TABLE subscriptions ADD COLUMN IF NOT EXISTS paid_through \(integer)")
        case .sqlite:
            // Idempotent, like the steps before it.
            if try db.query("SELECT 1 FROM pragma_table_info('subscriptions') WHERE name='paid_through'").isEmpty {
                try db.execute("ALTER TABLE subscriptions ADD COLUMN paid_through \(integer)")
            }
        }
    }

    /// The subscription a `cancel` order names; nil when the store knows none of that merchant
    /// and provider. Call inside `transaction`.
    package func cancellableSubscription(merchant: String, provider: Provider, reference: String) throws -> CancellableSubscription? {
        guard
            let row = try db.query(
                "SELECT order_id, state, charge_target FROM subscriptions WHERE reference=? AND provider=? AND merchant=?",
                [.text(reference), .text(provider.rawValue), .text(merchant)]
            ).first, let orderId = row[0].text, let state = row[1].text.flatMap(SubscriptionState.init(rawValue:))
        else { return nil }
        return CancellableSubscription(
            orderId: orderId, state: state, chargeTarget: row[2].text.flatMap { try? JSONValue.parse(Array($0.utf8)) })
    }

    /// Records until when a cancelled subscription was paid; the first cancellation's stands.
    /// Call inside `transaction`.
    package func recordPaidThrough(_ paidThrough: Int64, merchant: String, provider: Provider, reference: String) throws {
        try db.query(
            "UPDATE subscriptions SET paid_through=COALESCE(paid_through, ?) WHERE reference=? AND provider=? AND merchant=?",
            [.integer(paidThrough), .text(reference), .text(provider.rawValue), .text(merchant)])
    }
}

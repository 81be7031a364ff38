import PaypipeCore
import StageWire

/// The watch of a subscription's payments that its provider takes by itself
/// (`PaymentReconciling`), kept in the subscription's check columns: `check_json` holds the
/// watch, `check_at` when it is next looked at (on the schedules' clock). Entitlement checks use
/// the same columns for the providers that are checked; a provider is one or the other, and each
/// is read by its provider.
extension LedgerStore {
    /// Sets the watch and when it is next looked at; nil `watch` ends it. `onlyIfUnwatched`: a
    /// second opening of the subscription leaves a running watch alone. Call inside `transaction`.
    package func setPaymentWatch(
        _ watch: ReconciliationWatch?, at next: Int64?, merchant: String, provider: Provider, reference: String, onlyIfUnwatched: Bool = false
    ) throws {
        let values: [StoreValue] = [
            watch.map { .text($0.json.serialized) } ?? .null, Self.value(watch == nil ? nil : next), .text(reference), .text(provider.rawValue),
            .text(merchant),
        ]
        if onlyIfUnwatched {
            try db.query(
                "UPDATE subscriptions SET check_json=?, check_at=?, check_ticket=NULL WHERE reference=? AND provider=? AND merchant=? AND check_json IS NULL",
                values)
        } else {
            try db.query(
                "UPDATE subscriptions SET check_json=?, check_at=?, check_ticket=NULL WHERE reference=? AND provider=? AND merchant=?", values)
        }
    }

    /// The subscription's watch and state; nil when it has none. Call inside `transaction`.
    package func paymentWatch(
        merchant: String, provider: Provider, reference: String
    ) throws -> (watch: ReconciliationWatch, state: SubscriptionState)? {
        guard
            let row = try db.query(
                "SELECT check_json, state FROM subscriptions WHERE reference=? AND provider=? AND merchant=?",
                [.text(reference), .text(provider.rawValue), .text(merchant)]
            ).first, let text = row[0].text, let json = try? JSONValue.parse(Array(text.utf8)), let watch = ReconciliationWatch(json: json),
            let state = row[1].text.flatMap(SubscriptionState.init(rawValue:))
        else { return nil }
        return (watch, state)
    }

    /// The watches of `provider`'s subscriptions due at `now`, at most `limit`, each locked for
    /// this transaction (another ledger skips it). Call inside `transaction`.
    package func duePaymentWatches(
        provider: Provider, now: Int64, limit: Int
    ) throws -> [(merchant: String, reference: String, watch: ReconciliationWatch, state: SubscriptionState)] {
        let values: [StoreValue] = [.text(provider.rawValue), .integer(now), .integer(Int64(limit))]
        let rows: [[StoreValue]]
        switch db.dialect {
        case .sqlite:
            rows = try db.query(
                """
                SELECT merchant, reference, check_json, state FROM subscriptions
                WHERE provider=? AND check_at IS NOT NULL AND check_at <= ? ORDER BY check_at LIMIT ?
                """, values)
        case .postgres:
            rows = try db.query(
                """
                SELECT merchant, reference, check_json, state FROM subscriptions
                WHERE provider=? AND check_at IS NOT NULL AND check_at <= ? ORDER BY check_at LIMIT ? FOR UPDATE SKIP LOCKED
                """, values)
        }
        return rows.compactMap { row in
            guard let merchant = row[0].text, let reference = row[1].text, let text = row[2].text,
                let json = try? JSONValue.parse(Array(text.utf8)), let watch = ReconciliationWatch(json: json),
                let state = row[3].text.flatMap(SubscriptionState.init(rawValue:))
            else { return nil }
            return (merchant, reference, watch, state)
        }
    }
}

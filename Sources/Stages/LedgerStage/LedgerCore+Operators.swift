import PaypipeCore
import StageWire

/// The operators' requests on the admin link (docs/operations.md, "Finding and resolving an
/// order"). Reads answer from the store; a resolution or a re-check changes the order and
/// records who, why and when in its audit trail in the same transaction.
extension LedgerCore {
    /// `operatorKey`: the name of the `curve.admins` key the request came with (nil without CURVE).
    package mutating func administer(_ request: AdminRequest, operatorKey: String?, now: Int64) throws -> (reply: JSONValue, effects: [Effect]) {
        switch request {
        case .show, .list:
            return (try Self.answer(reading: request, from: store, now: now), [])
        case .resolve(let key, let resolution):
            return try resolve(key, resolution, operatorKey: operatorKey, now: now)
        case .recheck(let key):
            return try recheck(key, operatorKey: operatorKey, now: now)
        }
    }

    /// An operator's `show` or `list`, from `store`: the ledger's own, or the connection its
    /// reads have to themselves (`StoreReader`).
    static func answer(reading request: AdminRequest, from store: some StoreReads, now: Int64) throws -> JSONValue {
        switch request {
        case .show(let key):
            guard let story = try store.orderStory(key) else { return refusal("no order \(key) in this store") }
            return ["order": story]
        case .list(let filter):
            return ["orders": .array(try store.listOrders(filter, now: now))]
        case .resolve, .recheck:
            return refusal("a request that changes an order is not a read")
        }
    }

    static func refusal(_ message: String) -> JSONValue { ["error": .string(message)] }

    /// An order in review ends as the operator decided: its outcome is logged and sent upstream
    /// like any other, carrying `resolution` (who and why), and what follows an outcome follows
    /// (a schedule moves on). Any other order is refused: it is still the pipeline's to decide,
    /// or it has ended.
    private mutating func resolve(
        _ key: OrderKey, _ resolution: AdminRequest.Resolution, operatorKey: String?, now: Int64
    ) throws -> (reply: JSONValue, effects: [Effect]) {
        // Counted in a copy, kept only once the transaction has committed.
        var counters = self.counters
        var resolved = false
        let at = Timestamp.iso8601(milliseconds: now)
        let answer = try store.transaction { () throws -> (reply: JSONValue, effects: [Effect]) in
            guard let facts = try store.operatorFacts(key) else { return (Self.refusal("no order \(key) in this store"), []) }
            guard facts.state == .review else {
                return (
                    Self.refusal(
                        "\(key) is \(facts.state.rawValue), not in review: only an order the pipeline gave up on (unknown NEEDS_REVIEW) is resolved by hand"
                    ), []
                )
            }
            var outcome = Outcome(
                orderId: key.orderId, merchant: key.merchant, provider: facts.provider, operation: facts.operation, status: resolution.status,
                attempts: 0, at: at)
            if resolution.status == .failed { outcome.error = .init(code: .resolvedByOperator, message: resolution.reason) }
            guard case .object(var object) = outcome.json else { return (Self.refusal("the outcome could not be written"), []) }
            object["resolution"] = [
                "by": .string(resolution.by), "reason": .string(resolution.reason), "operatorKey": operatorKey.map(JSONValue.string) ?? .null,
                "at": .string(at),
            ]
            let recorded = try store.record(
                outcome, serialized: JSONValue.object(object).serialized, references: [], polled: false, now: now, from: .ledger)
            guard let text = recorded.emit else {
                return (Self.refusal("\(key) was not resolved: \(recorded.refused ?? "it left review meanwhile")"), [])
            }
            try store.audit(
                key, action: "resolve", by: resolution.by, operatorKey: operatorKey, reason: resolution.reason,
                detail: ["status": .string(resolution.status.rawValue)], now: now)
            counters.countOut(labels(outcome))
            counters.resolvedByOperators[outcome.status.rawValue, default: 0] += 1
            resolved = true
            var effects: [Effect] = [.emit(Array(text.utf8))]
            if outcome.status == .succeeded {
                effects += try openSubscription(after: outcome, corrected: false, counters: &counters, now: now)
                effects += try cancelSubscription(after: outcome, counters: &counters, now: now)
            }
            effects += try advanceSchedule(after: outcome, counters: &counters, now: now)
            effects += try reconcile(after: outcome, counters: &counters, now: now)
            effects += try reportRefund(after: outcome, counters: &counters, now: now)
            effects += try changeSubscription(after: outcome, counters: &counters, now: now)
            let logged = (try? JSONValue.parse(Array(text.utf8))) ?? .string(text)
            return (["resolved": logged], effects)
        }
        if resolved { self.counters = counters }
        return answer
    }

    /// A pending or review order's status call goes out now, as the regular checks' do; its
    /// answer ends the order only when the provider can tell (a review order stays in review
    /// otherwise). An open order is already in the pipeline's hands, an ended one is over.
    private mutating func recheck(_ key: OrderKey, operatorKey: String?, now: Int64) throws -> (reply: JSONValue, effects: [Effect]) {
        let answer = try store.transaction { () throws -> (reply: JSONValue, effects: [Effect]) in
            guard let facts = try store.operatorFacts(key) else { return (Self.refusal("no order \(key) in this store"), []) }
            guard facts.state == .pending || facts.state == .review, let json = facts.json else {
                return (
                    Self.refusal(
                        "\(key) is \(facts.state.rawValue): only a pending order or one in review is re-checked (an open one is still being resolved by the pipeline)"
                    ), []
                )
            }
            guard try store.markRechecked(key, state: facts.state, generation: facts.generation, now: now) else {
                return (Self.refusal("\(key) changed meanwhile; ask again"), [])
            }
            let generation = facts.generation + 1
            try store.audit(
                key, action: "recheck", by: operatorKey ?? "operator", operatorKey: operatorKey, reason: "status check requested", detail: nil,
                now: now)
            let pending = facts.outcome.flatMap { try? JSONValue.parse(Array($0.utf8)) }?["result"]?.objectValue
            let frame = DispatchFrame.encode(
                orderJSON: json, acceptedAt: facts.pendingAt ?? facts.acceptedAt, purpose: .statusCheck, pending: pending,
                generation: generation, token: store.tickets.token(for: key, generation: generation))
            return (
                [
                    "rechecking": [
                        "merchant": .string(key.merchant), "orderId": .string(key.orderId), "state": .string(facts.state.rawValue),
                        "generation": .integer(generation),
                    ]
                ], [.dispatch(frame)]
            )
        }
        if !answer.effects.isEmpty { counters.statusChecks += 1 }
        return answer
    }
}

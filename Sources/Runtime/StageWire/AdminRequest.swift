import PaypipeCore

/// What an operator asks the ledger on its admin link (`endpoints.admin`, docs/operations.md,
/// "Finding and resolving an order"): one JSON object per request, `{"op": …}`, answered with one
/// JSON object, `{"error": …}` when refused. Never the live outcomes socket: a command there would
/// take outcomes away from upstream.
package enum AdminRequest: Sendable, Equatable {
    /// One order's whole story from the store.
    case show(OrderKey)
    /// Orders matching a filter, oldest first.
    case list(OrderFilter)
    /// Ends an order in review as an operator decided, recorded with who and why.
    case resolve(OrderKey, Resolution)
    /// Asks the provider's status call for a pending or review order now.
    case recheck(OrderKey)

    package struct OrderFilter: Sendable, Equatable {
        /// One of the store's states: open, unknown, pending, review, terminal.
        package var state: String?
        package var merchant: String?
        package var provider: String?
        package var operation: String?
        /// Accepted at least this long ago.
        package var olderThanMilliseconds: Int64?
        package var limit: Int

        package init(
            state: String? = nil, merchant: String? = nil, provider: String? = nil, operation: String? = nil, olderThanMilliseconds: Int64? = nil,
            limit: Int = 100
        ) {
            (self.state, self.merchant, self.provider, self.operation) = (state, merchant, provider, operation)
            self.olderThanMilliseconds = olderThanMilliseconds
            self.limit = limit
        }
    }

    /// An operator's decision on an order in review.
    package struct Resolution: Sendable, Equatable {
        /// `succeeded` (the provider took the money) or `failed` (it did not).
        package var status: Outcome.Status
        /// Why: what the operator checked (the provider's dashboard, a call with its support).
        package var reason: String
        /// Who decided, as the operator names themself.
        package var by: String

        package init(status: Outcome.Status, reason: String, by: String) {
            (self.status, self.reason, self.by) = (status, reason, by)
        }
    }

    /// The states `OrderFilter.state` takes.
    package static let states: Set<String> = ["open", "unknown", "pending", "review", "terminal"]
    /// Orders listed at most per answer.
    package static let maxListLimit = 1000
    /// The longest `reason` and `by` kept.
    package static let maxTextLength = 500

    package var bytes: [UInt8] {
        var o: [String: JSONValue]
        switch self {
        case .show(let key): o = ["op": "show", "merchant": .string(key.merchant), "orderId": .string(key.orderId)]
        case .recheck(let key): o = ["op": "recheck", "merchant": .string(key.merchant), "orderId": .string(key.orderId)]
        case .resolve(let key, let resolution):
            o = [
                "op": "resolve", "merchant": .string(key.merchant), "orderId": .string(key.orderId), "status": .string(resolution.status.rawValue),
                "reason": .string(resolution.reason), "by": .string(resolution.by),
            ]
        case .list(let filter):
            o = ["op": "list", "limit": .integer(Int64(filter.limit))]
            if let state = filter.state { o["state"] = .string(state) }
            if let merchant = filter.merchant { o["merchant"] = .string(merchant) }
            if let provider = filter.provider { o["provider"] = .string(provider) }
            if let operation = filter.operation { o["operation"] = .string(operation) }
            if let older = filter.olderThanMilliseconds { o["olderThanMs"] = .integer(older) }
        }
        return JSONValue.object(o).bytes
    }

    /// Reads a request; the error names the field and the rule.
    package static func parse(_ bytes: [UInt8]) throws(EnvelopeError) -> AdminRequest {
        guard case .object(let o)? = try? JSONValue.parse(bytes), let op = o["op"]?.stringValue else {
            throw EnvelopeError("an admin request is a JSON object with an op (show, list, resolve, recheck)")
        }
        func text(_ name: String, required: Bool = true) throws(EnvelopeError) -> String? {
            guard let value = o[name] else {
                if required { throw EnvelopeError("\(name) is required") }
                return nil
            }
            guard let text = value.stringValue, !text.isEmpty, text.utf8.count <= maxTextLength else {
                throw EnvelopeError("\(name) must be a string of 1 to \(maxTextLength) bytes")
            }
            return text
        }
        func key() throws(EnvelopeError) -> OrderKey {
            OrderKey(merchant: try text("merchant")!, orderId: try text("orderId")!)
        }
        func only(_ names: Set<String>) throws(EnvelopeError) {
            if let unknown = o.keys.filter({ !names.contains($0) }).sorted().first {
                throw EnvelopeError("\(unknown.prefix(32)) is not a field of \(op)")
            }
        }
        switch op {
        case "show", "recheck":
            try only(["op", "merchant", "orderId"])
            return op == "show" ? .show(try key()) : .recheck(try key())
        case "resolve":
            try only(["op", "merchant", "orderId", "status", "reason", "by"])
            guard let status = try text("status").flatMap(Outcome.Status.init(rawValue:)), status == .succeeded || status == .failed else {
                throw EnvelopeError("status must be succeeded (the provider took the money) or failed (it did not)")
            }
            return .resolve(try key(), Resolution(status: status, reason: try text("reason")!, by: try text("by")!))
        case "list":
            try only(["op", "state", "merchant", "provider", "operation", "olderThanMs", "limit"])
            var filter = OrderFilter()
            filter.state = try text("state", required: false)
            if let state = filter.state, !states.contains(state) {
                throw EnvelopeError("state must be one of \(states.sorted().joined(separator: ", "))")
            }
            filter.merchant = try text("merchant", required: false)
            filter.provider = try text("provider", required: false)
            filter.operation = try text("operation", required: false)
            if let value = o["olderThanMs"] {
                guard case .integer(let ms) = value, ms >= 0 else { throw EnvelopeError("olderThanMs must be an integer >= 0") }
                filter.olderThanMilliseconds = ms
            }
            if let value = o["limit"] {
                guard case .integer(let limit) = value, (1...Int64(maxListLimit)).contains(limit) else {
                    throw EnvelopeError("limit must be an integer from 1 to \(maxListLimit)")
                }
                filter.limit = Int(limit)
            }
            return .list(filter)
        default:
            throw EnvelopeError("op must be show, list, resolve or recheck")
        }
    }

    /// Whether the request changes an order (and so is recorded in its audit trail).
    package var changesAnOrder: Bool {
        switch self {
        case .resolve, .recheck: true
        case .show, .list: false
        }
    }

    package static func errorReply(_ message: String) -> [UInt8] { JSONValue.object(["error": .string(message)]).bytes }
}

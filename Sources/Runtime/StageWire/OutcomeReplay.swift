import PaypipeCore

/// The replay exchange at `endpoints.outcomesReplay` (docs/protocol.md, "Sequence and
/// replay"): upstream sends `{"since": N, "limit": M, "epoch": E}` and gets every logged outcome
/// with a seq above N, in seq order, then `{"next": K, "more": true|false, "epoch": E'}`. With
/// `epoch` (the one its seq N came with), a store that no longer holds what upstream saw up to N
/// answers `{"error": …, "diverged": true, "epoch": E'}` instead.
package enum OutcomeReplay {
    /// Outcomes per answer when the request names no limit.
    package static let defaultLimit = 100
    /// Larger limits are cut to this: one answer must not stall the ledger for long.
    package static let maxLimit = 1000

    /// `{"subscription": {"merchant", "provider", "reference"}}` on the replay socket: one
    /// subscription's record and history, answered in one message.
    package struct SubscriptionQuery: Sendable, Equatable {
        package var merchant: String
        package var provider: Provider
        package var reference: String

        package init(merchant: String, provider: Provider, reference: String) {
            self.merchant = merchant
            self.provider = provider
            self.reference = reference
        }

        package var bytes: [UInt8] {
            JSONValue.object([
                "subscription": ["merchant": .string(merchant), "provider": .string(provider.rawValue), "reference": .string(reference)]
            ]).bytes
        }

        /// nil when `bytes` is not a subscription query (a replay request, say).
        package static func parse(_ bytes: [UInt8]) throws(EnvelopeError) -> SubscriptionQuery? {
            guard case .object(let o)? = try? JSONValue.parse(bytes), let value = o["subscription"] else { return nil }
            guard o.count == 1, let merchant = value["merchant"]?.stringValue, let provider = value["provider"]?.stringValue,
                let reference = value["reference"]?.stringValue, !reference.isEmpty, reference.utf8.count <= 256
            else { throw EnvelopeError("a subscription query is {\"subscription\": {\"merchant\", \"provider\", \"reference\"}}") }
            return SubscriptionQuery(merchant: merchant, provider: Provider(provider), reference: reference)
        }
    }

    /// `{"schedules": {"merchant"?, "provider"?, "state"?, "limit"?}}` on the replay socket: the
    /// schedules (docs/protocol.md, "Schedules"), soonest due first, answered in one message
    /// `{"schedules": [...]}`. A client limited to some merchants must name one of them.
    package struct SchedulesQuery: Sendable, Equatable {
        package var merchant: String?
        package var provider: Provider?
        package var state: String?
        package var limit: Int

        package init(merchant: String? = nil, provider: Provider? = nil, state: String? = nil, limit: Int = 100) {
            self.merchant = merchant
            self.provider = provider
            self.state = state
            self.limit = limit
        }

        package var bytes: [UInt8] {
            var o: [String: JSONValue] = ["limit": .integer(Int64(limit))]
            if let merchant { o["merchant"] = .string(merchant) }
            if let provider { o["provider"] = .string(provider.rawValue) }
            if let state { o["state"] = .string(state) }
            return JSONValue.object(["schedules": .object(o)]).bytes
        }

        /// nil when `bytes` is not a schedules query.
        package static func parse(_ bytes: [UInt8]) throws(EnvelopeError) -> SchedulesQuery? {
            guard case .object(let o)? = try? JSONValue.parse(bytes), let value = o["schedules"] else { return nil }
            guard o.count == 1, case .object(let q) = value, q.keys.allSatisfy(["merchant", "provider", "state", "limit"].contains),
                q.values.allSatisfy({ $0.stringValue != nil || $0.integerValue != nil })
            else { throw EnvelopeError("a schedules query is {\"schedules\": {\"merchant\"?, \"provider\"?, \"state\"?, \"limit\"?}}") }
            return SchedulesQuery(
                merchant: q["merchant"]?.stringValue, provider: q["provider"]?.stringValue.map { Provider($0) }, state: q["state"]?.stringValue,
                limit: Int(min(max(q["limit"]?.integerValue ?? 100, 1), Int64(maxLimit))))
        }
    }

    package struct Request: Sendable, Equatable {
        package var since: Int64
        package var limit: Int
        /// The epoch of the outcome whose seq is `since`; nil: not checked.
        package var epoch: String?

        package init(since: Int64, limit: Int = OutcomeReplay.defaultLimit, epoch: String? = nil) {
            self.since = since
            self.limit = limit
            self.epoch = epoch
        }

        package var bytes: [UInt8] {
            var o: [String: JSONValue] = ["since": .integer(since), "limit": .integer(Int64(limit))]
            if let epoch { o["epoch"] = .string(epoch) }
            return JSONValue.object(o).bytes
        }

        /// `since` is required (an integer ≥ 0); `limit` is optional, at least 1, cut to `maxLimit`;
        /// `epoch` is optional, a string.
        package static func parse(_ bytes: [UInt8]) throws(EnvelopeError) -> Request {
            guard case .object(let o)? = try? JSONValue.parse(bytes) else { throw EnvelopeError("a replay request is a JSON object") }
            if let unknown = o.keys.filter({ $0 != "since" && $0 != "limit" && $0 != "epoch" }).sorted().first {
                throw EnvelopeError("\(unknown.prefix(32)) is not a replay request field (since, limit, epoch)")
            }
            var epoch: String?
            if let value = o["epoch"] {
                guard let text = value.stringValue, !text.isEmpty, text.utf8.count <= 64 else {
                    throw EnvelopeError("epoch must be a string of 1 to 64 characters")
                }
                epoch = text
            }
            guard case .integer(let since)? = o["since"], since >= 0 else { throw EnvelopeError("since must be an integer >= 0") }
            var limit = defaultLimit
            if let value = o["limit"] {
                guard case .integer(let requested) = value, requested >= 1 else { throw EnvelopeError("limit must be an integer >= 1") }
                limit = Int(min(requested, Int64(maxLimit)))
            }
            return Request(since: since, limit: limit, epoch: epoch)
        }
    }

    /// The message that closes every answer: ask again with `since` = `next`; `more` says that
    /// outcomes after `next` are already waiting.
    package struct Trailer: Sendable, Equatable {
        package var next: Int64
        package var more: Bool
        /// The store's current epoch: what the outcomes logged from now on name.
        package var epoch: String?

        package init(next: Int64, more: Bool, epoch: String? = nil) {
            self.next = next
            self.more = more
            self.epoch = epoch
        }

        package var bytes: [UInt8] {
            var o: [String: JSONValue] = ["next": .integer(next), "more": .bool(more)]
            if let epoch { o["epoch"] = .string(epoch) }
            return JSONValue.object(o).bytes
        }

        /// nil when `bytes` is not a trailer (an outcome, or an error answer).
        package static func parse(_ bytes: [UInt8]) -> Trailer? {
            guard case .object(let o)? = try? JSONValue.parse(bytes), o["status"] == nil,
                case .integer(let next)? = o["next"], let more = o["more"]?.boolValue
            else { return nil }
            return Trailer(next: next, more: more, epoch: o["epoch"]?.stringValue)
        }
    }

    /// The answer to a request that could not be read; it ends the answer like a trailer.
    package static func errorReply(_ message: String) -> [UInt8] { JSONValue.object(["error": .string(message)]).bytes }

    /// The answer when the store no longer holds what upstream saw up to its `since` in its
    /// `epoch`: upstream replays from 0 of `epoch` and reconciles by order key (docs/protocol.md).
    package static func divergedReply(_ request: Request, epoch: String) -> [UInt8] {
        JSONValue.object([
            "error": .string(
                "this store does not hold seq \(request.since) of epoch \(request.epoch ?? ""): it was restored from an older copy or is another store; replay from 0 and reconcile by order key"
            ),
            "diverged": .bool(true), "epoch": .string(epoch),
        ]).bytes
    }
}

import PaypipeCore

/// The replay exchange at `endpoints.outcomesReplay` (docs/protocol.md, "Sequence and
/// replay"): upstream sends `{"since": N, "limit": M}` and gets every logged outcome with a seq
/// above N, in seq order, then `{"next": K, "more": true|false}`.
package enum OutcomeReplay {
    /// Outcomes per answer when the request names no limit.
    package static let defaultLimit = 100
    /// Larger limits are cut to this: one answer must not stall the ledger for long.
    package static let maxLimit = 1000

    package struct Request: Sendable, Equatable {
        package var since: Int64
        package var limit: Int

        package init(since: Int64, limit: Int = OutcomeReplay.defaultLimit) {
            self.since = since
            self.limit = limit
        }

        package var bytes: [UInt8] { JSONValue.object(["since": .integer(since), "limit": .integer(Int64(limit))]).bytes }

        /// `since` is required (an integer ≥ 0); `limit` is optional, at least 1, cut to `maxLimit`.
        package static func parse(_ bytes: [UInt8]) throws(EnvelopeError) -> Request {
            guard case .object(let o)? = try? JSONValue.parse(bytes) else { throw EnvelopeError("a replay request is a JSON object") }
            if let unknown = o.keys.filter({ $0 != "since" && $0 != "limit" }).sorted().first {
                throw EnvelopeError("\(unknown.prefix(32)) is not a replay request field (since, limit)")
            }
            guard case .integer(let since)? = o["since"], since >= 0 else { throw EnvelopeError("since must be an integer >= 0") }
            var limit = defaultLimit
            if let value = o["limit"] {
                guard case .integer(let requested) = value, requested >= 1 else { throw EnvelopeError("limit must be an integer >= 1") }
                limit = Int(min(requested, Int64(maxLimit)))
            }
            return Request(since: since, limit: limit)
        }
    }

    /// The message that closes every answer: ask again with `since` = `next`; `more` says that
    /// outcomes after `next` are already waiting.
    package struct Trailer: Sendable, Equatable {
        package var next: Int64
        package var more: Bool

        package init(next: Int64, more: Bool) {
            self.next = next
            self.more = more
        }

        package var bytes: [UInt8] { JSONValue.object(["next": .integer(next), "more": .bool(more)]).bytes }

        /// nil when `bytes` is not a trailer (an outcome, or an error answer).
        package static func parse(_ bytes: [UInt8]) -> Trailer? {
            guard case .object(let o)? = try? JSONValue.parse(bytes), o["status"] == nil,
                case .integer(let next)? = o["next"], let more = o["more"]?.boolValue
            else { return nil }
            return Trailer(next: next, more: more)
        }
    }

    /// The answer to a request that could not be read; it ends the answer like a trailer.
    package static func errorReply(_ message: String) -> [UInt8] { JSONValue.object(["error": .string(message)]).bytes }
}

import PaypipeCore
import StageWire
import ZeroMQ

/// Reads logged outcomes from the ledger's replay endpoint over a DEALER: one
/// request at a time. After a timeout a late answer could still arrive, so drop the client and
/// make a new one.
package final class OutcomeReplayClient: Sendable {
    package typealias Failure = LedgerDealer.Failure

    let dealer: LedgerDealer

    package init(context: ZMQContext, endpoint: String, options: ZMQSocketOptions = stageOptions()) throws(ZMQError) {
        dealer = try LedgerDealer(context: context, endpoint: endpoint, options: options)
    }

    /// The ledger's answer to a replay from a seq of an epoch its store does not hold (restored
    /// from an older copy): replay from 0 of `epoch` and reconcile by order key.
    package struct Diverged: Error, CustomStringConvertible {
        package let epoch: String
        package let message: String
        package var description: String { message }
    }

    /// The outcomes with a seq above `since` (at most `limit`, as bytes) and the trailer.
    /// `epoch`: the epoch of the outcome whose seq is `since`, which the ledger checks its store
    /// still holds (`Diverged` when it does not).
    package func fetch(
        since: Int64, limit: Int, epoch: String? = nil, timeoutMilliseconds: Int64 = 5000
    ) async throws -> (outcomes: [[UInt8]], trailer: OutcomeReplay.Trailer) {
        try dealer.send(OutcomeReplay.Request(since: since, limit: limit, epoch: epoch).bytes)
        var outcomes: [[UInt8]] = []
        let clock = ContinuousClock()
        let deadline = clock.now + .milliseconds(timeoutMilliseconds)
        while clock.now < deadline {
            let left = deadline - clock.now
            let wait = max(1, left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000)
            guard let batch = try await dealer.next(timeoutMilliseconds: wait) else { break }
            for message in batch {
                let body = message.body
                if let trailer = OutcomeReplay.Trailer.parse(body) { return (outcomes, trailer) }
                if case .object(let o)? = try? JSONValue.parse(body), o["status"] == nil, let error = o["error"]?.stringValue {
                    if o["diverged"] == .bool(true), let current = o["epoch"]?.stringValue { throw Diverged(epoch: current, message: error) }
                    throw Failure("the ledger refused the replay request: \(error)")
                }
                outcomes.append(body)
            }
        }
        throw Failure("no complete answer from the replay endpoint within \(timeoutMilliseconds) ms")
    }

    /// One subscription's record and history (`OutcomeReplay.SubscriptionQuery`); nil when
    /// the ledger knows no such subscription.
    package func subscription(_ query: OutcomeReplay.SubscriptionQuery, timeoutMilliseconds: Int64 = 5000) async throws -> JSONValue? {
        try dealer.send(query.bytes)
        guard let message = try await dealer.next(timeoutMilliseconds: timeoutMilliseconds)?.first,
            case .object(let o)? = try? JSONValue.parse(message.body)
        else { throw Failure("no answer from the replay endpoint within \(timeoutMilliseconds) ms") }
        guard o["error"] == nil else { return Optional<JSONValue>.none }
        return .object(o)
    }

    /// The schedules the query names (`OutcomeReplay.SchedulesQuery`); nil when refused.
    package func schedules(_ query: OutcomeReplay.SchedulesQuery, timeoutMilliseconds: Int64 = 5000) async throws -> [JSONValue]? {
        try dealer.send(query.bytes)
        guard let message = try await dealer.next(timeoutMilliseconds: timeoutMilliseconds)?.first,
            case .object(let o)? = try? JSONValue.parse(message.body)
        else { throw Failure("no answer from the replay endpoint within \(timeoutMilliseconds) ms") }
        return o["schedules"]?.arrayValue
    }

    package func close() async { await dealer.close() }
}

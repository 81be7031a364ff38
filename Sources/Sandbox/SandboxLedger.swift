import PaypipeCore
import Synchronization

/// What the sandbox received and what it processed, per provider idempotency key, so a test
/// can prove an order was charged once however often it was sent.
///
/// `GET /_sandbox/ledger` answers:
/// ```json
/// {
///   "requests": {"nets:<Idempotency-Key>": 2, "phonepe:<authRequestId>": 1, ...},
///   "effects":  {"nets:<Idempotency-Key>": 1, "phonepe:<authRequestId>": 1,
///                "trustpayments:<requestreference>": 1, "cleeng:<transactionId>": 1},
///   "total": 7, "injectedErrors": 0, "untrackedKeys": 0
/// }
/// ```
/// - `requests[key]`: every delivery that carried the key, whatever became of it (refused,
///   error-injected, replayed, processed).
/// - `effects[key]`: 1 once the provider side changed state for the key (a Nets payment or
///   charge, a PhonePe mandate, a Trust Payments update or SDK payment, a Cleeng receipt);
///   absent when nothing took effect. Replays answered from the first answer do not add.
/// - `total`: every provider request received (also the ones without a key, e.g. status calls).
/// - `injectedErrors`: requests answered 500 by error injection, unprocessed.
/// - `untrackedKeys`: keys not tracked individually once `ledgerKeyLimit` was reached.
///
/// `?key=nets:abc` narrows both maps to that key; `?summary=1` leaves the maps out.
/// Keys are `<provider>:<key as sent>`.
public final class SandboxLedger: Sendable {
    package struct State {
        var requests: [String: Int] = [:]
        var effects: Set<String> = []
        var total = 0
        var injectedErrors = 0
        var untrackedKeys = 0
        /// Requests waiting out the configured latency now, and the most there ever were.
        var delaying = 0
        var mostDelayingAtOnce = 0
        /// Per Cleeng customer token: when each getAccessStatus arrived, in ms after its receipt.
        var cleengPolls: [String: [Int64]] = [:]
    }

    private let state = Mutex(State())
    private let keyLimit: Int

    public init(keyLimit: Int) {
        self.keyLimit = keyLimit
    }

    /// Counts one received provider request, under `key` when it carried one.
    public func received(_ key: String?) {
        state.withLock { state in
            state.total += 1
            guard let key else { return }
            if let count = state.requests[key] {
                state.requests[key] = count + 1
            } else if state.requests.count < keyLimit {
                state.requests[key] = 1
            } else {
                state.untrackedKeys += 1
            }
        }
    }

    /// Records a getAccessStatus arrival; returns how many this customer token has made.
    public func cleengPolled(customerToken: String, millisecondsAfterReceipt: Int64) -> Int {
        state.withLock { state in
            guard state.cleengPolls[customerToken] != nil || state.cleengPolls.count < keyLimit else { return 0 }
            var times = state.cleengPolls[customerToken, default: []]
            if times.count < 64 { times.append(millisecondsAfterReceipt) }
            state.cleengPolls[customerToken] = times
            return times.count
        }
    }

    /// When each getAccessStatus for `customerToken` arrived, in ms after the receipt was accepted.
    public func cleengPollTimes(customerToken: String) -> [Int64] { state.withLock { $0.cleengPolls[customerToken] ?? [] } }

    /// Brackets a request's configured latency, so a test can see how many were served at once.
    public func delayStarted() {
        state.withLock { state in
            state.delaying += 1
            state.mostDelayingAtOnce = max(state.mostDelayingAtOnce, state.delaying)
        }
    }

    public func delayEnded() { state.withLock { $0.delaying -= 1 } }

    /// The most requests that were waiting out the configured latency at the same time.
    public var mostDelayingAtOnce: Int { state.withLock { $0.mostDelayingAtOnce } }

    public func injectedError() {
        state.withLock { $0.injectedErrors += 1 }
    }

    /// Records that `key` took effect; true the first time.
    @discardableResult
    public func tookEffect(_ key: String) -> Bool {
        state.withLock { state in
            if state.effects.contains(key) { return false }
            guard state.effects.count < keyLimit else {
                state.untrackedKeys += 1
                return true
            }
            state.effects.insert(key)
            return true
        }
    }

    /// The number of requests received under `key` (0 when none).
    public func requests(_ key: String) -> Int { state.withLock { $0.requests[key] ?? 0 } }
    /// 1 when `key` took effect, else 0.
    public func effects(_ key: String) -> Int { state.withLock { $0.effects.contains(key) ? 1 : 0 } }
    /// Every provider request received.
    public var total: Int { state.withLock { $0.total } }

    /// The document `GET /_sandbox/ledger` answers (see the type's documentation).
    public func document(key: String? = nil, summary: Bool = false) -> JSONValue {
        let snapshot: State = state.withLock { state in
            if summary {
                var counts = State()
                counts.total = state.total
                counts.injectedErrors = state.injectedErrors
                counts.untrackedKeys = state.untrackedKeys
                return counts
            }
            guard let key else { return state }
            var one = state
            one.requests = state.requests[key].map { [key: $0] } ?? [:]
            one.effects = state.effects.contains(key) ? [key] : []
            return one
        }
        var object: [String: JSONValue] = [
            "total": .integer(Int64(snapshot.total)),
            "injectedErrors": .integer(Int64(snapshot.injectedErrors)),
            "untrackedKeys": .integer(Int64(snapshot.untrackedKeys)),
            "distinctEffects": .integer(Int64(state.withLock { $0.effects.count })),
        ]
        if !summary {
            object["requests"] = .object(snapshot.requests.mapValues { .integer(Int64($0)) })
            var effects: [String: JSONValue] = [:]
            effects.reserveCapacity(snapshot.effects.count)
            for key in snapshot.effects { effects[key] = .integer(1) }
            object["effects"] = .object(effects)
        }
        return .object(object)
    }
}

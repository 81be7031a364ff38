import PaypipeCore
import Synchronization

/// Token buckets per (route, sender address), the state behind `CallbackRateLimit`. A plain
/// struct driven by the caller's clock, so the rules are tested without sockets or sleeps.
package struct CallbackTokenBuckets: Sendable {
    struct Bucket: Sendable {
        var tokens: Double
        var updatedMilliseconds: Int64
    }

    /// Senders remembered at once; past it, buckets that have refilled are forgotten first, and a
    /// sender whose bucket was dropped while empty gets a full one again (the cost of a bound).
    let capacity: Int
    var buckets: [String: Bucket] = [:]

    package init(capacity: Int = 10_000) { self.capacity = capacity }

    /// Senders remembered right now.
    package var count: Int { buckets.count }

    /// Takes a token for `key` if one is left.
    package mutating func take(_ key: String, limit: CallbackRateLimit, nowMilliseconds now: Int64) -> Bool {
        take(key, limit: CallbackRateLimit.Rate(burst: limit.burst, perSecond: limit.perSecond), nowMilliseconds: now)
    }

    /// Takes a token for `key` under `limit` if one is left.
    package mutating func take(_ key: String, limit: CallbackRateLimit.Rate, nowMilliseconds now: Int64) -> Bool {
        var bucket = buckets[key] ?? Bucket(tokens: Double(limit.burst), updatedMilliseconds: now)
        let elapsed = Double(max(0, now - bucket.updatedMilliseconds)) / 1000
        bucket.tokens = min(Double(limit.burst), bucket.tokens + elapsed * limit.perSecond)
        bucket.updatedMilliseconds = now
        let allowed = bucket.tokens >= 1
        if allowed { bucket.tokens -= 1 }
        if buckets[key] == nil, buckets.count >= capacity { evict(limit: limit, nowMilliseconds: now) }
        buckets[key] = bucket
        return allowed
    }

    mutating func evict(limit: CallbackRateLimit.Rate, nowMilliseconds now: Int64) {
        let refillMilliseconds = Int64(Double(limit.burst) / max(limit.perSecond, 0.001) * 1000)
        buckets = buckets.filter { now - $0.value.updatedMilliseconds < refillMilliseconds }
        if buckets.count >= capacity { buckets.removeAll(keepingCapacity: true) }
    }
}

/// The buckets shared by one callback validator's requests.
package final class CallbackRateLimiter: Sendable {
    let buckets = Mutex(CallbackTokenBuckets())

    package init() {}

    /// nil when `route` has no limit or the request is within it (its sender's, and the order's
    /// its body names); else the 429 to answer.
    package func refusal(
        _ route: CallbackRoute, from address: String?, body: [UInt8] = [], nowMilliseconds: Int64 = Timestamp.nowMilliseconds()
    ) -> CallbackRejection? {
        guard let limit = route.rateLimit else { return nil }
        let sender = route.label + "|" + (address ?? "unknown")
        guard buckets.withLock({ $0.take(sender, limit: limit, nowMilliseconds: nowMilliseconds) }) else {
            return CallbackRejection(status: 429, code: .rateLimited, "too many callbacks from this address; retry later")
        }
        guard let perOrder = limit.perOrder, let key = ForwardedCallback.orderKey(in: body) else { return nil }
        let order = route.label + "|order|" + key.merchant + "\u{0}" + key.orderId
        guard buckets.withLock({ $0.take(order, limit: perOrder, nowMilliseconds: nowMilliseconds) }) else {
            return CallbackRejection(status: 429, code: .rateLimited, "too many callbacks for this order; retry later")
        }
        return nil
    }
}

import PaypipeCore
import TestSupport
import Testing
import Viva

@testable import CallbacksStage

@Suite struct CallbackRateLimitTests {
    let limit = CallbackRateLimit(burst: 3, perSecond: 2)

    @Test func aBurstThenTheRefillRate() {
        var buckets = CallbackTokenBuckets()
        func take(_ key: String, at now: Int64) -> Bool { buckets.take(key, limit: limit, nowMilliseconds: now) }
        let burst = (0..<4).map { _ in take("a", at: 0) }
        #expect(burst == [true, true, true, false])
        // Another sender has its own bucket.
        let other = take("b", at: 0)
        #expect(other)
        let early = take("a", at: 400), refilled = take("a", at: 500), again = take("a", at: 500)
        #expect(!early && refilled && !again)
        // Refill never exceeds the burst.
        let later = (0..<4).map { _ in take("a", at: 60_000) }
        #expect(later == [true, true, true, false])
    }

    /// One app backend forwards every customer's result from one address: many orders pass,
    /// one order hammered does not (Viva's route).
    @Test func anAppBackendForwardingManyOrdersIsNotLimitedButOneOrderIs() {
        let limiter = CallbackRateLimiter()
        let route = CallbackRoute(
            path: "/v", label: "v", rateLimit: CallbackRateLimit(burst: 400, perSecond: 100, perOrder: .init(burst: 2, perSecond: 1))
        ) {
            _, _ throws(CallbackRejection) in throw .ledgerUnavailable()
        }
        func body(_ orderId: String) -> [UInt8] { Array(#"{"orderId":"\#(orderId)","uri":"x"}"#.utf8) }
        let many = (0..<100).map { limiter.refusal(route, from: "10.0.0.1", body: body("order-\($0)"), nowMilliseconds: 0) }
        #expect(many.allSatisfy { $0 == nil })
        let one = (0..<3).map { _ in limiter.refusal(route, from: "10.0.0.1", body: body("order-0"), nowMilliseconds: 0) }
        #expect(one.prefix(1).allSatisfy { $0 == nil } && one[2]?.code == "RATE_LIMITED")
        // Another merchant's order of the same id has its own bucket.
        #expect(
            limiter.refusal(route, from: "10.0.0.1", body: Array(#"{"orderId":"order-0","merchant":"m2","uri":"x"}"#.utf8), nowMilliseconds: 0) == nil
        )
        #expect(VivaConnector.callbackRateLimit.perOrder != nil && VivaConnector.callbackRateLimit.burst >= 100)
    }

    @Test func theNumberOfSendersRememberedIsBounded() {
        var buckets = CallbackTokenBuckets(capacity: 10)
        for sender in 0..<100 { _ = buckets.take("s\(sender)", limit: limit, nowMilliseconds: 0) }
        #expect(buckets.count <= 10)
    }

    @Test func onlyRoutesWithALimitAreLimited() {
        let limiter = CallbackRateLimiter()
        let limited = CallbackRoute(path: "/l", label: "l", rateLimit: limit) { _, _ throws(CallbackRejection) in throw .ledgerUnavailable() }
        let open = CallbackRoute(path: "/o", label: "o") { _, _ throws(CallbackRejection) in throw .ledgerUnavailable() }
        let refusals = (0..<5).map { _ in limiter.refusal(limited, from: "10.0.0.1", nowMilliseconds: 0) }
        #expect(refusals.prefix(3).allSatisfy { $0 == nil })
        #expect(refusals[3]?.status == 429 && refusals[3]?.code == "RATE_LIMITED")
        #expect(limiter.refusal(limited, from: "10.0.0.2", nowMilliseconds: 0) == nil)
        #expect((0..<10).allSatisfy { _ in limiter.refusal(open, from: "10.0.0.1", nowMilliseconds: 0) == nil })
    }

    /// Behind an ingress every callback's TCP peer is the ingress: with it trusted, each client
    /// is limited by the address the ingress forwarded, so one client cannot starve the rest;
    /// an untrusted peer's header, and what a client writes left of the ingress's entry, are
    /// never believed.
    @Test func behindATrustedProxyEachForwardedClientHasItsOwnBucket() {
        let limiter = CallbackRateLimiter()
        let route = CallbackRoute(path: "/l", label: "l", rateLimit: limit) { _, _ throws(CallbackRejection) in throw .ledgerUnavailable() }
        let ingress: Set<String> = ["10.0.0.9", "fd00::9"]
        func refused(peer: String, forwarded: [String]) -> Bool {
            let client = ForwardedClient.address(peer: peer, forwardedFor: forwarded, trusted: ingress)
            return limiter.refusal(route, from: client, nowMilliseconds: 0) != nil
        }
        let hammering = (0..<5).map { _ in refused(peer: "10.0.0.9", forwarded: ["203.0.113.7"]) }
        #expect(hammering == [false, false, false, true, true])
        #expect(!refused(peer: "10.0.0.9", forwarded: ["198.51.100.2"]), "another client through the same ingress")
        #expect(!refused(peer: "fd00::9", forwarded: ["198.51.100.3, 2001:db8::1"]), "the right-most untrusted hop is the client")
        // A client cannot pick its bucket by writing the header itself.
        #expect(ForwardedClient.address(peer: "10.0.0.9", forwardedFor: ["203.0.113.99, 203.0.113.7"], trusted: ingress) == "203.0.113.7")
        #expect(ForwardedClient.address(peer: "192.0.2.1", forwardedFor: ["203.0.113.50"], trusted: ingress) == "192.0.2.1")
        #expect(ForwardedClient.address(peer: "10.0.0.9", forwardedFor: ["not-an-address"], trusted: ingress) == "10.0.0.9")
        #expect(ForwardedClient.address(peer: "10.0.0.9", forwardedFor: [], trusted: ingress) == "10.0.0.9")
        #expect(ForwardedClient.address(peer: "10.0.0.9", forwardedFor: ["10.0.0.9"], trusted: ingress) == "10.0.0.9")
    }
}

import Connectors
import Foundation
import NetsEasy
import PaypipeCore
import SignerStage
import StageRuntime
import StageWire
import SubmitterStage
import TestSupport
import Testing

@testable import LedgerStage

func leaseTimers(leaseMs: Int64 = 30_000, maxDispatches: Int64 = 5) -> PaypipeConfig.Timers {
    var timers = PaypipeConfig.Timers()
    timers.leaseMs = leaseMs
    timers.maxDispatches = maxDispatches
    return timers
}

func emitted(_ effects: [LedgerCore.Effect]) -> [Outcome] {
    effects.compactMap { if case .emit(let frame) = $0 { try? Outcome.parse(frame) } else { nil } }
}

@Suite("Leases: claims, redelivery by lapse, the dispatch cap")
struct LeaseCoreTests {
    @Test func aClaimHoldsTheOrderUntilItsLeaseLapsesAndOnlyTheCurrentGenerationIsGranted() async throws {
        var core = LedgerCore(
            store: try temporaryStore(), registry: await testRegistry(), timers: leaseTimers(leaseMs: 30_000), redeliverAfterMilliseconds: 1000)
        let first = dispatches(try core.intake([Array(netsChargeOrder.utf8)], now: 0))
        #expect(first.map(\.generation) == [1])
        let key = try order(netsChargeOrder).key
        #expect(core.handle(.claim([core.lease(key, 1)]), now: 500).0 == .claimed([true]))
        // Claimed: the redelivery delay alone no longer sends it again, however slow the provider.
        #expect(try core.redeliver(now: 20_000).isEmpty)
        // Renewed before it lapsed.
        #expect(core.handle(.claim([core.lease(key, 1)]), now: 25_000).0 == .claimed([true]))
        #expect(try core.redeliver(now: 50_000).isEmpty)
        // The holder stopped renewing (it died): the lease lapses and a new generation goes out.
        let again = dispatches(try core.redeliver(now: 55_001))
        #expect(again.map(\.generation) == [2])
        // The old copy is refused; the new one is granted; an order that ended grants nothing.
        #expect(core.handle(.claim([core.lease(key, 1), core.lease(key, 2)]), now: 55_100).0 == .claimed([false, true]))
        let done = Outcome(order: try order(netsChargeOrder), status: .succeeded, result: ["chargeId": "c"])
        _ = try core.submitted(done, generation: 2, now: 56_000)
        #expect(core.handle(.claim([core.lease(key, 2)]), now: 56_100).0 == .claimed([false]))
    }

    @Test func anOlderCopyIsTakenUpWhenThatIsSafeAndNobodyHoldsTheOrder() async throws {
        var core = LedgerCore(
            store: try temporaryStore(), registry: await testRegistry(), timers: leaseTimers(leaseMs: 30_000), redeliverAfterMilliseconds: 1000)
        _ = try core.intake([Array(netsChargeOrder.utf8)], now: 0)
        let key = try order(netsChargeOrder).key
        // Copies 2 and 3 go out while copy 1 still waits in a backlog, unclaimed.
        #expect(dispatches(try core.redeliver(now: 1001)).map(\.generation) == [2])
        #expect(dispatches(try core.redeliver(now: 3002)).map(\.generation) == [3])
        // No copy was ever claimed, so the first to arrive is taken up, and only that one.
        #expect(core.handle(.claim([core.lease(key, 1), core.lease(key, 3)]), now: 3100).0 == .claimed([true, false]))
        // Its holder dies; copy 4 goes out. Copy 1 is no longer safe (a copy reached a provider
        // and it would be sent as a first submission), copy 3 is (it resolves first).
        #expect(dispatches(try core.redeliver(now: 33_101)).map(\.generation) == [4])
        #expect(core.handle(.claim([core.lease(key, 1)]), now: 33_200).0 == .claimed([false]))
        #expect(core.handle(.claim([core.lease(key, 3), core.lease(key, 4)]), now: 33_300).0 == .claimed([true, false]))
        // The holder of copy 3 renews it.
        #expect(core.handle(.claim([core.lease(key, 3)]), now: 40_000).0 == .claimed([true]))
    }

    @Test func aRestartedLedgerGivesHoldersBackTheTimeItWasDown() async throws {
        let store = try temporaryStore()
        var core = LedgerCore(store: store, registry: await testRegistry(), timers: leaseTimers(leaseMs: 30_000), redeliverAfterMilliseconds: 1000)
        _ = try core.intake([Array(netsChargeOrder.utf8)], now: 0)
        let key = try order(netsChargeOrder).key
        #expect(core.handle(.claim([core.lease(key, 1)]), now: 0).0 == .claimed([true]))
        try core.recordAlive(now: 10_000)
        // The ledger was down from 10 s to 40 s: the lease lapsed meanwhile, the holder lives on.
        var restarted = LedgerCore(
            store: store, registry: await testRegistry(), timers: leaseTimers(leaseMs: 30_000), redeliverAfterMilliseconds: 1000)
        try restarted.resumeLeases(now: 40_000)
        #expect(try restarted.redeliver(now: 40_500).isEmpty)
        #expect(restarted.handle(.claim([restarted.lease(key, 1)]), now: 45_000).0 == .claimed([true]))
        #expect(try restarted.redeliver(now: 74_000).isEmpty)
        #expect(dispatches(try restarted.redeliver(now: 75_001)).map(\.generation) == [2])
    }

    @Test func aCrashLoopingLedgerLetsADeadHoldersLeaseLapseAndRedeliversItsOrder() async throws {
        let store = try temporaryStore()
        var timers = leaseTimers(leaseMs: 30_000)
        timers.leaseMaxMs = 200_000
        var core = LedgerCore(store: store, registry: await testRegistry(), timers: timers, redeliverAfterMilliseconds: 1000)
        _ = try core.intake([Array(netsChargeOrder.utf8)], now: 0)
        let key = try order(netsChargeOrder).key
        #expect(core.handle(.claim([core.lease(key, 1)]), now: 0).0 == .claimed([true]))
        // The holder dies at once. The ledger lives 5 s at a time, down 20 s between lives, for
        // longer than the lease's longest life: the holder's lease runs only while it is up, so it
        // lapses after six lives and the order goes out again instead of to review.
        try core.recordAlive(now: 5000)
        var now: Int64 = 5000
        var redelivered: [Int64] = []
        var outcomes: [Outcome] = []
        for _ in 0..<10 where redelivered.isEmpty && outcomes.isEmpty {
            now += 20_000
            var life = LedgerCore(store: store, registry: await testRegistry(), timers: timers, redeliverAfterMilliseconds: 1000)
            try life.resumeLeases(now: now)
            for _ in 0..<5 where redelivered.isEmpty {
                now += 1000
                let effects = try life.redeliver(now: now)
                redelivered += dispatches(effects).map(\.generation)
                outcomes += emitted(effects)
                try life.recordAlive(now: now)
            }
        }
        #expect(redelivered == [2])
        #expect(outcomes.isEmpty)
    }

    @Test func unclaimedCopiesBackOffAndOnlyClaimedOnesCountTowardTheCap() async throws {
        var core = LedgerCore(
            store: try temporaryStore(), registry: await testRegistry(), timers: leaseTimers(leaseMs: 30_000, maxDispatches: 2),
            redeliverAfterMilliseconds: 1000)
        _ = try core.intake([Array(netsChargeOrder.utf8)], now: 0)
        let key = try order(netsChargeOrder).key
        #expect(try core.redeliver(now: 900).isEmpty)
        #expect(dispatches(try core.redeliver(now: 1001)).map(\.generation) == [2])
        // A second unclaimed copy waits twice as long, and neither counts toward the cap of 2.
        #expect(try core.redeliver(now: 2500).isEmpty)
        #expect(dispatches(try core.redeliver(now: 3002)).map(\.generation) == [3])
        // Claimed and lost (the holder's lease lapses) twice: that is the cap.
        #expect(core.handle(.claim([core.lease(key, 3)]), now: 3100).0 == .claimed([true]))
        #expect(core.handle(.claim([core.lease(key, 3)]), now: 4000).0 == .claimed([true]))  // a renewal
        #expect(dispatches(try core.redeliver(now: 34_001)).map(\.generation) == [4])
        #expect(core.handle(.claim([core.lease(key, 4)]), now: 34_100).0 == .claimed([true]))
        let capped = try core.redeliver(now: 64_101)
        #expect(dispatches(capped).isEmpty)
        let review = emitted(capped)
        #expect(review.count == 1 && review.first?.status == .unknown && review.first?.error?.code == "NEEDS_REVIEW")
        #expect(core.counters.dispatchCapReached == 1)
        #expect(try core.store.reviewOutcomes(limit: 10).count == 1)
        // In review: never dispatched again, and no claim is granted.
        #expect(try core.redeliver(now: 1_000_000).isEmpty)
        #expect(core.handle(.claim([core.lease(key, 4)]), now: 1_000_001).0 == .claimed([false]))
    }

    @Test func aClaimRequestRoundTripsAndRejectsOversizedBatches() throws {
        let claims = [LeaseClaim(key: OrderKey(merchant: "default", orderId: "a"), generation: 3, token: 77)]
        #expect(try LedgerRequest.parse(LedgerRequest.claim(claims).json.bytes) == .claim(claims))
        let tooMany = LedgerRequest.claim(Array(repeating: claims[0], count: LeaseClaim.maxPerRequest + 1)).json.bytes
        #expect(throws: EnvelopeError.self) { try LedgerRequest.parse(tooMany) }
        #expect(try LedgerReply.parse(LedgerReply.claimed([true, false]).json.bytes, for: .claim(claims + claims)) == .claimed([true, false]))
    }

    @Test func leaseTimersAreOptionalAndValidated() throws {
        func parse(_ timers: [String: Int64]) throws -> PaypipeConfig {
            try PaypipeConfig.parse(Array(DemoConfig.text(sandboxURL: "http://127.0.0.1:9", timers: timers).utf8))
        }
        #expect(try parse([:]).timers.leaseMs == 30_000 && parse([:]).timers.maxDispatches == 5)
        var expected = leaseTimers(leaseMs: 900, maxDispatches: 2)
        expected.httpRequestTimeoutMs = 500
        #expect(try parse(["leaseMs": 900, "httpRequestTimeoutMs": 500, "maxDispatches": 2]).timers == expected)
        #expect { try parse(["leaseMs": 299, "httpRequestTimeoutMs": 100]) } throws: { ($0 as? ConfigError)?.path == "timers.leaseMs" }
        // A holder must always have a whole request left in two thirds of its lease.
        #expect { try parse(["leaseMs": 15_000]) } throws: { ($0 as? ConfigError)?.path == "timers.leaseMs" }
        #expect(try parse(["leaseMs": 15_001]).timers.leaseMs == 15_001)
        #expect { try parse(["leaseMaxMs": 30_000]) } throws: { ($0 as? ConfigError)?.path == "timers.leaseMaxMs" }
        #expect(try parse([:]).timers.leaseMaxMs == 600_000 && parse([:]).timers[.netsIdempotencyKeyLifetime] == 3_600_000)
        #expect { try parse(["maxDispatches": 0]) } throws: { ($0 as? ConfigError)?.path == "timers.maxDispatches" }
    }

    @Test func onlySubmittersClaimAndSubmittersNeverSettle() {
        let claim = LedgerRequest.claim([LeaseClaim(key: OrderKey(merchant: "default", orderId: "a"), generation: 1, token: 1)])
        let settle = LedgerRequest.settle(OrderKey(merchant: "default", orderId: "a"), event: "e", outcome: nil)
        #expect(CurveConfig.Role.allCases.filter { claim.permits($0) } == [.submitter])
        #expect(!settle.permits(.submitter) && !LedgerRequest.lookup(OrderKey(merchant: "default", orderId: "a")).permits(.submitter))
        #expect(StageLinks.admitted[.ledgerRPC]?.contains(.submitter) == true)
    }
}

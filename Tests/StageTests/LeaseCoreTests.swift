import Connectors
import Foundation
import LedgerStage
import NetsEasy
import PaypipeCore
import SignerStage
import StageRuntime
import StageWire
import SubmitterStage
import Testing

let netsChargeOrder = #"{"v":1,"orderId":"nc-1","provider":"nets","operation":"chargeSubscription","amount":9900,"currency":"SEK","params":{"subscriptionId":"d079718b-ff63-45dd-947b-4950c023750f","reference":"nc-ref-1"}}"#

func leaseTimers(leaseMs: Int64 = 30_000, maxDispatches: Int64 = 5) -> PaypipeConfig.Timers {
    var timers = PaypipeConfig.Timers()
    timers.leaseMs = leaseMs
    timers.maxDispatches = maxDispatches
    return timers
}

func dispatches(_ effects: [LedgerCore.Effect]) -> [DispatchFrame] {
    effects.compactMap { if case .dispatch(let frame) = $0 { readDispatch(frame) } else { nil } }
}

func emitted(_ effects: [LedgerCore.Effect]) -> [Outcome] {
    effects.compactMap { if case .emit(let frame) = $0 { try? Outcome.parse(frame) } else { nil } }
}

@Suite("Leases: claims, redelivery by lapse, the dispatch cap")
struct LeaseCoreTests {
    @Test func aClaimHoldsTheOrderUntilItsLeaseLapsesAndOnlyTheCurrentGenerationIsGranted() async throws {
        var core = LedgerCore(store: try temporaryStore(), registry: await testRegistry(), timers: leaseTimers(leaseMs: 30_000), redeliverAfterMilliseconds: 1000)
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
        var core = LedgerCore(store: try temporaryStore(), registry: await testRegistry(), timers: leaseTimers(leaseMs: 30_000), redeliverAfterMilliseconds: 1000)
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

    @Test func aRestartedLedgerGivesHoldersAWholeLeaseToRenew() async throws {
        let store = try temporaryStore()
        var core = LedgerCore(store: store, registry: await testRegistry(), timers: leaseTimers(leaseMs: 30_000), redeliverAfterMilliseconds: 1000)
        _ = try core.intake([Array(netsChargeOrder.utf8)], now: 0)
        let key = try order(netsChargeOrder).key
        #expect(core.handle(.claim([core.lease(key, 1)]), now: 0).0 == .claimed([true]))
        // The ledger was down from 10 s to 40 s: the lease lapsed meanwhile, the holder lives on.
        var restarted = LedgerCore(store: store, registry: await testRegistry(), timers: leaseTimers(leaseMs: 30_000), redeliverAfterMilliseconds: 1000)
        try restarted.resumeLeases(now: 40_000)
        #expect(try restarted.redeliver(now: 40_500).isEmpty)
        #expect(restarted.handle(.claim([restarted.lease(key, 1)]), now: 45_000).0 == .claimed([true]))
        #expect(try restarted.redeliver(now: 74_000).isEmpty)
        #expect(dispatches(try restarted.redeliver(now: 75_001)).map(\.generation) == [2])
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
        #expect(try parse([:]).timers.leaseMaxMs == 600_000 && parse([:]).timers.netsIdempotencyKeyLifetimeMs == 3_600_000)
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

@Suite("Redelivered work is resolved before it is submitted again")
struct RedeliveryTests {
    func signedWork(_ json: String, generation: Int64) async throws -> SubmitWork {
        let core = SignerCore(registry: await testRegistry())
        guard case .submit(let work) = core.sign(try order(json), acceptedAt: 1, nowSeconds: 1_800_000_000, generation: generation) else {
            throw EnvelopeTestError("not signed into work: \(json)")
        }
        return work
    }

    @Test func aRedeliveredPhonePeAuthInitAsksTheStatusFirstAndInitiatesOnlyWhenNotFound() async throws {
        let work = try await signedWork(phonePeOrder, generation: 2)
        var submission = Submission(work: work, connector: await connector(for: work))
        let resolve = try #require(work.resolve)
        #expect(submission.start() == .send(resolve, afterMilliseconds: 0))
        let notFound = HTTPResponseSpec(status: 404, body: Array(#"{"success":false,"code":"TRANSACTION_NOT_FOUND","message":"none"}"#.utf8))
        #expect(submission.receive(notFound, jitter: 0) == .send(work.request, afterMilliseconds: 0))
    }

    @Test func aRedeliveredPhonePeAuthInitThatPhonePeKnowsIsNotSentAgain() async throws {
        let work = try await signedWork(phonePeOrder, generation: 3)
        var submission = Submission(work: work, connector: await connector(for: work))
        _ = submission.start()
        // Still unknown after the resolution budget: review, never a second auth/init.
        var action = submission.receive(HTTPResponseSpec(status: 503), jitter: 0)
        for _ in 0..<10 {
            guard case .send(let request, _) = action else { break }
            #expect(request == work.resolve)
            action = submission.receive(HTTPResponseSpec(status: 503), jitter: 0)
        }
        guard case .finish(let outcome) = action else {
            Issue.record("the budget is bounded")
            return
        }
        #expect(outcome.status == .unknown && outcome.error?.code == "NEEDS_REVIEW")
    }

    /// A redelivered Nets charge is never sent again to learn whether the first copy was
    /// charged: its status is read by its Idempotency-Key. Charged: the order succeeds with
    /// no second POST. Unknown to Nets while the key is young: sent again. Unknown to Nets for an
    /// order older than Nets can be trusted to remember the key: review.
    @Test func aRedeliveredNetsChargeReadsItsStatusByItsKeyBeforeAnythingElse() async throws {
        var work = try await signedWork(netsChargeOrder, generation: 2)
        work.acceptedAt = Timestamp.nowMilliseconds() - 1000
        let status = try #require(NetsPayments.chargeStatusRequest(following: work.request))
        #expect(status.header("Idempotency-Key") == work.request.header("Idempotency-Key"))
        let charged = HTTPResponseSpec(status: 200, body: Array(#"{"paymentId":"p1","chargeId":"c1","completed":true}"#.utf8))
        var first = Submission(work: work, connector: await connector(for: work))
        #expect(first.start() == .send(status, afterMilliseconds: 0))
        guard case .finish(let outcome) = first.receive(charged, jitter: 0) else {
            Issue.record("a charge Nets made ends the order")
            return
        }
        #expect(outcome.status == .succeeded && outcome.result?["chargeId"] == "c1")

        var young = Submission(work: work, connector: await connector(for: work))
        _ = young.start()
        #expect(young.receive(HTTPResponseSpec(status: 404), jitter: 0) == .send(work.request, afterMilliseconds: 0))

        work.acceptedAt = Timestamp.nowMilliseconds() - PaypipeConfig.Timers().netsIdempotencyKeyLifetimeMs - 1000
        var old = Submission(work: work, connector: await connector(for: work))
        var action = old.start()
        for _ in 0..<10 {
            guard case .send(let request, _) = action else { break }
            #expect(request == status, "only the status read is sent")
            action = old.receive(HTTPResponseSpec(status: 404), jitter: 0)
        }
        guard case .finish(let review) = action else {
            Issue.record("the reads are bounded")
            return
        }
        #expect(review.status == .unknown && review.error?.code == "NEEDS_REVIEW")
    }

    @Test func aRedeliveredTrustPaymentsUpdateIsAppliedOnlyWhenNotInPlace() async throws {
        let update = #"{"v":1,"orderId":"tu-1","provider":"trustpayments","operation":"transactionUpdate","params":{"transactionReference":"1-2-3","updates":{"transactionactive":1}}}"#
        let work = try await signedWork(update, generation: 2)
        let queryReference = try #require(work.context["queryReference"]?.stringValue)
        /// Trust Payments' TRANSACTIONQUERY answer with the transaction's current `transactionactive`.
        func queried(active: String) -> HTTPResponseSpec {
            let record: JSONValue = ["transactionreference": "1-2-3", "transactionactive": .string(active)]
            let body: JSONValue = [
                "requestreference": .string(queryReference), "version": "1.00", "secrand": "ab12",
                "response": [["errorcode": "0", "found": "1", "requesttypedescription": "TRANSACTIONQUERY", "records": [record]]],
            ]
            return HTTPResponseSpec(status: 200, headers: [HTTPHeader("Content-Type", "application/json")], body: body.bytes)
        }
        var inPlace = Submission(work: work, connector: await connector(for: work))
        #expect(inPlace.start() == .send(try #require(work.resolve), afterMilliseconds: 0))
        guard case .finish(let outcome) = inPlace.receive(queried(active: "1"), jitter: 0) else {
            Issue.record("an update in place ends the order without sending it again")
            return
        }
        #expect(outcome.status == .succeeded)
        var notApplied = Submission(work: work, connector: await connector(for: work))
        _ = notApplied.start()
        #expect(notApplied.receive(queried(active: "0"), jitter: 0) == .send(work.request, afterMilliseconds: 0))
    }
}

import Cleeng
import Connectors
import HTTPTransport
import PaypipeCore
import SignerStage
import StageRuntime
import StageWire
import SubmitterStage
import Synchronization
import TestSupport
import Testing

@testable import LedgerStage
@testable import PollerStage

@Suite("Ledger core: callbacks, polls and missed callbacks")
struct LedgerAsyncTests {
    @Test func aSettledCallbackEndsTheOrderOnceAndItsRedeliveryChangesNothing() async throws {
        let registry = await testRegistry()
        var core = LedgerCore(store: try temporaryStore(), registry: registry)
        _ = try core.intake([Array(phonePeOrder.utf8)], now: 1000)
        let o = try order(phonePeOrder)
        // The authRequestId is the order's own, indexed at intake; the pending outcome repeats it.
        let reference = try #require(registry.connector(for: .phonepe)?.callbackReferences(for: o).first)
        let pending = Outcome(order: o, status: .pending, result: ["authRequestId": .string(reference), "redirectURL": "ppe://x"])
        _ = try core.submitted(pending, now: 2000)
        guard case .order(let stored?) = core.handle(.lookupRef(.phonepe, reference, merchant: o.merchant), now: 2100).0 else {
            Issue.record("the authRequestId finds the order")
            return
        }
        #expect(stored.key == o.key && stored.state == .pending && stored.pendingAt == 2000)
        let done = Outcome(order: o, status: .succeeded, result: ["state": "COMPLETED"])
        let (reply, effects) = core.handle(.settle(o.key, event: "phonepe|AR1|COMPLETED", outcome: done), now: 3000)
        #expect(reply == .settled(applied: true, duplicate: false))
        #expect(effects == [.emit(done.logged(seq: 2, in: core.store))])
        #expect(
            core.handle(.settle(o.key, event: "phonepe|AR1|COMPLETED", outcome: done), now: 3100) == (.settled(applied: false, duplicate: true), []))
        let other = Outcome(order: o, status: .failed, error: .init(code: "X", message: "late"))
        #expect(core.handle(.settle(o.key, event: "phonepe|AR1|FAILED", outcome: other), now: 3200).0 == .settled(applied: false, duplicate: false))
        // Only the order's own terminal outcome can be settled.
        #expect(core.handle(.settle(o.key, event: "e", outcome: pending), now: 3300).0 == .failure("settle takes the order's own terminal outcome"))
    }

    @Test func aPendingCleengReceiptGoesToThePollersAndAgainOnResume() async throws {
        var core = LedgerCore(store: try temporaryStore(), registry: await testRegistry())
        _ = try core.intake([Array(cleengOrderJSON.utf8)], now: 1000)
        let o = try order(cleengOrderJSON)
        let accepted = Outcome(order: o, status: .pending, result: ["receiptAccepted": true])
        let effects = try core.submitted(accepted, now: 2000)
        let polls = effects.compactMap { if case .poll(let frame) = $0 { readDispatch(frame) } else { nil } }
        #expect(polls.count == 1 && polls[0].acceptedAt == 2000 && polls[0].order == o)
        let (reply, again) = core.handle(.resumePolls, now: 5000)
        #expect(reply == .resumed(count: 1))
        #expect(again.count == 1)
        // Lost with a poller: swept up once well past its deadline.
        #expect(try core.redeliver(now: 50_000).isEmpty)
        #expect(try core.redeliver(now: 100_000).count == 1)
        #expect(try core.redeliver(now: 100_500).isEmpty)
    }

    @Test func aPhonePeOrderWithoutCallbackGetsOneStatusCheckPerWait() async throws {
        var core = LedgerCore(store: try temporaryStore(), registry: await testRegistry(), timers: timers(phonepeCallbackWaitMs: 10_000))
        _ = try core.intake([Array(phonePeOrder.utf8)], now: 1000)
        let o = try order(phonePeOrder)
        _ = try core.submitted(Outcome(order: o, status: .pending, result: ["authRequestId": "AR1"]), now: 2000)
        #expect(try core.redeliver(now: 11_000).isEmpty)
        let checks = try core.redeliver(now: 12_500)
        guard case .dispatch(let frame)? = checks.first, let dispatch = readDispatch(frame) else {
            Issue.record("expected a status check")
            return
        }
        #expect(dispatch.purpose == .statusCheck && dispatch.order == o)
        #expect(try core.redeliver(now: 13_000).isEmpty)
        #expect(core.counters.statusChecks == 1)
    }

    @Test func anOrderSentForReviewIsNeverDispatchedOrCheckedAgainButACallbackStillSettlesIt() async throws {
        var core = LedgerCore(store: try temporaryStore(), registry: await testRegistry(), timers: timers(phonepeCallbackWaitMs: 10_000))
        _ = try core.intake([Array(phonePeOrder.utf8)], now: 1000)
        let o = try order(phonePeOrder)
        _ = try core.submitted(Outcome(order: o, status: .pending, result: ["authRequestId": "AR1"]), now: 2000)
        let review = Outcome(order: o, status: .unknown, error: .init(code: Outcome.ErrorInfo.needsReviewCode, message: "the provider cannot tell"))
        let emitted = try core.submitted(review, now: 3000)
        #expect(emitted == [.emit(review.logged(seq: 2, in: core.store))])
        guard case .order(let stored?) = core.handle(.lookup(o.key), now: 3100).0 else {
            Issue.record("the order is still found")
            return
        }
        #expect(stored.state == .review)
        // Neither a status check (PhonePe's follow-up) nor a redelivery, however late.
        #expect(try core.redeliver(now: 10_000_000).isEmpty)
        // A later unknown does not take it out of review; a genuine final callback ends it.
        _ = try core.submitted(Outcome(order: o, status: .unknown, error: .init(code: "OUTCOME_UNKNOWN", message: "m")), now: 3200)
        #expect(try core.redeliver(now: 20_000_000).isEmpty)
        let done = Outcome(order: o, status: .succeeded, result: ["state": "COMPLETED"])
        #expect(core.handle(.settle(o.key, event: "phonepe|AR1|COMPLETED", outcome: done), now: 4000).0 == .settled(applied: true, duplicate: false))
    }

    /// A status check's answer counts only for the order's current generation: each check, and
    /// an operator's re-check of an order in review, is dispatched under a new one, so a stale
    /// answer (a slow submitter's, or a replayed frame) cannot end the order.
    @Test func onlyTheLatestStatusCheckAnswersAPendingOrAReviewOrder() async throws {
        var core = LedgerCore(store: try temporaryStore(), registry: await testRegistry(), timers: timers(phonepeCallbackWaitMs: 10_000))
        _ = try core.intake([Array(phonePeOrder.utf8)], now: 1000)
        let o = try order(phonePeOrder)
        _ = try core.submitted(Outcome(order: o, status: .pending, result: ["authRequestId": "AR1"]), now: 2000)
        func check(_ effects: [LedgerCore.Effect]) throws -> DispatchFrame {
            guard case .dispatch(let frame)? = effects.first, let dispatch = readDispatch(frame) else { throw CancellationError() }
            return dispatch
        }
        let first = try check(try core.redeliver(now: 12_500))
        let second = try check(try core.redeliver(now: 23_000))
        #expect(second.generation == first.generation + 1)
        let failed = Outcome(order: o, status: .failed, error: .init(code: "PAYMENT_ERROR", message: "m"))
        let stale = try core.results([core.frame(failed, answering: first)], role: .submitter, now: 23_100)
        #expect(stale.contains { if case .refuse = $0 { true } else { false } } && core.counters.resultsRefused == 1)
        #expect(try core.store.lookup(o.key)?.state == .pending)

        // In review, the operator's re-check is the only answer that counts.
        let review = Outcome(order: o, status: .unknown, error: .init(code: Outcome.ErrorInfo.needsReviewCode, message: "the provider cannot tell"))
        _ = try core.results([core.frame(review, answering: second)], role: .submitter, now: 23_200)
        #expect(try core.store.lookup(o.key)?.state == .review)
        let recheck = try check(try core.administer(.recheck(o.key), operatorKey: "alice", now: 30_000).effects)
        #expect(recheck.generation == second.generation + 1)
        let succeeded = Outcome(order: o, status: .succeeded, result: ["state": "COMPLETED"])
        _ = try core.results([core.frame(succeeded, answering: second)], role: .submitter, now: 30_100)
        #expect(try core.store.lookup(o.key)?.state == .review, "the answer to the check before the re-check")
        let answered = try core.results([core.frame(succeeded, answering: recheck)], role: .submitter, now: 30_200)
        #expect(emitted(answered).map(\.status) == [.succeeded])
    }
}

import Connectors
import Foundation
import PaypipeCore
import PhonePe
import Sandbox
import SignerStage
import StageRuntime
import StageWire
import SubmitterStage
import TestSupport
import Testing
import TrustPayments

@testable import LedgerStage

let tpQueryOrder = #"{"v":1,"orderId":"tq-1","provider":"trustpayments","operation":"transactionQuery","params":{"transactionReference":"1-2-3"}}"#

@Suite("Ledger core: durable dedupe, outcomes, redelivery")
struct LedgerCoreTests {
    @Test func aNewOrderIsDispatchedOnceAndARepeatIsNot() async throws {
        var core = LedgerCore(store: try temporaryStore(), registry: await testRegistry())
        let first = try core.intake([Array(vivaOrder.utf8)], now: 1000)
        #expect(first.count == 1)
        guard case .dispatch(let frame) = first[0], let dispatch = readDispatch(frame) else {
            Issue.record("expected a dispatch")
            return
        }
        #expect(dispatch.order.orderId == "viva-1")
        #expect(dispatch.acceptedAt == 1000)
        #expect(dispatch.purpose == .submit)
        #expect(try core.intake([Array(vivaOrder.utf8)], now: 2000) == [])
        #expect(core.counters.duplicates == 1)
    }

    @Test func aRepeatedOrderGetsTheIdenticalTerminalOutcomeAndLaterTerminalsAreDropped() async throws {
        var core = LedgerCore(store: try temporaryStore(), registry: await testRegistry())
        _ = try core.intake([Array(phonePeOrder.utf8)], now: 1000)
        let o = try order(phonePeOrder)
        let pending = Outcome(order: o, status: .pending, result: ["redirectURL": "ppe://x"], at: "2026-11-21T05:00:00.000Z")
        let succeeded = Outcome(order: o, status: .succeeded, result: ["state": "COMPLETED"], at: "2026-11-21T05:00:01.000Z")
        let lateFailure = Outcome(order: o, status: .failed, error: .init(code: "X", message: "late"), at: "2026-11-21T05:00:02.000Z")
        #expect(try core.submitted(pending, now: 1000) == [.emit(pending.logged(seq: 1, in: core.store))])
        // While pending, a repeat gets the pending outcome again (duplicates of non-terminal outcomes are allowed).
        #expect(try core.intake([Array(phonePeOrder.utf8)], now: 1500) == [.emit(pending.logged(seq: 1, in: core.store))])
        #expect(try core.submitted(succeeded, now: 1000) == [.emit(succeeded.logged(seq: 2, in: core.store))])
        #expect(try core.submitted(lateFailure, now: 1000) == [])
        let pendingAfterTerminal = Outcome(order: o, status: .pending, at: "2026-11-21T05:00:03.000Z")
        #expect(try core.submitted(pendingAfterTerminal, now: 1000) == [])
        for _ in 0..<3 {
            #expect(try core.intake([Array(phonePeOrder.utf8)], now: 3000) == [.emit(succeeded.logged(seq: 2, in: core.store))])
        }
    }

    @Test func badFramesAreDroppedAndBadOrdersRejectedWithoutStoppingTheBatch() async throws {
        var core = LedgerCore(store: try temporaryStore(), registry: await testRegistry())
        let badAmount = #"{"v":1,"orderId":"bad-1","provider":"viva","operation":"sale","amount":0,"currency":"EUR","params":{}}"#
        let effects = try core.intake([Array("nonsense".utf8), [0xFF, 0xFE], Array(badAmount.utf8), Array(vivaOrder.utf8)], now: 1000)
        #expect(effects.count == 4)
        guard case .drop(let first) = effects[0], case .drop(let second) = effects[1], case .emit(let rejected) = effects[2],
            case .dispatch = effects[3]
        else {
            Issue.record("unexpected effects \(effects)")
            return
        }
        #expect(first.code == .malformedJSON)
        #expect(second.code == .invalidUTF8)
        let outcome = try Outcome.parse(rejected)
        #expect(outcome.status == .rejected)
        #expect(outcome.error?.code == "AMOUNT_NOT_POSITIVE")
        // The same bad order again: the identical rejection.
        #expect(try core.intake([Array(badAmount.utf8)], now: 9000) == [.emit(rejected)])
    }

    @Test func stalledOrdersAreRedeliveredButPendingAndTerminalOnesAreNot() async throws {
        var core = LedgerCore(store: try temporaryStore(), registry: await testRegistry(), redeliverAfterMilliseconds: 100)
        _ = try core.intake([Array(vivaOrder.utf8), Array(phonePeOrder.utf8), Array(tpQueryOrder.utf8)], now: 1000)
        let pending = Outcome(order: try order(phonePeOrder), status: .pending)
        let done = Outcome(order: try order(tpQueryOrder), status: .succeeded)
        _ = try core.submitted(pending, now: 1000)
        _ = try core.submitted(done, now: 1000)
        #expect(try core.redeliver(now: 1050) == [])
        let again = try core.redeliver(now: 1200)
        #expect(again.count == 1)
        if case .dispatch(let frame) = again.first { #expect(readDispatch(frame)?.order.orderId == "viva-1") }
        #expect(try core.redeliver(now: 1250) == [])  // re-dispatched at 1200, not stalled again yet
    }

    /// An order is stored and dispatched as upstream sent it, not written anew: its first
    /// dispatch and a redelivery after reopening the store carry its bytes, which decode to the
    /// order as it was taken in. The same order spelled another way is still the same order.
    @Test func anOrderTravelsAsUpstreamSentIt() async throws {
        let path = TestStores.location()
        let sent = #"{ "provider":"viva", "v":1, "orderId":"viva-\u0031", "operation":"sale", "amount":1050, "currency":"EUR", "params":{} }"#
        let expected = try order(vivaOrder)
        var firstDispatch: [UInt8] = []
        do {
            var core = LedgerCore(store: try TestStores.open(path), registry: await testRegistry(), redeliverAfterMilliseconds: 100)
            let effects = try core.intake([Array(sent.utf8)], now: 1000)
            guard effects.count == 1, case .dispatch(let frame) = effects[0] else {
                Issue.record("expected a dispatch, got \(effects)")
                return
            }
            firstDispatch = frame
            #expect(try core.intake([Array(vivaOrder.utf8)], now: 1010) == [])
        }
        var reopened = LedgerCore(store: try TestStores.open(path), registry: await testRegistry(), redeliverAfterMilliseconds: 100)
        let again = try reopened.redeliver(now: 1200)
        guard again.count == 1, case .dispatch(let redelivered) = again[0] else {
            Issue.record("expected a redelivery, got \(again)")
            return
        }
        for frame in [firstDispatch, redelivered] {
            #expect(DispatchFrame.orderJSON(in: frame).map(Array.init) == Array(sent.utf8))
            #expect(readDispatch(frame)?.order == expected)
        }
        // As the callback validator reads it.
        let stored = try #require(try reopened.store.lookup(expected.key))
        #expect(stored.orderJSON == sent)
        guard case .order(let decoded) = Order.decode(frame: Array(stored.orderJSON.utf8), catalog: testCatalog) else {
            Issue.record("the stored order does not decode")
            return
        }
        #expect(decoded == expected)
    }

    @Test func theStoreSurvivesReopening() async throws {
        let path = TestStores.location()
        do {
            var core = LedgerCore(store: try TestStores.open(path), registry: await testRegistry())
            _ = try core.intake([Array(vivaOrder.utf8)], now: 1000)
        }
        var reopened = LedgerCore(store: try TestStores.open(path), registry: await testRegistry())
        #expect(try reopened.intake([Array(vivaOrder.utf8)], now: 2000) == [])
    }
}

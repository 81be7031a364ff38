import Connectors
import Foundation
import PaypipeCore
import StageRuntime
import StageWire
import TestSupport
import Testing
import ZeroMQ

@testable import LedgerStage

/// The seqs of the outcomes among `effects`.
func seqs(_ effects: [LedgerCore.Effect]) -> [Int64] {
    effects.compactMap { effect -> Int64? in
        guard case .emit(let bytes) = effect else { return nil }
        return seq(of: bytes)
    }
}

@Suite("Outcome log: seq, replay, retention")
struct OutcomeLogTests {
    @Test func everyOutcomeGetsTheNextSeqAndTerminalCopiesKeepTheirs() async throws {
        var core = LedgerCore(store: try temporaryStore(), registry: await testRegistry())
        let rejected = try core.intake([Array(rejectedOrder("r-1").utf8), Array(rejectedOrder("r-2").utf8)], now: 1000)
        #expect(seqs(rejected) == [1, 2])
        _ = try core.intake([Array(phonePeOrder.utf8)], now: 1000)
        let o = try order(phonePeOrder)
        let pending = Outcome(order: o, status: .pending, result: ["redirectURL": "ppe://x"], at: "2026-11-21T05:00:00.000Z")
        let done = Outcome(order: o, status: .succeeded, at: "2026-11-21T05:00:01.000Z")
        _ = core.handle(.claim([core.lease(o.key)]), now: 2000)
        #expect(
            try core.results([core.frame(pending), core.frame(pending)], now: 2000) == [
                .emit(pending.logged(seq: 3, in: core.store)), .emit(pending.logged(seq: 4, in: core.store)),
            ])
        #expect(try core.results([core.frame(done)], now: 3000) == [.emit(done.logged(seq: 5, in: core.store))])
        // Repeats of a terminal outcome are the identical bytes with the same seq, and log nothing new.
        #expect(try core.intake([Array(phonePeOrder.utf8)], now: 4000) == [.emit(done.logged(seq: 5, in: core.store))])
        #expect(seqs(try core.intake([Array(rejectedOrder("r-1").utf8)], now: 4000)) == [1])
        let all = try core.store.outcomes(after: 0, limit: 100)
        #expect(all.outcomes.map(\.seq) == [1, 2, 3, 4, 5])
        #expect(all.outcomes.last.map { Array($0.text.utf8) } == done.logged(seq: 5, in: core.store))
        #expect(!all.more)
        let page = try core.store.outcomes(after: 1, limit: 2)
        #expect(page.outcomes.map(\.seq) == [2, 3] && page.more)
    }

    @Test func theSeqIsAddedAsTheLastMemberAndReplacesOneTheOutcomeNamedItself() throws {
        #expect(LedgerStore.withSeq(#"{"status":"pending"}"#, 7) == #"{"status":"pending","seq":7}"#)
        #expect(LedgerStore.withSeq("{\"status\":\"pending\"} \n", 8) == #"{"status":"pending","seq":8}"#)
        // A stage's outcome that names a seq of its own (top level or nested) does not get a
        // second member: the ledger's seq replaces the top-level one.
        let named = LedgerStore.withSeq(#"{"seq":99,"status":"pending"}"#, 9)
        #expect(seq(of: Array(named.utf8)) == 9)
        #expect(named.split(separator: "seq").count == 2)
        let nested = LedgerStore.withSeq(#"{"result":{"seq":1},"status":"pending"}"#, 10)
        #expect(seq(of: Array(nested.utf8)) == 10)
        guard case .object(let object)? = try? JSONValue.parse(Array(nested.utf8)) else {
            Issue.record("not an object")
            return
        }
        #expect(object["result"] == .object(["seq": .integer(1)]))
    }

    @Test func outcomesSurviveReopeningTheStore() async throws {
        let path = TestStores.location()
        do {
            var core = LedgerCore(store: try TestStores.open(path), registry: await testRegistry())
            _ = try core.intake((1...3).map { Array(rejectedOrder("k-\($0)").utf8) }, now: 1000)
        }
        var reopened = LedgerCore(store: try TestStores.open(path), registry: await testRegistry())
        #expect(try reopened.store.outcomes(after: 0, limit: 10).outcomes.map(\.seq) == [1, 2, 3])
        let next = try reopened.intake([Array(rejectedOrder("k-4").utf8)], now: 2000)
        #expect(seqs(next) == [4])
    }

    @Test func retentionRemovesOldOutcomesBoundedAndNeverReusesASeq() async throws {
        var core = LedgerCore(store: try temporaryStore(), registry: await testRegistry())
        _ = try core.intake((1...5).map { Array(rejectedOrder("old-\($0)").utf8) }, now: 1000)
        _ = try core.intake([Array(rejectedOrder("new-1").utf8)], now: 50_000)
        #expect(try core.store.transaction { try core.store.pruneOutcomes(recordedBefore: 10_000, limit: 3) } == 3)
        #expect(try core.store.transaction { try core.store.pruneOutcomes(recordedBefore: 10_000, limit: 3) } == 2)
        #expect(try core.store.outcomes(after: 0, limit: 10).outcomes.map(\.seq) == [6])
        #expect(try core.store.transaction { try core.store.pruneOutcomes(recordedBefore: 100_000, limit: 10) } == 1)
        let after = try core.intake([Array(rejectedOrder("new-2").utf8)], now: 60_000)
        #expect(seqs(after) == [7])
        // A pruned terminal outcome is still what a repeated order gets.
        #expect(seqs(try core.intake([Array(rejectedOrder("old-1").utf8)], now: 60_000)) == [1])
    }

    @Test func retentionTakesTheLowestSeqsFirstAndStopsAtTheFirstYoungerOne() async throws {
        var core = LedgerCore(store: try temporaryStore(), registry: await testRegistry())
        _ = try core.intake((1...2).map { Array(rejectedOrder("a-\($0)").utf8) }, now: 1000)
        // The wall clock stepped back: seq 3 is younger than seq 4 and 5.
        _ = try core.intake([Array(rejectedOrder("b-1").utf8)], now: 50_000)
        _ = try core.intake((1...2).map { Array(rejectedOrder("c-\($0)").utf8) }, now: 2000)
        #expect(try core.store.transaction { try core.store.pruneOutcomes(recordedBefore: 1000, limit: 10) } == 0)
        #expect(try core.store.transaction { try core.store.pruneOutcomes(recordedBefore: 10_000, limit: 10) } == 2)
        #expect(try core.store.outcomes(after: 0, limit: 10).outcomes.map(\.seq) == [3, 4, 5])
        // Kept until the younger one ahead of them is old too.
        #expect(try core.store.transaction { try core.store.pruneOutcomes(recordedBefore: 10_000, limit: 10) } == 0)
        #expect(try core.store.transaction { try core.store.pruneOutcomes(recordedBefore: 60_000, limit: 2) } == 2)
        #expect(try core.store.outcomes(after: 0, limit: 10).outcomes.map(\.seq) == [5])
    }

    @Test func replayRequestsAreReadStrictly() throws {
        #expect(try OutcomeReplay.Request.parse(Array(#"{"since":5}"#.utf8)) == OutcomeReplay.Request(since: 5, limit: 100))
        #expect(try OutcomeReplay.Request.parse(Array(#"{"since":0,"limit":999999}"#.utf8)).limit == OutcomeReplay.maxLimit)
        for bad in [#"{"limit":5}"#, #"{"since":-1}"#, #"{"since":1.5}"#, #"{"since":1,"limit":0}"#, #"{"since":1,"from":2}"#, "[]"] {
            #expect(throws: EnvelopeError.self) { try OutcomeReplay.Request.parse(Array(bad.utf8)) }
        }
        let trailer = OutcomeReplay.Trailer(next: 7, more: true)
        #expect(OutcomeReplay.Trailer.parse(trailer.bytes) == trailer)
    }

    @Test func configReadsReplayEndpointAndRetention() throws {
        let defaults = try demoConfig()
        #expect(defaults.endpoints.outcomesReplay == "tcp://127.0.0.1:5558")
        #expect(defaults.retention.outcomesDays == 30)
        let text = DemoConfig.text(sandboxURL: "http://127.0.0.1:9", endpoints: ["outcomesReplay": "tcp://127.0.0.1:6000"])
            .replacingOccurrences(of: #""endpoints":"#, with: #""retention": {"outcomesDays": 7}, "endpoints":"#)
        let config = try PaypipeConfig.parse(Array(text.utf8))
        #expect(config.endpoints.outcomesReplay == "tcp://127.0.0.1:6000")
        #expect(config.retention.outcomesDays == 7)
        let typo = text.replacingOccurrences(of: "outcomesDays", with: "outcomeDays")
        #expect(throws: ConfigError.self) { try PaypipeConfig.parse(Array(typo.utf8)) }
    }
}

@Suite("Canonical keys: merchant and orderId byte for byte")
struct CanonicalKeyTests {
    @Test func configLookupIsByteExact() throws {
        let config = PaypipeConfig(merchants: ["Kiosk": MerchantConfig()])
        #expect(throws: Rejection.self) { try config.merchant("\u{212A}iosk") }
        #expect(throws: Rejection.self) { try config.merchant("Kiosk\u{0}") }
        _ = try config.merchant("Kiosk")
        #expect(OrderKey(merchant: "\u{212A}iosk", orderId: "a") != OrderKey(merchant: "Kiosk", orderId: "a"))
        #expect(Set([OrderKey(merchant: "\u{212A}iosk", orderId: "a"), OrderKey(merchant: "Kiosk", orderId: "a")]).count == 2)
    }

    @Test func unicodeEquivalentMerchantsAreKeptApart() async throws {
        var core = LedgerCore(store: try temporaryStore(), registry: await testRegistry())
        let kelvin = vivaOrder.replacingOccurrences(of: #""orderId""#, with: #""merchant":"\u212Aiosk","orderId""#)
        let plain = vivaOrder.replacingOccurrences(of: #""orderId""#, with: #""merchant":"Kiosk","orderId""#)
        let effects = try core.intake([Array(kelvin.utf8), Array(plain.utf8)], now: 1000)
        #expect(effects.filter { if case .dispatch = $0 { true } else { false } }.count == 2)
        #expect(
            try core.store.lookup(OrderKey(merchant: "\u{212A}iosk", orderId: "viva-1"))?.key.merchant.utf8.elementsEqual("\u{212A}iosk".utf8) == true
        )
        // The signer's config lookup then rejects the Kelvin-sign merchant instead of using Kiosk's profile.
        let config = PaypipeConfig(merchants: ["Kiosk": try demoConfig().merchants["default"]!])
        #expect(throws: Rejection.self) { try config.merchant(try order(kelvin).merchant) }
    }

    @Test func aNulInTheMerchantIsRejectedAtIntakeAndNeverStored() async throws {
        var core = LedgerCore(store: try temporaryStore(), registry: await testRegistry())
        let withNul = vivaOrder.replacingOccurrences(of: #""orderId""#, with: #""merchant":"default\u0000x","orderId""#)
        let effects = try core.intake([Array(withNul.utf8)], now: 1000)
        guard effects.count == 1, case .emit(let bytes) = effects[0], let outcome = try? Outcome.parse(bytes) else {
            Issue.record("expected one rejected outcome, got \(effects)")
            return
        }
        #expect(outcome.status == .rejected && outcome.error?.code == "INVALID_MERCHANT")
        // Neither the cut key "default" nor the NUL key holds anything: the valid order goes ahead.
        #expect(try core.intake([Array(vivaOrder.utf8)], now: 2000).contains { if case .dispatch = $0 { true } else { false } })
        #expect(try core.store.lookup(OrderKey(merchant: "default\u{0}x", orderId: "viva-1")) == nil)
    }

    @Test func textIsBoundWithItsByteLength() throws {
        let store = try temporaryStore()
        let first = try store.transaction { try store.admitRejection(OrderKey(merchant: "a\u{0}b", orderId: "o-1"), outcome: "{}", now: 1) }
        let second = try store.transaction { try store.admitRejection(OrderKey(merchant: "a", orderId: "o-1"), outcome: "{}", now: 1) }
        guard case .recorded = first, case .recorded = second else {
            Issue.record("a key with a NUL and its cut prefix must be two keys: \(first), \(second)")
            return
        }
        let again = try store.transaction { try store.admitRejection(OrderKey(merchant: "a\u{0}b", orderId: "o-1"), outcome: "{}", now: 1) }
        guard case .known(.duplicate(let replay)) = again else {
            Issue.record("expected the stored outcome, got \(again)")
            return
        }
        #expect(replay == #"{"epoch":"\#(store.epoch)","seq":1}"#)
    }

    /// The texts of one statement share one buffer that grows as needed (SQLiteConnection):
    /// each must be stored as it was, whether it fits, outgrows the buffer, or is empty, and a
    /// shorter text after a longer one must not carry the longer one's tail.
    @Test func textsOfEverySizeAreStoredAsTheyWere() throws {
        let store = try temporaryStore()
        let long = "{\"note\":\"" + String(repeating: "é😀x", count: 3000) + "\"}"
        let texts = ["{\"a\":\"" + String(repeating: "a", count: 5000) + "\"}", long, "{}", #"{"b":1}"#]
        for (n, text) in texts.enumerated() {
            let merchant = String(repeating: "m", count: 1 + n * 40)
            guard
                case .recorded = try store.transaction({
                    try store.admitRejection(OrderKey(merchant: merchant, orderId: "o-\(n)"), outcome: text, now: 1)
                })
            else {
                Issue.record("text \(n) was not recorded")
                continue
            }
            let again = try store.transaction { try store.admitRejection(OrderKey(merchant: merchant, orderId: "o-\(n)"), outcome: "{}", now: 2) }
            guard case .known(.duplicate(let replay)) = again else {
                Issue.record("text \(n): expected the stored outcome, got \(again)")
                continue
            }
            #expect(replay == LedgerStore.withSeq(text, Int64(n + 1), epoch: store.epoch))
        }
    }

    @Test func anUnreadableMerchantsRejectionDoesNotPoisonALaterValidOrder() async throws {
        for merchant in ["42", "null", #""""#, #"{"a":1}"#] {
            var core = LedgerCore(store: try temporaryStore(), registry: await testRegistry())
            let bad = vivaOrder.replacingOccurrences(of: #""orderId""#, with: #""merchant":\#(merchant),"orderId""#)
            let rejected = try core.intake([Array(bad.utf8)], now: 1000)
            guard rejected.count == 1, case .emit(let bytes) = rejected[0], let outcome = try? Outcome.parse(bytes) else {
                Issue.record("expected one rejected outcome for merchant \(merchant), got \(rejected)")
                continue
            }
            #expect(outcome.status == .rejected && outcome.merchant != "default" && seq(of: bytes) == 1)
            let valid = try core.intake([Array(vivaOrder.utf8)], now: 2000)
            #expect(valid.count == 1 && valid.allSatisfy { if case .dispatch = $0 { true } else { false } }, "merchant \(merchant)")
        }
    }
}

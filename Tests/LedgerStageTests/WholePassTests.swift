import Foundation
import PaypipeCore
import StageWire
import TestSupport
import Testing

@testable import LedgerStage

/// One pass of the ledger carries many orders: PostgreSQL's store takes a pass's intake, claims
/// and held results set-wise, SQLite one by one. Either way each order must end exactly as it
/// would alone: repeats, keys named twice, claims that are not the holder's, stale results.
@Suite("A pass of many orders ends each as it would alone")
struct WholePassTests {
    @Test func repeatsAndKeysNamedTwiceInOnePassAreTakenInTurn() async throws {
        var core = LedgerCore(store: try temporaryStore(), registry: await testRegistry())
        let ids = (1...6).map { "pass-\($0)" }
        let rejectedThenValid = rejectedOrder("pass-7").replacingOccurrences(of: #""provider":"nope""#, with: #""provider":"viva""#)
        let frames = ids.map { vivaSale($0) } + [vivaSale("pass-1"), Array(rejectedThenValid.utf8), vivaSale("pass-7")]
        let effects = try core.intake(frames, now: 1000)
        #expect(dispatches(effects).map(\.order.orderId) == ids)
        #expect(emitted(effects).map(\.orderId) == ["pass-7", "pass-7"])
        #expect(emitted(effects).allSatisfy { $0.status == .rejected })
        #expect(core.counters.duplicates == 2)
        #expect(try core.store.counts() == [.open: 6])

        let keys = ids.map { OrderKey(merchant: "default", orderId: $0) }
        // Every claim of the pass at once: pass-5's generation was never dispatched. Then
        // renewals, and a pass that names one order twice (taken in turn).
        let claims = keys.prefix(4).map { core.lease($0) } + [core.lease(keys[4], 2), core.lease(keys[5])]
        #expect(core.handle(.claim(claims), now: 1100).0 == .claimed([true, true, true, true, false, true]))
        #expect(core.handle(.claim([core.lease(keys[5]), core.lease(keys[0])]), now: 1110).0 == .claimed([true, true]))
        #expect(core.handle(.claim([core.lease(keys[5]), core.lease(keys[5])]), now: 1120).0 == .claimed([true, true]))

        func outcome(_ id: String, _ status: Outcome.Status) throws -> Outcome {
            let order = try order(String(decoding: vivaSale(id), as: UTF8.self))
            return status == .failed
                ? Outcome(order: order, status: .failed, error: .init(code: "DECLINED", message: "m"))
                : Outcome(order: order, status: status, result: [:])
        }
        // One pass of results: two for pass-2 (the first stands), one for an order nobody
        // claimed (pass-5), a pending one and a stale generation's (pass-4, generation 2).
        let results = try core.results(
            [
                core.frame(try outcome("pass-1", .succeeded)), core.frame(try outcome("pass-2", .succeeded)),
                core.frame(try outcome("pass-2", .failed)), core.frame(try outcome("pass-3", .pending)),
                core.frame(try outcome("pass-4", .succeeded), generation: 2), core.frame(try outcome("pass-5", .succeeded)),
                core.frame(try outcome("pass-6", .failed)),
            ], role: .submitter, now: 1200)
        let out = emitted(results)
        #expect(out.map(\.orderId) == ["pass-1", "pass-2", "pass-3", "pass-6"])
        #expect(out.map(\.status) == [.succeeded, .succeeded, .pending, .failed])
        // The rejection took seq 1; its key's valid order got it again.
        #expect(seqs(results) == [2, 3, 4, 5])
        #expect(core.counters.resultsRefused == 2)
        #expect(try core.store.counts() == [.open: 2, .pending: 1])
        // What was logged is what was emitted, in seq order.
        let log = try core.store.outcomes(after: 1, limit: 10).outcomes
        #expect(log.map(\.seq) == [2, 3, 4, 5])
        #expect(log.map { Array($0.text.utf8) } == results.compactMap { if case .emit(let bytes) = $0 { bytes } else { nil } })
        // And a repeat of each order gets its stored outcome, byte for byte.
        let repeats = try core.intake(ids.prefix(3).map { vivaSale($0) }, now: 1300)
        #expect(repeats.compactMap { if case .emit(let bytes) = $0 { bytes } else { nil } } == Array(log.prefix(3).map { Array($0.text.utf8) }))
    }
}

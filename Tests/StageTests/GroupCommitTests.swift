import CSQLite
import Foundation
@testable import LedgerStage
import Logging
import PaypipeCore
import StageRuntime
import StageWire
import Testing

/// A Viva sale order as intake receives it.
func vivaSale(_ orderId: String) -> [UInt8] {
    Array(#"{"v":1,"orderId":"\#(orderId)","provider":"viva","operation":"sale","amount":1050,"currency":"EUR","params":{}}"#.utf8)
}

private func temporaryStorePath() -> String {
    TestStores.path()
}

/// Runs one SQL statement on the store through a connection of the test's own.
private func runSQL(_ sql: String, on path: String) throws {
    var db: OpaquePointer?
    defer { sqlite3_close(db) }
    guard sqlite3_open(path, &db) == SQLITE_OK, sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK else {
        throw HarnessError("\(sql): \(String(cString: sqlite3_errmsg(db)))")
    }
}

@Suite("The ledger's group commit: one transaction for the work of several readers")
struct GroupCommitTests {
    @Test func aGroupCommitsEveryPieceOrNoneAndKeepsItsCountersOnlyWhenItCommits() async throws {
        let path = temporaryStorePath()
        let decoder = LedgerCore(store: try LedgerStore(path: path), registry: await testRegistry()).decoder
        var core = LedgerCore(store: try LedgerStore(path: path), registry: await testRegistry())
        // The second order's row cannot be written: the first one's is already, in the same group.
        try runSQL("CREATE TRIGGER refuse_b BEFORE INSERT ON orders WHEN NEW.order_id='group-b' BEGIN SELECT RAISE(ABORT, 'refused'); END", on: path)
        let group: [LedgerCore.Work] = [.intake(decoder.intake([vivaSale("group-a")])), .intake(decoder.intake([vivaSale("group-b")]))]
        #expect(throws: (any Error).self) { try core.commit(group, now: 1000) }
        #expect(try core.store.lookup(OrderKey(merchant: "default", orderId: "group-a")) == nil)
        #expect(core.counters == LedgerCore.Counters())
        #expect(try core.store.counts() == [:])

        // Retried as it was once the store takes it: each order counted and dispatched once.
        try runSQL("DROP TRIGGER refuse_b", on: path)
        let done = try core.commit(group, now: 2000)
        #expect(done.map { dispatches($0.effects).count } == [1, 1])
        #expect(core.counters.ordersIn == 2)
        #expect(try core.store.counts() == [.open: 2])
        #expect(try core.store.lookup(OrderKey(merchant: "default", orderId: "group-a")) != nil)
        #expect(try core.store.lookup(OrderKey(merchant: "default", orderId: "group-b")) != nil)
    }

    @Test func aRequestInAGroupIsAnsweredAsItWouldBeAlone() async throws {
        var core = LedgerCore(store: try temporaryStore(), registry: await testRegistry(), timers: leaseTimers())
        let decoder = core.decoder
        let key = OrderKey(merchant: "default", orderId: "group-claim")
        let done = try core.commit(
            [.intake(decoder.intake([vivaSale("group-claim")])), .request(.claim([LeaseClaim(key: key, generation: 1)])), .request(.lookup(key))],
            now: 1000)
        #expect(done.count == 3)
        #expect(dispatches(done[0].effects).map(\.generation) == [1])
        #expect(done[1].reply == .claimed([true]))
        guard case .order(let stored?)? = done[2].reply else {
            Issue.record("no order in \(String(describing: done[2].reply))")
            return
        }
        #expect(stored.key == key)
    }

    @Test(.timeLimit(.minutes(1)))
    func workThatWaitsForACommitSharesTheNextAndEachCallerGetsItsOwnTurns() async throws {
        let core = LedgerService.Core(core: LedgerCore(store: try temporaryStore(), registry: await testRegistry()))
        let committer = GroupCommitter()
        let retrying = StoreRetry(metrics: StageMetrics(), logger: Logger(label: "test")) {}
        // Everything arrives while the writer is busy (here: not started yet).
        let callers = 20
        let turns = Task {
            try await withThrowingTaskGroup(of: (Int, [LedgerService.Turn]).self) { group in
                for i in 0..<callers {
                    group.addTask {
                        let items = core.decoder.intake([vivaSale("shared-\(i)"), vivaSale("shared-\(i)-second")])
                        return (i, try await committer.commit([.intake(items), .results([])]))
                    }
                }
                return try await group.reduce(into: [:]) { $0[$1.0] = $1.1 }
            }
        }
        #expect(await eventually(within: .seconds(20)) { committer.waitingCount == callers })
        let writer = Task { try await committer.run(core, retrying: retrying) }
        defer { writer.cancel() }

        let byCaller = try await turns.value
        #expect(committer.groupsCommitted.load(ordering: .relaxed) == 1)
        for i in 0..<callers {
            #expect(byCaller[i]?.count == 2, "caller \(i)")
            #expect(byCaller[i]?.first.map { dispatches($0.effects).map(\.order.orderId) } == ["shared-\(i)", "shared-\(i)-second"], "caller \(i)")
        }

        // Later work gets a transaction of its own.
        _ = try await committer.commit([.intake(core.decoder.intake([vivaSale("later")]))])
        #expect(committer.groupsCommitted.load(ordering: .relaxed) == 2)
        #expect(await core.counters.ordersIn == 2 * callers + 1)
    }

    @Test(.timeLimit(.minutes(1)))
    func aStoreThatStaysFailedFailsEveryWaitingCallerAndLaterOnesAtOnce() async throws {
        let path = temporaryStorePath()
        let core = LedgerService.Core(core: LedgerCore(store: try LedgerStore(path: path), registry: await testRegistry()))
        let committer = GroupCommitter()
        var policy = StoreRetry.Policy()
        policy.attempts = 1
        policy.notReadyBeforeExit = .zero
        let retrying = StoreRetry(policy: policy, metrics: StageMetrics(), logger: Logger(label: "test")) {}
        // Refused at once: a store locked from outside would block a thread of the test
        // process's pool for the busy timeout.
        try runSQL("CREATE TRIGGER refuse_all BEFORE INSERT ON orders BEGIN SELECT RAISE(ABORT, 'refused'); END", on: path)
        let writer = Task { try await committer.run(core, retrying: retrying) }

        await #expect(throws: LedgerStoreFailure.self) { try await committer.commit([.intake(core.decoder.intake([vivaSale("failed-1")]))]) }
        await #expect(throws: LedgerStoreFailure.self) { try await writer.value }
        await #expect(throws: LedgerStoreFailure.self) { try await committer.commit([.intake(core.decoder.intake([vivaSale("failed-2")]))]) }
    }
}

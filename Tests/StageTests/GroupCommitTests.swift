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
        let path = TestStores.path()
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
        let retrying = StoreRetry(metrics: StageMetrics(), logger: Logger(label: "test")) {}
        let committer = GroupCommitter(core: core, retrying: retrying)
        // Everything arrives while a transaction is under way and the writer task is not started.
        let callers = 20
        let turns = await committer.whileCommitting {
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
            return turns
        }
        #expect(committer.waitingCount == callers, "nothing commits them but the writer task")
        let writer = Task { try await committer.run() }
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

    /// With no transaction under way the caller commits its work on its own task: no writer
    /// task runs here at all.
    @Test(.timeLimit(.minutes(1)))
    func workWithNoTransactionUnderWayCommitsWithoutTheWriterTask() async throws {
        let core = LedgerService.Core(core: LedgerCore(store: try temporaryStore(), registry: await testRegistry()))
        let committer = GroupCommitter(core: core, retrying: StoreRetry(metrics: StageMetrics(), logger: Logger(label: "test")) {})
        for i in 0..<3 {
            let turns = try await committer.commit([.intake(core.decoder.intake([vivaSale("alone-\(i)")])), .results([])])
            #expect(turns.count == 2)
            #expect(turns.first.map { dispatches($0.effects).map(\.order.orderId) } == ["alone-\(i)"])
        }
        #expect(committer.groupsCommitted.load(ordering: .relaxed) == 3)
        #expect(await core.counters.ordersIn == 3)
    }

    /// A store that refuses every order, and a committer that gives up at the first failure.
    /// Refused at once: a store locked from outside would block a thread of the test process's
    /// pool for the busy timeout.
    func refusingStore() async throws -> (path: String, core: LedgerService.Core, committer: GroupCommitter) {
        let path = TestStores.path()
        let core = LedgerService.Core(core: LedgerCore(store: try LedgerStore(path: path), registry: await testRegistry()))
        var policy = StoreRetry.Policy()
        policy.attempts = 1
        policy.notReadyBeforeExit = .zero
        let committer = GroupCommitter(core: core, retrying: StoreRetry(policy: policy, metrics: StageMetrics(), logger: Logger(label: "test")) {})
        try runSQL("CREATE TRIGGER refuse_all BEFORE INSERT ON orders BEGIN SELECT RAISE(ABORT, 'refused'); END", on: path)
        return (path, core, committer)
    }

    @Test(.timeLimit(.minutes(1)))
    func aStoreThatStaysFailedFailsEveryWaitingCallerAndLaterOnesAtOnce() async throws {
        let (_, core, committer) = try await refusingStore()

        // Waiting for the writer task, which fails the whole group and stops.
        let waiting = await committer.whileCommitting {
            let waiting = Task { try await committer.commit([.intake(core.decoder.intake([vivaSale("failed-1")]))]) }
            #expect(await eventually(within: .seconds(20)) { committer.waitingCount == 1 })
            return waiting
        }
        let writer = Task { try await committer.run() }
        await #expect(throws: LedgerStoreFailure.self) { try await waiting.value }
        await #expect(throws: LedgerStoreFailure.self) { try await writer.value }
        // Later work fails at once, whether it would commit itself or wait.
        await #expect(throws: LedgerStoreFailure.self) { try await committer.commit([.intake(core.decoder.intake([vivaSale("failed-2")]))]) }
        #expect(committer.waitingCount == 0)
    }

    /// The same failure in a caller's own transaction: it and every later caller fail.
    @Test(.timeLimit(.minutes(1)))
    func aStoreThatFailsUnderACallersOwnTransactionStopsLaterWorkToo() async throws {
        let (path, core, committer) = try await refusingStore()
        await #expect(throws: LedgerStoreFailure.self) { try await committer.commit([.intake(core.decoder.intake([vivaSale("own-1")]))]) }
        try runSQL("DROP TRIGGER refuse_all", on: path)
        await #expect(throws: LedgerStoreFailure.self) { try await committer.commit([.intake(core.decoder.intake([vivaSale("own-2")]))]) }
        #expect(try await core.counts() == [:])
    }
}

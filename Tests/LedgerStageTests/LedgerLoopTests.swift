import CSQLite
import Foundation
import Logging
import PaypipeCore
import StageRuntime
import StageWire
import TestSupport
import Testing
import ZeroMQ

@testable import LedgerStage

/// A Viva sale order as intake receives it.
/// Runs one SQL statement on the store through a connection of the test's own.
private func runSQL(_ sql: String, on path: String) throws {
    var db: OpaquePointer?
    defer { sqlite3_close(db) }
    guard sqlite3_open(path, &db) == SQLITE_OK, sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK else {
        throw HarnessError("\(sql): \(String(cString: sqlite3_errmsg(db)))")
    }
}

@Suite("The ledger's group commit: one transaction for the work of one pass")
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
            [.intake(decoder.intake([vivaSale("group-claim")])), .request(.claim([core.lease(key)])), .request(.lookup(key))],
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

}

/// The ledger's loop on sockets of a context of the test's own. Its work sockets are bound at
/// inproc addresses, where a message is in the ledger's queue as soon as the test's send
/// returns, so what one pass can read is known before the loop starts.
final class LoopHarness: Sendable {
    let context: ZMQContext
    let loop: LedgerLoop
    let core: LedgerService.Core
    /// The store's tickets, for results that answer a dispatch as a stage's would.
    let tickets: DispatchTickets
    let metrics = StageMetrics()
    let intake, results, rpc: ZMQSocket
    let outcomes: ZMQSocket
    let prefix: String

    /// `outcomesConnected` false: upstream's PULL connects only when the test calls `connectOutcomes()`.
    init(
        storePath: String = TestStores.location(), limits: LedgerLoop.Limits = LedgerLoop.Limits(),
        policy: StoreRetry.Policy = StoreRetry.Policy(window: .seconds(10)), outcomesConnected: Bool = true
    ) async throws {
        let context = try ZMQContext()
        let prefix = "inproc://ledger-loop-\(UInt64.random(in: 0...UInt64.max))-"
        func bound(_ type: ZMQSocketType, _ name: String) throws -> ZMQSocket {
            let socket = try context.socket(type, options: stageOptions())
            try socket.bind(prefix + name)
            return socket
        }
        func connected(_ type: ZMQSocketType, _ name: String) throws -> ZMQSocket {
            let socket = try context.socket(type, options: stageOptions())
            try socket.connect(prefix + name)
            return socket
        }
        let registry = await testRegistry()
        let store = try TestStores.open(storePath)
        tickets = store.tickets
        let core = LedgerService.Core(core: LedgerCore(store: store, registry: registry, timers: leaseTimers()))
        let sockets = LedgerLoop.Sockets(
            intake: try bound(.pull, "intake"), results: try bound(.pull, "results"), rpc: try bound(.router, "rpc"),
            admin: try bound(.pair, "admin"), dispatch: try bound(.push, "dispatch"),
            outcomes: try bound(.push, "outcomes"),
            polls: try bound(.push, "polls"))
        loop = LedgerLoop(
            sockets: sockets, core: core, links: try StageLinks(config: try demoConfig(), role: .ledger),
            retrying: StoreRetry(policy: policy, metrics: metrics, logger: Logger(label: "test")), retention: PaypipeConfig.Retention(),
            limits: limits, metrics: metrics, logger: Logger(label: "test"))
        intake = try connected(.push, "intake")
        results = try connected(.push, "results")
        rpc = try connected(.dealer, "rpc")
        outcomes = outcomesConnected ? try connected(.pull, "outcomes") : try context.socket(.pull, options: stageOptions())
        self.context = context
        self.prefix = prefix
        self.core = core
    }

    func connectOutcomes() throws { try outcomes.connect(prefix + "outcomes") }

    /// The value of the gauge `name` (unlabelled) in the ledger's exposition; nil when absent.
    func gauge(_ name: String) -> Double? {
        let text = String(decoding: metrics.registry.emitToBuffer(), as: UTF8.self)
        return text.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap { Double($0.dropFirst(name.count + 1)) }
    }

    /// A signer's socket on the dispatch queue, connected when the test says.
    func signer() throws -> ZMQSocket {
        let socket = try context.socket(.pull, options: stageOptions())
        try socket.connect(prefix + "dispatch")
        return socket
    }

    /// The next message on `socket`, polled without blocking one of the few threads the tests
    /// share (the loop's own task needs one to start); nil after `limit`.
    func receive(_ socket: ZMQSocket, within limit: Duration = .seconds(20)) async throws -> ZMQMessage? {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            if let message = try socket.receive(dontWait: true) { return message }
            try await Task.sleep(for: .milliseconds(5))
        }
        return nil
    }

    func close(_ sockets: [ZMQSocket]) {
        for socket in sockets + [intake, results, rpc, outcomes] { socket.close() }
        context.terminate()
    }
}

@Suite("The ledger's loop: one thread polls, commits and sends", .timeLimit(.minutes(1)))
struct LedgerLoopTests {
    @Test func everythingOnePassReadsCommitsInOneTransactionAndComesOutInOrder() async throws {
        let h = try await LoopHarness()
        let signer = try h.signer()
        defer { h.close([signer]) }
        for id in ["pass-a", "pass-b", "pass-c"] { try h.intake.send(vivaSale(id)) }
        // The signer's answer for the first order, read in the same pass as the order itself.
        let issued = Outcome(
            orderId: "pass-a", merchant: "default", provider: "viva", operation: "sale", status: .pending, result: ["url": "vivapayclient://pay/v1"])
        let ticket = h.tickets.ticket(for: OrderKey(merchant: "default", orderId: "pass-a"), generation: 1)
        try h.results.send(StageResult(answering: .submit, ticket: ticket, outcome: issued).frame)
        let lookup = LedgerRequest.lookup(OrderKey(merchant: "default", orderId: "pass-b"))
        try h.rpc.send(ZMQMessage(frames: [Array("request-1".utf8), lookup.json.bytes]))
        try h.rpc.send(ZMQMessage(frames: [Array("request-2".utf8), Array("not a request".utf8)]))

        let running = Task { try await h.loop.run() }
        var dispatched: [String] = []
        for _ in 0..<3 {
            guard let frame = try await h.receive(signer), let dispatch = readDispatch(frame.body) else { break }
            dispatched.append(dispatch.order.orderId)
        }
        #expect(dispatched == ["pass-a", "pass-b", "pass-c"])
        let outcome = try await h.receive(h.outcomes).flatMap { try? Outcome.parse($0.body) }
        #expect(outcome?.orderId == "pass-a")
        let replies = [try await h.receive(h.rpc), try await h.receive(h.rpc)].compactMap { $0 }
        #expect(replies.map { String(decoding: $0.frames[0], as: UTF8.self) } == ["request-1", "request-2"])
        if case .order(let stored?)? = replies.first.flatMap({ try? LedgerReply.parse($0.frames[1], for: lookup) }) {
            #expect(stored.key.orderId == "pass-b", "the order taken in by the same transaction")
        } else {
            Issue.record("no order in the lookup's reply")
        }
        let refusal = String(decoding: replies.last?.frames[1] ?? [], as: UTF8.self)
        #expect(refusal.contains(#""ok":false"#))
        #expect(h.loop.transactionsCommitted.load(ordering: .relaxed) == 1, "three orders, one outcome and a lookup in one pass")

        h.loop.stop()
        try await running.value
    }

    /// Dispatches wait in the loop while no signer is connected, and once `dispatchBacklog`
    /// wait, intake is not read: the orders stay in the socket's queue, upstream's HWM pushes
    /// back. Every order goes out once, in order, when a signer connects.
    @Test func withNoSignerOrdersWaitIntakePausesAndEveryOrderGoesOutOnceASignerConnects() async throws {
        var limits = LedgerLoop.Limits()
        limits.batchSize = 2
        limits.dispatchBacklog = 4
        let h = try await LoopHarness(limits: limits)
        let ids = (0..<20).map { "backlog-\($0)" }
        for id in ids { try h.intake.send(vivaSale(id)) }
        let running = Task { try await h.loop.run() }
        #expect(await eventually(within: .seconds(20)) { h.core.counters.ordersIn == 4 })
        try await Task.sleep(for: .milliseconds(300))
        #expect(h.core.counters.ordersIn == 4, "intake is not read while four dispatches wait")

        let signer = try h.signer()
        defer { h.close([signer]) }
        var dispatched: [String] = []
        while dispatched.count < ids.count, let frame = try await h.receive(signer), let dispatch = readDispatch(frame.body) {
            dispatched.append(dispatch.order.orderId)
        }
        #expect(dispatched == ids)
        h.loop.stop()
        try await running.value
        #expect(h.core.counters.ordersIn == ids.count)
        #expect(try h.core.counts() == [.open: ids.count])
    }

    /// With no upstream connected the live push holds its outcomes and its lag grows; once
    /// upstream connects and takes them it is 0 again.
    @Test func thePushLagGrowsWhileNoConsumerTakesTheOutcomesAndEndsOnceOneDoes() async throws {
        let h = try await LoopHarness(outcomesConnected: false)
        let signer = try h.signer()
        defer { h.close([signer]) }
        try h.intake.send(Array(#"{"v":1,"orderId":"lag-1","provider":"viva","operation":"sale","amount":-5,"currency":"EUR","params":{}}"#.utf8))
        let running = Task { try await h.loop.run() }
        #expect(await eventually(within: .seconds(20)) { (h.gauge("paypipe_outcomes_push_lag_seconds") ?? 0) > 0 })

        try h.connectOutcomes()
        let outcome = try await h.receive(h.outcomes).flatMap { try? Outcome.parse($0.body) }
        #expect(outcome?.orderId == "lag-1" && outcome?.status == .rejected)
        #expect(await eventually(within: .seconds(20)) { h.gauge("paypipe_outcomes_push_lag_seconds") == 0 })
        h.loop.stop()
        try await running.value
    }

    /// An order sent to review shows as the review gauge's age, read from the store on a tick.
    @Test func anOrderInReviewAgesOnTheReviewGauge() async throws {
        let h = try await LoopHarness()
        let signer = try h.signer()
        defer { h.close([signer]) }
        try h.intake.send(vivaSale("review-1"))
        let running = Task { try await h.loop.run() }
        _ = try await h.receive(signer)
        #expect(h.gauge("paypipe_oldest_review_order_age_seconds") == 0)
        let sale = try order(String(decoding: vivaSale("review-1"), as: UTF8.self))
        let review = Outcome(
            order: sale, status: .unknown, error: .init(code: Outcome.ErrorInfo.needsReviewCode, message: "cannot tell"),
            at: Timestamp.iso8601(milliseconds: Timestamp.nowMilliseconds() - 60_000))
        let ticket = h.tickets.ticket(for: sale.key, generation: 1)
        try h.results.send(StageResult(answering: .submit, ticket: ticket, outcome: review).frame)
        #expect(await eventually(within: .seconds(20)) { (h.gauge("paypipe_oldest_review_order_age_seconds") ?? 0) >= 60 })
        h.loop.stop()
        try await running.value
    }

    @Test func aStoreThatStaysFailedEndsTheLoopNotReadyWithTheFailure() async throws {
        let path = TestStores.path()
        var policy = StoreRetry.Policy(window: .milliseconds(30))
        policy.firstDelay = .milliseconds(10)
        policy.notReadyBeforeExit = .zero
        let h = try await LoopHarness(storePath: path, policy: policy)
        let signer = try h.signer()
        defer { h.close([signer]) }
        try runSQL("CREATE TRIGGER refuse_all BEFORE INSERT ON orders BEGIN SELECT RAISE(ABORT, 'refused'); END", on: path)
        try h.intake.send(vivaSale("refused-1"))
        await #expect(throws: LedgerStoreFailure.self) { try await h.loop.run() }
        #expect(h.metrics.notReady?.contains("times in a row") == true, "\(h.metrics.notReady ?? "ready")")
        #expect(try h.core.counts() == [:])
    }
}

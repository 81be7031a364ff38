import CSQLite
import Foundation
import PaypipeCore
import PhonePe
import Sandbox
import StageRuntime
import StageWire
import TestSupport
import Testing

@testable import LedgerStage

/// Another connection to the ledger's store, from this test process, holding its write lock
/// until `release()`: SQLite's `BEGIN EXCLUSIVE`, or PostgreSQL's `LOCK TABLE` on what every
/// ledger transaction writes. The ledger's transactions then fail once their lock wait ends.
/// `readersPass`: on PostgreSQL, plain reads of those tables go on (SQLite's WAL lets them).
final class StoreLock {
    private var sqlite: OpaquePointer?
    private var postgres: (any StoreDatabase)?

    init(_ h: PipelineHarness, readersPass: Bool = false) throws {
        guard TestStores.postgres == nil else {
            let db = try TestStores.database(directory: h.directory)
            try db.execute("BEGIN; LOCK TABLE orders, outcome_log IN \(readersPass ? "EXCLUSIVE" : "ACCESS EXCLUSIVE") MODE")
            postgres = db
            return
        }
        let path = h.directory.appendingPathComponent("ledger.sqlite").path
        guard sqlite3_open(path, &sqlite) == SQLITE_OK else { throw HarnessError("cannot open \(path)") }
        // The ledger may be inside a transaction of its own at this moment.
        sqlite3_busy_timeout(sqlite, 10_000)
        guard sqlite3_exec(sqlite, "BEGIN EXCLUSIVE", nil, nil, nil) == SQLITE_OK else {
            throw HarnessError("cannot lock \(path): \(String(cString: sqlite3_errmsg(sqlite)))")
        }
    }

    func release() {
        if let postgres {
            try? postgres.execute("ROLLBACK")
            self.postgres = nil
        }
        guard sqlite != nil else { return }
        sqlite3_exec(sqlite, "ROLLBACK", nil, nil, nil)
        sqlite3_close(sqlite)
        sqlite = nil
    }

    deinit { release() }
}

/// CPU time (user + system) a process has used so far, from /proc/<pid>/stat, in seconds.
func cpuSeconds(of pid: Int32) -> Double? {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
        let afterName = stat.range(of: ") ", options: .backwards)
    else { return nil }
    // Fields after the name start at field 3 (state); utime and stime are fields 14 and 15.
    let fields = stat[afterName.upperBound...].split(separator: " ")
    guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
    return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

/// A store held locked from outside, and callbacks across a ledger restart.
@Suite("Store failures and ledger restarts through real processes", .serialized)
struct StoreFailureTests {
    static func netsLookup(_ id: String) -> String {
        #"{"v":1,"orderId":"\#(id)","provider":"nets","operation":"getSubscription","params":{"paymentId":"0123456789abcdef0123456789abcdef"}}"#
    }

    /// The ledger's `/healthz` (or `path`): status and body, or nil when it does not answer.
    static func health(_ h: PipelineHarness, path: String = "/healthz") -> (Int, String)? {
        guard let port = h.metricsPort(of: h.ledgerProcess) else { return nil }
        return httpExchange(port: port, method: "GET", path: path)
    }

    /// A crashed stage's report (from the Swift runtime's "Fatal error" on), else its log's end.
    static func crashOrEnd(of log: String) -> String {
        log.range(of: "Fatal error").map { String(log[$0.lowerBound...].prefix(4000)) } ?? String(log.suffix(3000))
    }

    /// `/healthz` once the ledger has logged its metrics port (just after its ready line).
    static func firstHealth(_ h: PipelineHarness) async throws -> (Int, String)? {
        for _ in 0..<50 {
            if let answer = health(h) { return answer }
            try await Task.sleep(for: .milliseconds(100))
        }
        return nil
    }

    /// Operators' reads (`paypipe order show`, `GET /review`) and upstream's replay are
    /// answered while the ledger's loop waits for a store whose writer lock is held from
    /// outside: they read on a connection of their own, on a thread of their own.
    @Test func operatorsReadsAndReplayAreAnsweredWhileTheLedgersWritesWait() async throws {
        let h = try await PipelineHarness()
        defer { Task { await h.shutdown() } }
        #expect(try await Self.firstHealth(h)?.0 == 200)
        try await h.send(rejectedOrder("read-1"))
        _ = try await h.collect(timeout: .seconds(30)) { $0.contains { $0.orderId == "read-1" } }
        let lock = try StoreLock(h, readersPass: true)
        defer { lock.release() }
        try await h.send(rejectedOrder("read-2"))
        // The loop is inside its retries, waiting for the store: /healthz says so.
        #expect(await eventually(within: .seconds(5)) { Self.health(h)?.0 == 503 }, "the ledger's loop waits for the store")

        let shown = try await OperatorCommandsTests.paypipe(
            ["order", "show", "read-1", "--json", "--admin", h.ledgerEndpoints["admin"]!, "--config", h.configPath])
        #expect(shown.status == 0, "\(shown.errors)")
        let story = try? JSONValue.parse(Array(shown.output.utf8))
        #expect(story?["outcomes"]?.arrayValue?.compactMap { $0["outcome"]?["orderId"]?.stringValue } == ["read-1"], "\(shown.output)")
        let port = try #require(h.metricsPort(of: h.ledgerProcess))
        #expect(httpExchange(port: port, method: "GET", path: "/review", receiveTimeoutSeconds: 3)?.0 == 200)
        let replay = try OutcomeReplayClient(context: h.context, endpoint: h.ledgerEndpoints["outcomesReplay"]!)
        let replayed = try await replay.fetch(since: 0, limit: 10, timeoutMilliseconds: 3000)
        await replay.close()
        #expect(replayed.outcomes.compactMap { try? Outcome.parse($0) }.map(\.orderId) == ["read-1"])
        #expect(Self.health(h)?.0 == 503, "answered while the loop still waited")

        lock.release()
        let outcomes = try await h.collect(timeout: .seconds(30)) { $0.contains { $0.orderId == "read-2" } }
        #expect(outcomes.contains { $0.orderId == "read-2" })
        #expect(h.ledgerProcess.isRunning)
    }

    @Test func aStoreLockedForLongerThanOneBusyWaitLosesNoOrder() async throws {
        let h = try await PipelineHarness()
        defer { Task { await h.shutdown() } }
        try h.startSigner()
        try h.startSubmitter()
        #expect(try await Self.firstHealth(h)?.0 == 200)
        let lock = try StoreLock(h)
        var expected = Set<String>()
        for i in 0..<10 {
            try await h.send(Self.netsLookup("locked-get-\(i)"))
            try await h.send(rejectedOrder("locked-rejected-\(i)"))
            expected.formUnion(["locked-get-\(i)", "locked-rejected-\(i)"])
        }
        // Held past one busy wait of the ledger's connection (2 s), but well within its retry
        // budget; /healthz tells meanwhile.
        let clock = ContinuousClock()
        let releaseAt = clock.now + .seconds(7)
        var reported: (Int, String)?
        while clock.now < releaseAt {
            if let answer = Self.health(h), answer.0 == 503 { reported = answer }
            try await Task.sleep(for: .milliseconds(250))
        }
        lock.release()
        #expect(reported?.1.contains("store") == true, "\(String(describing: reported))")
        let outcomes = try await h.collect(timeout: .seconds(60)) { Set($0.map(\.orderId)).isSuperset(of: expected) }
        #expect(Set(outcomes.map(\.orderId)).isSuperset(of: expected), "missing: \(expected.subtracting(outcomes.map(\.orderId)))")
        #expect(outcomes.first { $0.orderId == "locked-get-0" }?.error?.code == "NETS_NOT_FOUND")
        #expect(h.ledgerProcess.isRunning)
        // Ready again once a transaction went through.
        var healthy = false
        for _ in 0..<40 where !healthy {
            healthy = Self.health(h)?.0 == 200
            if !healthy { try await Task.sleep(for: .milliseconds(250)) }
        }
        #expect(healthy)
        // The per-state gauges, review included, come from the running counts.
        let metrics = h.metricsPort(of: h.ledgerProcess).flatMap { httpGet("http://127.0.0.1:\($0)/metrics") } ?? ""
        #expect(metrics.contains("paypipe_orders_review 0") && metrics.contains("paypipe_orders_open "), "\(metrics.prefix(400))")
        await h.shutdown()
    }

    /// Exits once its retry window (`store.retryWindowMs`, short here) has passed, not before.
    @Test func aStoreLockedForGoodMakesTheLedgerNotReadyAndExit75WithoutSpinning() async throws {
        let window = Duration.seconds(5)
        let h = try await PipelineHarness(storeRetryWindowMs: 5000)
        defer { Task { await h.shutdown() } }
        let ledger = h.ledgerProcess
        let pid = ledger.pid
        #expect(try await Self.firstHealth(h)?.0 == 200)
        let lock = try StoreLock(h)
        defer { lock.release() }
        try await h.send(Self.netsLookup("held-1"))
        let clock = ContinuousClock()
        let start = clock.now
        let firstCPU = try #require(cpuSeconds(of: pid))
        var lastCPU = firstCPU, lastSample = start
        var notReady: (Int, String)?
        while ledger.isRunning, clock.now < start + .seconds(90) {
            if let answer = Self.health(h), answer.0 == 503 { notReady = answer }
            if let cpu = cpuSeconds(of: pid), ledger.isRunning { (lastCPU, lastSample) = (cpu, clock.now) }
            try await Task.sleep(for: .milliseconds(200))
        }
        let waited = clock.now - start
        #expect(!ledger.isRunning, "the ledger still runs after \(waited)")
        guard !ledger.isRunning else { return }
        #expect(ledger.exitStatus == 75, "the ledger's log: \(Self.crashOrEnd(of: h.stderr(of: 0)))")
        #expect(waited >= window && waited < window + .seconds(20), "it took \(waited) to give up")
        #expect(notReady?.1.contains("store") == true, "\(String(describing: notReady))")
        // A spinning retry loop would use a core; waiting on locks and pauses uses next to none.
        let busy = lastCPU - firstCPU
        let wall = Double((lastSample - start).components.seconds) + 0.001
        #expect(busy < 0.2 * wall, "CPU \(busy) s over \(wall) s")
        let log = h.stderr(of: 0)
        #expect(log.contains("exiting for a restart"))
        #expect(!log.contains("0123456789abcdef0123456789abcdef") && !log.contains("held-1"))
        await h.shutdown()
    }

    /// Giving up must end in exit 75 even while `/healthz` is being asked: cancelling the metrics
    /// server with a connection it had accepted but not served would make NIO trap (SIGILL).
    /// A race, so a pass is not proof; a failure is.
    @Test func aLedgerGivingUpWhileItsHealthIsPolledHardStillExits75() async throws {
        let h = try await PipelineHarness(storeRetryWindowMs: 3000)
        defer { Task { await h.shutdown() } }
        let ledger = h.ledgerProcess
        #expect(try await Self.firstHealth(h)?.0 == 200)
        let port = try #require(h.metricsPort(of: ledger))
        let lock = try StoreLock(h)
        defer { lock.release() }
        try await h.send(Self.netsLookup("held-2"))
        let pollers = (0..<2).map { _ in
            Task {
                await onOwnThread {
                    var answered = 0
                    let deadline = ContinuousClock.now + .seconds(90)
                    while ledger.isRunning, ContinuousClock.now < deadline {
                        if httpExchange(port: port, method: "GET", path: "/healthz") != nil { answered += 1 }
                        usleep(1000)
                    }
                    return answered
                }
            }
        }
        var answered = 0
        for poller in pollers { answered += await poller.value }
        #expect(!ledger.isRunning)
        guard !ledger.isRunning else { return }
        let log = h.stderr(of: 0)
        #expect(ledger.exitStatus == 75, "after \(answered) answers; the ledger's log: \(Self.crashOrEnd(of: log))")
        #expect(!log.contains("Fatal error"))
        #expect(answered > 100, "only \(answered) /healthz answers while the ledger gave up")
        await h.shutdown()
    }

    /// A PostgreSQL server down for longer than the few seconds the ledger once retried (as long
    /// as a restart or a failover takes), and back within the retry window: the ledger rides
    /// through without exiting, not ready meanwhile, and every order sent meanwhile ends once.
    @Test(.enabled(if: TestStores.postgres != nil))
    func aDatabaseServerDownForLessThanTheRetryWindowCostsNoRestartAndNoOrder() async throws {
        // A server of the test's own: the other suites' stays up.
        let server = try #require(try await PostgresServer.start())
        defer { server.stop() }
        let h = try await PipelineHarness(store: server.url + "&schema=outage")
        defer { Task { await h.shutdown() } }
        try h.startSigner()
        try h.startSubmitter()
        let ledger = h.ledgerProcess
        #expect(try await Self.firstHealth(h)?.0 == 200)
        try await h.send(rejectedOrder("before-outage"))
        _ = try await h.collect(timeout: .seconds(30)) { $0.contains { $0.orderId == "before-outage" } }

        try await server.kill()
        let down = ContinuousClock.now
        var expected = Set<String>()
        for i in 0..<10 {
            try await h.send(Self.netsLookup("outage-get-\(i)"))
            try await h.send(rejectedOrder("outage-rejected-\(i)"))
            expected.formUnion(["outage-get-\(i)", "outage-rejected-\(i)"])
        }
        var notReady: (Int, String)?
        #expect(
            await eventually(within: .seconds(10)) {
                notReady = Self.health(h, path: "/readyz")
                return notReady?.0 == 503
            })
        #expect(notReady?.1.contains("the ledger store is failing") == true, "\(String(describing: notReady))")
        // The outage: down well past the dozen tries of earlier releases, which gave up within
        // about eight seconds, and not a moment more; an exit ends the wait early.
        let exited = await eventually(within: .seconds(12) - (ContinuousClock.now - down)) { !ledger.isRunning }
        #expect(!exited, "the ledger exited (\(String(describing: ledger.exitStatus))): \(Self.crashOrEnd(of: h.stderr(of: 0)))")
        try await server.restart()

        let outcomes = try await h.collect(timeout: .seconds(60)) { Set($0.map(\.orderId)).isSuperset(of: expected) }
        #expect(Set(outcomes.map(\.orderId)).isSuperset(of: expected), "missing: \(expected.subtracting(outcomes.map(\.orderId)))")
        #expect(outcomes.first { $0.orderId == "outage-get-0" }?.error?.code == "NETS_NOT_FOUND")
        // Once each in the outcome log, which upstream replays from.
        let log = try await replayWholeLog(context: h.context, endpoint: h.ledgerEndpoints["outcomesReplay"]!)
        let logged = Dictionary(grouping: log.compactMap { try? Outcome.parse($0.bytes).orderId }.filter(expected.contains), by: { $0 })
        #expect(Set(logged.keys) == expected && logged.values.allSatisfy { $0.count == 1 }, "\(logged.filter { $0.value.count != 1 })")
        #expect(ledger.isRunning && h.ledgerProcess.pid == ledger.pid, "the ledger was not restarted")
        #expect(await eventually(within: .seconds(10)) { Self.health(h, path: "/readyz")?.0 == 200 })
        #expect(h.stderr(of: 0).contains("the ledger store recovered"))
        await h.shutdown()
    }

    @Test func aCallbackThatArrivesWhileTheLedgerIsDownIsAnsweredOnceItIsBack() async throws {
        let h = try await PipelineHarness()
        defer { Task { await h.shutdown() } }
        try h.startSigner()
        try h.startSubmitter()
        try h.startCallbacks()
        try await h.send(AsyncFlowTests.phonePeOrder("pp-restart"))
        let pending = try #require(try await AsyncFlowTests.outcome(h, "pp-restart", .pending))
        let callback = try AsyncFlowTests.completedMandate("pp-restart", pending: pending)

        let old = h.ledgerProcess
        old.signal(SIGKILL)
        for _ in 0..<100 where old.isRunning { try await Task.sleep(for: .milliseconds(50)) }
        #expect(!old.isRunning)
        let port = h.callbacksPort
        let clock = ContinuousClock()
        let sent = clock.now
        let (verify, body) = (callback.xVerify, callback.body)
        let answer = Task {
            await onOwnThread {
                httpExchange(
                    port: port, method: "POST", path: "/callbacks/phonepe", headers: [("X-VERIFY", verify)], body: body,
                    receiveTimeoutSeconds: 40)
            }
        }
        // The product's own timer is under test: down longer than one short wait, yet within the
        // validator's budget, the callback is answered once the ledger is back.
        try await Task.sleep(for: .seconds(6))
        let restarting = clock.now
        try await h.restartLedger()
        let restarted = clock.now
        let reply = await answer.value
        #expect(
            reply?.0 == 200,
            """
            \(String(describing: reply)) after \(clock.now - sent); the ledger was restarted \(restarting - sent) after the \
            callback and was ready \(restarted - restarting) later
            the restarted ledger's log: \(h.stderr(of: 0).split(separator: "\n").suffix(40).joined(separator: "\n"))
            the callbacks' log: \(h.stderr(of: 3).split(separator: "\n").suffix(40).joined(separator: "\n"))
            """)
        #expect(reply?.1.contains("applied") == true)
        #expect(clock.now - sent < .seconds(25))
        #expect(try await AsyncFlowTests.outcome(h, "pp-restart", .succeeded) != nil)
        await h.shutdown()
    }
}

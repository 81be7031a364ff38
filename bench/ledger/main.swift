// paypipe-ledger-bench: the ledger's intake cost as its history grows. One real paypipe-ledger
// with no other stage: this process sends orders to its intake and stands in for the signers
// on its sign queue. Measured: intake to dispatch, i.e. the time from the first order sent to
// the last dispatch received (each order validated, deduplicated and committed before it is
// dispatched), once on an empty store and once on a store pre-filled with --history terminal
// orders (one SQL transaction of generated rows, not timed). Prints both rates and their ratio.
import BenchSupport
import CSQLite
import Connectors
import Foundation
import PaypipeCore
import StageRuntime
import ZeroMQ

let orders = argument("--orders", 20_000)
let warmup = argument("--warmup", 1_000)
let history = argument("--history", 5_000_000)
let binaries = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
let directory = FileManager.default.temporaryDirectory.appendingPathComponent("paypipe-ledger-bench-\(UUID().uuidString)")
try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)

func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}

func order(_ id: String) -> [UInt8] {
    Array(
        #"{"v":1,"orderId":"\#(id)","provider":"phonepe","operation":"authInit","amount":39900,"currency":"INR","params":{"merchantUserId":"U-\#(id)","subscriptionId":"SUB-\#(id)"}}"#
            .utf8)
}

/// Terminal orders as months of traffic leave them, written straight into the store in one
/// transaction; the ledger counts the orders in flight when it opens the store.
func prefill(_ path: String, count: Int) throws {
    var db: OpaquePointer?
    defer { sqlite3_close(db) }
    let sql = """
        PRAGMA synchronous=OFF;
        BEGIN;
        WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < \(count))
        INSERT INTO orders(merchant, order_id, order_json, state, outcome, accepted_at, dispatched_at, dispatches, provider, operation)
        SELECT 'default', printf('history-%09d', i),
          '{"v":1,"orderId":"history-' || i || '","provider":"phonepe","operation":"authInit","amount":39900,"currency":"INR","params":{"merchantUserId":"U-' || i || '","subscriptionId":"SUB-' || i || '"}}',
          'terminal',
          '{"v":1,"orderId":"history-' || i || '","merchant":"default","provider":"phonepe","operation":"authInit","status":"succeeded","result":{"state":"COMPLETED"},"seq":' || i || '}',
          1700000000000 + i, 1700000000000 + i, 1, 'phonepe', 'authInit'
        FROM n;
        COMMIT;
        """
    guard sqlite3_open(path, &db) == SQLITE_OK, sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK else {
        throw BenchError("prefill failed: \(String(cString: sqlite3_errmsg(db)))")
    }
}

/// A ledger on `store` with every address on a free port; its bound addresses by name.
func startLedger(_ store: String, config: String, name: String) throws -> (Child, [String: String]) {
    let child = try spawnChild(
        role: "ledger", name: name, executable: binaries.appendingPathComponent("paypipe-ledger").path,
        arguments: ["--config", config, "--store", store], environment: childEnvironment(logLevel: "error"), logDirectory: directory.path)
    try waitForMarker(child, "paypipe-ledger ready", timeout: 120)
    let line =
        (try String(contentsOfFile: child.stdoutPath, encoding: .utf8)).split(separator: "\n").first { $0.contains("paypipe-ledger ready") } ?? ""
    var endpoints: [String: String] = [:]
    for part in line.split(separator: " ").dropFirst(2) {
        let pair = part.split(separator: "=", maxSplits: 1)
        if pair.count == 2 { endpoints[String(pair[0])] = String(pair[1]) }
    }
    return (child, endpoints)
}

struct Run {
    let stored: Int
    let seconds: Double
    let ledgerCPU: Double
    var rate: Double { Double(orders) / seconds }
}

/// Sends `count` fresh orders and waits until each one has been dispatched; the elapsed time.
func sendAndAwaitDispatch(prefix: String, count: Int, intake: ZMQSender, signQueue: ZMQReceiver) async throws -> Double {
    let clock = ContinuousClock(), began = clock.now
    let sender = Task {
        for n in 0..<count { try await intake.send(order("\(prefix)-\(n)")) }
    }
    var dispatched = 0
    let deadline = clock.now + .seconds(600)
    while dispatched < count, clock.now < deadline {
        dispatched += try await signQueue.nextBatch(timeoutMilliseconds: 1000)?.count ?? 0
    }
    try await sender.value
    guard dispatched >= count else { throw BenchError("only \(dispatched) of \(count) orders were dispatched") }
    return seconds(clock.now - began)
}

func measure(stored: Int) async throws -> Run {
    let runDirectory = directory.appendingPathComponent("stored-\(stored)")
    try FileManager.default.createDirectory(at: runDirectory, withIntermediateDirectories: true)
    let store = runDirectory.appendingPathComponent("ledger.sqlite").path
    let any = "tcp://127.0.0.1:*"
    let configPath = runDirectory.appendingPathComponent("config.json").path
    try DemoConfig.text(
        sandboxURL: "http://127.0.0.1:9", callbacks: "127.0.0.1:0",
        endpoints: [
            "intake": any, "outcomes": any, "signQueue": any, "signedIn": any, "signedOut": any, "results": any,
            "ledgerRPC": any, "pollQueue": any, "outcomesReplay": any, "ledgerMetrics": "127.0.0.1:0",
        ]
    ).write(toFile: configPath, atomically: true, encoding: .utf8)
    if stored > 0 {
        // The ledger creates its schema; the history then goes in behind its back.
        let (creator, _) = try startLedger(store, config: configPath, name: "ledger-schema-\(stored)")
        ChildRegistry.shared.stop([creator])
        let clock = ContinuousClock(), began = clock.now
        try prefill(store, count: stored)
        let filled = clock.now
        // The fill skipped fsync: its dirty pages go to disk now, not during the
        // first fsync of the measured run.
        sync()
        print(
            String(
                format: "pre-filled %d terminal orders in %.1f s, flushed to disk in %.1f s", stored, seconds(filled - began),
                seconds(clock.now - filled)))
    }
    let (ledger, endpoints) = try startLedger(store, config: configPath, name: "ledger-\(stored)")
    let context = try ZMQContext()
    let push = try context.socket(
        .push,
        options: {
            var o = ZMQSocketOptions()
            o.sendHighWaterMark = 100_000
            return o
        }())
    try push.connect(endpoints["intake"]!)
    let pull = try context.socket(
        .pull,
        options: {
            var o = ZMQSocketOptions()
            o.receiveHighWaterMark = 100_000
            return o
        }())
    try pull.connect(endpoints["signQueue"]!)
    let intake = try ZMQSender(socket: push)
    let signQueue = try ZMQReceiver(socket: pull)
    _ = try await sendAndAwaitDispatch(prefix: "warm-\(stored)", count: warmup, intake: intake, signQueue: signQueue)
    let cpuBefore = cpuSeconds(ledger.pid) ?? 0
    let elapsed = try await sendAndAwaitDispatch(prefix: "bench-\(stored)", count: orders, intake: intake, signQueue: signQueue)
    let cpu = (cpuSeconds(ledger.pid) ?? cpuBefore) - cpuBefore
    ChildRegistry.shared.stop([ledger])
    _ = await intake.finish(drainTimeoutMilliseconds: 100)
    signQueue.stop()
    await signQueue.waitUntilClosed()
    context.terminate()
    return Run(stored: stored, seconds: elapsed, ledgerCPU: cpu)
}

do {
    print(
        "nproc: \(ProcessInfo.processInfo.activeProcessorCount); \(orders) orders (after \(warmup) warm-up orders), intake to dispatch, one paypipe-ledger"
    )
    let empty = try await measure(stored: 0)
    let full = try await measure(stored: history)
    print("")
    print("| stored orders | orders | intake to last dispatch | orders/s | ledger CPU |")
    print("|---|---|---|---|---|")
    for run in [empty, full] {
        print(String(format: "| %d | %d | %.2f s | %.0f | %.1f s |", run.stored, orders, run.seconds, run.rate, run.ledgerCPU))
    }
    print(String(format: "ratio (orders/s at %d stored / at 0): %.2f", history, full.rate / empty.rate))
} catch {
    print("bench failed: \(error)")
}
ChildRegistry.shared.stopAll()
try? FileManager.default.removeItem(at: directory)

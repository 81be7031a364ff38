import BenchSupport
import Connectors
import Foundation
import PaypipeCore
import StageRuntime
import Supervision
import Synchronization
import ZeroMQ

/// Many subscriptions coming due at the same moment (docs/protocol.md, "Schedules"), charged by
/// the whole pipeline (release binaries: sandbox, ledger, signer, submitter, callbacks):
/// 1. `--count` Nets subscriptions are created through upstream, each with a monthly schedule of
///    `--cycles` cycles (12) from tomorrow;
/// 2. the pipeline's own capacity: the same count of upstream `chargeSubscription` orders, timed
///    from the first sent to the last outcome;
/// 3. the schedules' clock is moved to just past tomorrow's midnight, so every cycle falls due at
///    once; timed from that moment to the last scheduled charge's outcome.
/// The sandbox then must hold one charge per subscription per phase: none twice, none missing.
///
///     paypipe-schedules-bench --bin-dir DIR [--count 100000] [--store URL] [--concurrency 256]
///
/// Prints one JSON line with the figures.
struct Tally: Sendable {
    var created = 0, charged = 0, scheduled = 0, other: [String: Int] = [:]
    var lastCharged: UInt64 = 0, lastScheduled: UInt64 = 0
}

@main
struct SchedulesBench {
    static func main() throws {
        let binDirectory = argument("--bin-dir") ?? ".build/release"
        let count = argument("--count", 100_000)
        let concurrency = argument("--concurrency", 256)
        let work = NSTemporaryDirectory() + "paypipe-schedules-bench-\(UUID().uuidString.prefix(8))"
        let logs = work + "/logs"
        try FileManager.default.createDirectory(atPath: logs, withIntermediateDirectories: true)
        // The store of a full run is large: removed once every child has stopped (`--keep` keeps it).
        defer { if !CommandLine.arguments.contains("--keep") { try? FileManager.default.removeItem(atPath: work) } }
        defer { ChildRegistry.shared.stopAll() }

        let ports = try freePorts(2)
        let (callbacks, sandboxPort) = ("127.0.0.1:\(ports[0])", ports[1])
        let any = "tcp://127.0.0.1:*"
        let offsetFile = work + "/clock-offset"
        var text = DemoConfig.text(
            sandboxURL: "http://127.0.0.1:\(sandboxPort)", callbacks: callbacks,
            endpoints: [
                "intake": any, "outcomes": any, "signQueue": any, "signedIn": any, "signedOut": any, "results": any, "ledgerRPC": any,
                "pollQueue": any, "outcomesReplay": any, "ledgerMetrics": "127.0.0.1:0",
            ])
        guard case .object(var document) = try JSONValue.parse(Array(text.utf8)) else { throw BenchError("the demo config") }
        document["schedules"] = ["batch": .integer(Int64(argument("--batch", 5000))), "clockOffsetFile": .string(offsetFile)]
        text = JSONValue.object(document).serialized
        let config = work + "/config.json"
        try text.write(toFile: config, atomically: true, encoding: .utf8)
        let store = argument("--store") ?? "\(work)/ledger.db"

        let environment = childEnvironment(logLevel: "error")
        func start(_ role: String, _ arguments: [String]) throws -> Child {
            try spawnChild(
                role: role, name: role, executable: "\(binDirectory)/paypipe-\(role)", arguments: arguments, environment: environment,
                logDirectory: logs)
        }
        _ = try waitForMarker(
            try start(
                "sandbox",
                [
                    "--config", config, "--port", String(sandboxPort), "--log-level", argument("--sandbox-log-level") ?? "error",
                    "--nets-complete-checkout-after-ms", "10", "--outbound-attempts", "30",
                ]),
            "listening")
        let ready = try waitForMarker(
            try start("ledger", ["--config", config, "--store", store, "--metrics", "127.0.0.1:0"]), LedgerAddresses.readyMarker)
        guard let ledger = LedgerAddresses(readyLine: ready) else { throw BenchError("the ledger's ready line: \(ready)") }
        _ = try start("signer", ["--config", config, "--sign-queue", ledger.signQueue, "--signed-in", ledger.signedIn, "--results", ledger.results])
        _ = try start(
            "submitter",
            [
                "--config", config, "--concurrency", String(concurrency), "--signed-out", ledger.signedOut, "--results", ledger.results,
                "--ledger-rpc", ledger.ledgerRPC,
            ])
        _ = try waitForMarker(try start("callbacks", ["--config", config, "--ledger-rpc", ledger.ledgerRPC]), "paypipe-callbacks listening")

        let context = try ZMQContext()
        var pullOptions = ZMQSocketOptions()
        pullOptions.receiveHighWaterMark = 400_000
        pullOptions.receiveTimeoutMilliseconds = 100
        let pull = try context.socket(.pull, options: pullOptions)
        _ = try pull.connect(ledger.outcomes)
        var pushOptions = ZMQSocketOptions()
        pushOptions.sendHighWaterMark = 10_000
        let push = try context.socket(.push, options: pushOptions)
        _ = try push.connect(ledger.intake)

        // The receiver: every outcome, by kind of order.
        let tally = Mutex(Tally())
        let subscriptions = Mutex<[String]>(Array(repeating: "", count: count))
        let running = Atomic<Bool>(true)
        let receiver = Thread {
            while running.load(ordering: .relaxed) {
                guard let message = try? pull.receive(), let outcome = try? JSONValue.parse(message.body),
                    let orderId = outcome["orderId"]?.stringValue, let status = outcome["status"]?.stringValue
                else { continue }
                let now = monotonicNanoseconds()
                tally.withLock { t in
                    switch (orderId, status) {
                    case (let id, "succeeded") where id.hasPrefix("sb-create-"):
                        if let index = Int(id.dropFirst("sb-create-".count)), let sid = outcome["result"]?["subscriptionId"]?.stringValue {
                            subscriptions.withLock { $0[index] = sid }
                        }
                        t.created += 1
                    case (let id, "succeeded") where id.hasPrefix("sb-charge-"):
                        t.charged += 1
                        t.lastCharged = now
                    case (let id, "succeeded") where id.hasPrefix(ScheduledAttempt.orderIdPrefix):
                        t.scheduled += 1
                        t.lastScheduled = now
                    case (_, "pending"): break
                    default: t.other["\(orderId.prefix(9)) \(status)", default: 0] += 1
                    }
                }
            }
        }
        receiver.start()
        defer { running.store(false, ordering: .relaxed) }

        func wait(_ label: String, seconds limit: Double, _ done: (Tally) -> Bool) throws {
            let deadline = monotonicNanoseconds() + UInt64(limit * 1e9)
            var nextReport = monotonicNanoseconds() + 10_000_000_000
            while monotonicNanoseconds() < deadline {
                let t = tally.withLock { $0 }
                if done(t) { return }
                if monotonicNanoseconds() > nextReport {
                    log("\(label): created \(t.created), charged \(t.charged), scheduled \(t.scheduled)")
                    nextReport += 10_000_000_000
                }
                if !t.other.isEmpty { throw BenchError("\(label): unexpected outcomes \(t.other)") }
                usleep(50_000)
            }
            throw BenchError("\(label): not done within \(limit) s: \(tally.withLock { $0 })")
        }

        // 1. The subscriptions, each with one cycle due tomorrow.
        let tomorrow = CivilDate(daysSinceEpoch: Timestamp.nowMilliseconds() / 86_400_000 + 1)
        // With one cycle, each charge would also end its subscription (one more event per charge).
        let schedule = #"{"interval":"P1M","firstChargeDate":"\#(tomorrow.iso8601)","count":\#(argument("--cycles", 12))}"#
        let createStart = monotonicNanoseconds()
        for index in 0..<count {
            let order =
                #"{"v":1,"orderId":"sb-create-\#(index)","provider":"nets","operation":"createSubscription","amount":9900,"currency":"SEK","params":{"endDate":"2036-01-01T00:00:00Z","interval":0,"reference":"r\#(index)","schedule":\#(schedule)}}"#
            _ = try push.send(Array(order.utf8))
        }
        try wait("creating", seconds: 1200) { $0.created == count }
        let createSeconds = Double(monotonicNanoseconds() - createStart) / 1e9
        log("created \(count) subscriptions in \(String(format: "%.1f", createSeconds)) s")

        // 2. The pipeline's capacity for the same charge, sent by upstream.
        let ids = subscriptions.withLock { $0 }
        let chargeStart = monotonicNanoseconds()
        for index in 0..<count {
            let order =
                #"{"v":1,"orderId":"sb-charge-\#(index)","provider":"nets","operation":"chargeSubscription","amount":9900,"currency":"SEK","params":{"subscriptionId":"\#(ids[index])","reference":"c\#(index)"}}"#
            _ = try push.send(Array(order.utf8))
        }
        try wait("upstream charges", seconds: 1200) { $0.charged == count }
        let chargeSeconds = Double(tally.withLock { $0.lastCharged } - chargeStart) / 1e9
        log("upstream charged \(count) in \(String(format: "%.1f", chargeSeconds)) s")

        // 3. Every cycle due at once: the schedules' clock to one second past tomorrow's midnight.
        let dueAt = tomorrow.daysSinceEpoch * 86_400_000 + 1000
        let scheduleStart = monotonicNanoseconds()
        try String(dueAt - Timestamp.nowMilliseconds()).write(toFile: offsetFile, atomically: true, encoding: .utf8)
        try wait("scheduled charges", seconds: 1200) { $0.scheduled == count }
        let scheduleSeconds = Double(tally.withLock { $0.lastScheduled } - scheduleStart) / 1e9
        log("scheduled charges: \(count) in \(String(format: "%.1f", scheduleSeconds)) s")
        usleep(1_000_000)

        // The sandbox's count: one Nets effect per create, per upstream charge and per cycle.
        guard let ledgerText = httpGetText("http://127.0.0.1:\(sandboxPort)/_sandbox/ledger"),
            case .object(let counted) = try JSONValue.parse(Array(ledgerText.utf8)), let effects = counted["effects"]?.objectValue,
            let requests = counted["requests"]?.objectValue
        else { throw BenchError("the sandbox's ledger") }
        let netsEffects = effects.keys.filter { $0.hasPrefix("nets:") }.count
        let repeated = requests.values.filter { ($0.integerValue ?? 0) > 1 }.count
        let figures: JSONValue = [
            "count": .integer(Int64(count)), "store": .string(store.hasPrefix("postgres") ? "postgres" : "sqlite"),
            "createSeconds": .fraction(createSeconds), "upstreamChargeSeconds": .fraction(chargeSeconds),
            "upstreamChargesPerSecond": .fraction(Double(count) / chargeSeconds), "scheduledChargeSeconds": .fraction(scheduleSeconds),
            "scheduledChargesPerSecond": .fraction(Double(count) / scheduleSeconds),
            "scheduledOverUpstream": .fraction(chargeSeconds / scheduleSeconds), "netsEffects": .integer(Int64(netsEffects)),
            "expectedNetsEffects": .integer(Int64(3 * count)), "referencesSentTwice": .integer(Int64(repeated)),
        ]
        print(figures.serialized)
        guard netsEffects == 3 * count else { throw BenchError("the sandbox counted \(netsEffects) Nets effects, not \(3 * count)") }
    }

    /// The sandbox's answer, through curl (this target links no HTTP client).
    static func httpGetText(_ url: String) -> String? {
        guard let curl = try? ChildProcess.run(["/usr/bin/curl", "-sf", url]), curl.status == 0 else { return nil }
        return curl.output
    }
}

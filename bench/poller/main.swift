// paypipe-poller-bench: one paypipe-cleeng-poller (or --pollers copies) holding N pending
// receipts against the sandbox (which never grants access) or --provider-url, with this
// process standing in for the ledger. Prints polls/s, the pollers' peak RSS and CPU per poll,
// and the worst lateness of a poll against its schedule.
import BenchSupport
import Connectors
import Foundation
import PaypipeCore
import StageRuntime
import StageWire
import ZeroMQ

let receipts = argument("--receipts", 100_000)
let intervalMs = argument("--interval-ms", 5000)
let giveUpMs = argument("--give-up-ms", 60000)
let concurrency = argument("--concurrency", 256)
/// Poller copies sharing the receipts (the poll queue is a PUSH: each gets an equal share).
let pollerCount = max(1, argument("--pollers", 1))
/// 1: acceptance times spread evenly over one interval (receipts arriving over time, polls
/// spread out); 0: every receipt accepted at the same instant (a burst of N polls per interval).
let spread = argument("--spread", 1)
/// A getAccessStatus endpoint to use instead of starting the sandbox (e.g. the nginx mock in
/// bench/poller/nginx-cleeng.conf), so the provider's own CPU stays out of the poller's way.
let providerURL = argument("--provider-url")
let binaries = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
let directory = FileManager.default.temporaryDirectory.appendingPathComponent("paypipe-poller-bench-\(UUID().uuidString)")
try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)

func httpGet(port: Int, path: String) -> String {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard connected == 0 else { return "" }
    let request = Array("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".utf8)
    _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
    var response: [UInt8] = [], buffer = [UInt8](repeating: 0, count: 65536)
    var timeout = timeval(tv_sec: 5, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    while true {
        let n = recv(fd, &buffer, buffer.count, 0)
        if n <= 0 { break }
        response += buffer[0..<n]
    }
    return String(decoding: response, as: UTF8.self)
}

func metric(_ text: String, _ name: String) -> Double {
    for line in text.split(separator: "\n") where line.hasPrefix(name + " ") {
        return Double(line.split(separator: " ").last ?? "") ?? 0
    }
    return 0
}

func peakRSSKiB(_ pid: pid_t) -> Int { statusKilobytes(pid, "VmHWM") ?? 0 }

/// A child with its output in the temp directory; PAYPIPE_LOG_LEVEL from our environment, else errors only.
func start(_ name: String, _ arguments: [String], waitFor marker: String?) throws -> Child {
    let environment = childEnvironment(logLevel: ProcessInfo.processInfo.environment["PAYPIPE_LOG_LEVEL"] ?? "error")
    let child = try spawnChild(
        role: name, name: name, executable: binaries.appendingPathComponent(name).path, arguments: arguments,
        environment: environment, logDirectory: directory.path)
    if let marker { try waitForMarker(child, marker) }
    return child
}

// This process is the ledger: it binds the poll queue, the results and the RPC endpoint.
let context = try ZMQContext()
let pollSocket = try context.socket(
    .push,
    options: {
        var o = ZMQSocketOptions()
        o.sendHighWaterMark = 200_000
        return o
    }())
let pollEndpoint = try pollSocket.bind("tcp://127.0.0.1:*")
let resultsSocket = try context.socket(.pull)
let resultsEndpoint = try resultsSocket.bind("tcp://127.0.0.1:*")
let rpcSocket = try context.socket(.router)
let rpcEndpoint = try rpcSocket.bind("tcp://127.0.0.1:*")
let rpc = try ZMQDuplex(socket: rpcSocket)
let results = try ZMQReceiver(socket: resultsSocket)
let polls = try ZMQSender(socket: pollSocket)
let rpcTask = Task {
    while let batch = try? await rpc.nextBatch() {
        for message in batch where message.frames.count == 3 {
            rpc.send(ZMQMessage(frames: [message.frames[0], message.frames[1], Array(#"{"ok":true,"count":0}"#.utf8)]))
        }
    }
}

let ports = try freePorts(1 + pollerCount)
let (sandboxPort, metricsPorts) = (ports[0], Array(ports[1...]))
let configPath = directory.appendingPathComponent("config.json").path
let config = DemoConfig.text(
    sandboxURL: providerURL ?? "http://127.0.0.1:\(sandboxPort)",
    endpoints: ["pollQueue": pollEndpoint, "results": resultsEndpoint, "ledgerRPC": rpcEndpoint],
    timers: ["cleengPollIntervalMs": Int64(intervalMs), "cleengGiveUpMs": Int64(giveUpMs)])
try config.write(toFile: configPath, atomically: true, encoding: .utf8)
do {
    if providerURL == nil {
        _ = try start(
            "paypipe-sandbox", ["--config", configPath, "--port", String(sandboxPort), "--cleeng-grant-after-ms=-1", "--log-level", "error"],
            waitFor: "listening")
    }
    let pollers = try metricsPorts.map { port in
        try start(
            "paypipe-cleeng-poller", ["--config", configPath, "--metrics", "127.0.0.1:\(port)", "--concurrency", String(concurrency)], waitFor: nil)
    }
    /// Every poller's metrics: counts summed, worst drift the largest.
    func metrics() -> [String] { metricsPorts.map { httpGet(port: $0, path: "/metrics") } }
    func sum(_ texts: [String], _ name: String) -> Double { texts.reduce(0) { $0 + metric($1, name) } }
    func worst(_ texts: [String], _ name: String) -> Double { texts.map { metric($0, name) }.max() ?? 0 }
    func peakRSS() -> Int { pollers.reduce(0) { $0 + peakRSSKiB($1.pid) } }
    func cpu() -> Double { pollers.reduce(0) { $0 + (cpuSeconds($1.pid) ?? 0) } }
    try await Task.sleep(for: .seconds(1))

    print(
        "nproc: \(ProcessInfo.processInfo.activeProcessorCount); pollers: \(pollerCount); receipts: \(receipts) (\(spread == 1 ? "accepted evenly over one interval" : "all accepted at once")); interval \(intervalMs) ms, give up \(giveUpMs) ms"
    )
    let clock = ContinuousClock(), began = clock.now
    let acceptedAt = Timestamp.nowMilliseconds()
    for n in 0..<receipts {
        let order =
            #"{"v":1,"orderId":"pb-\#(n)","merchant":"default","provider":"cleeng","operation":"appleReceipt","params":{"customerToken":"tok-\#(n)","offerId":"S123456789_US","receiptData":"ZGVtbw==","transactionId":"\#(1_000_000_000_000_000 + n)"}}"#
        let accepted = acceptedAt + (spread == 1 ? Int64(n) * Int64(intervalMs) / Int64(receipts) : 0)
        // The ledger's own frame: a hand-written one would go stale as dispatch frames change.
        try await polls.send(DispatchFrame.encode(orderJSON: order, acceptedAt: accepted))
    }
    print(
        String(
            format: "queued %d receipts in %.2f s", receipts,
            Double((clock.now - began).components.attoseconds) / 1e18 + Double((clock.now - began).components.seconds)))

    var ended = 0
    var statuses: [String: Int] = [:]
    let deadline = clock.now + .milliseconds(giveUpMs + 3 * intervalMs + 15_000)
    var lastReport = clock.now
    let cpuBefore = cpu()
    while ended < receipts, clock.now < deadline {
        let batch = try await results.nextBatch(timeoutMilliseconds: 500)
        ended += batch?.count ?? 0
        for message in batch ?? [] {
            let status = (try? JSONValue.parse(message.body))?["status"]?.stringValue ?? "unreadable"
            statuses[status, default: 0] += 1
            if status != "failed", statuses[status] == 1 {
                print("first \(status) outcome: \(String(decoding: message.body.prefix(400), as: UTF8.self))")
            }
        }
        if clock.now - lastReport >= .seconds(5) {
            lastReport = clock.now
            let texts = metrics()
            print(
                String(
                    format: "t=%5.1f s  polls=%8.0f  holding=%6.0f  ended=%6d  maxDrift=%6.0f ms  rss=%d MiB",
                    Double((clock.now - began).components.seconds), sum(texts, "paypipe_cleeng_polls_total"),
                    sum(texts, "paypipe_cleeng_receipts_polling"), ended, 1000 * worst(texts, "paypipe_cleeng_poll_drift_max_seconds"),
                    peakRSS() / 1024))
        }
    }
    let elapsed = clock.now - began
    let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    let texts = metrics()
    let pollCount = sum(texts, "paypipe_cleeng_polls_total")
    let drift = 1000 * worst(texts, "paypipe_cleeng_poll_drift_max_seconds")
    let rss = peakRSS()
    let cpuUsed = cpu() - cpuBefore
    print("")
    print("| pollers | receipts | ended | polls | polls/s | pollers' peak RSS | worst drift | pollers' CPU | CPU per poll |")
    print("|---|---|---|---|---|---|---|---|---|")
    print(
        String(
            format: "| %d | %d | %d | %.0f | %.0f | %d MiB | %.0f ms | %.1f s | %.0f µs |", pollerCount, receipts, ended, pollCount,
            pollCount / seconds,
            rss / 1024, drift, cpuUsed, 1e6 * cpuUsed / max(pollCount, 1)))
    let onTime = sum(texts, #"paypipe_cleeng_poll_drift_seconds_bucket{le="0.1"}"#)
    let late = sum(texts, #"paypipe_cleeng_poll_drift_seconds_bucket{le="1.0"}"#)
    print(
        String(
            format: "polls within 100 ms of their slot: %.2f %%; within 1 s: %.2f %%", 100 * onTime / max(pollCount, 1),
            100 * late / max(pollCount, 1)))
    print(
        "pollers say: \(texts.flatMap { $0.split(separator: "\n").filter { $0.hasPrefix("paypipe_cleeng_outcomes_total") } }.joined(separator: "; "))"
    )
    print("outcomes by status: \(statuses.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))")
    if ended < receipts { print("MISSING: \(receipts - ended) receipts did not end") }
    // Every receipt must be polled to its deadline: anything but `failed` means the bench measured nothing.
    if statuses["failed", default: 0] != receipts { print("NOT MEASURED: receipts ended other than failed (access never granted)") }
} catch {
    print("bench failed: \(error)")
}
ChildRegistry.shared.stopAll()
try? FileManager.default.removeItem(at: directory)
rpc.stop()
results.stop()
rpcTask.cancel()
_ = await polls.finish(drainTimeoutMilliseconds: 100)

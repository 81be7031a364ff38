import BenchSupport
import Foundation
import Histogram
import PaypipeCore
import StageRuntime

/// What one scenario runs.
struct ScenarioSpec: Codable, Sendable {
    var name: String
    var workload: Workload
    var series: String  // "W1", "W2", "W3" or "scale-out"
    var submitters: Int
    var signers: Int
    var concurrency: Int
    var orders: Int
    var sandboxLatencyMs: Int
    var rate: Double?
    var providerURL: String?
    /// Ledger copies over one PostgreSQL store; with more than none given, a `paypipe-streamer`
    /// of its own carries the signer-to-submitter hop.
    var ledgers: Int? = nil
}

/// Settings shared by every scenario of a run.
struct RunSettings: Sendable {
    var binDirectory: String
    var warmup: Int
    var drainTimeout: Double
    var maxSeconds: Double
    var logLevel: String?
    var logDirectory: String
    var keepTemp: Bool
    var sandboxArguments: [String]
    /// The signers' and submitters' nice increment, as `paypipe up --worker-nice` gives them.
    var workerNice: Int
    /// The ledger's store: nil for a SQLite file in the run's directory, or a PostgreSQL URL
    /// (each run takes a schema of its own).
    var postgresURL: String?
    /// The PostgreSQL server's data directory: its processes' CPU is counted as role "postgres".
    var postgresData: String?
    /// With it, every stage exports its spans there (the config's `tracing`).
    var otlpEndpoint: String?
    var traceSampleRatio = 1.0
}

struct ProcessFigures: Codable, Sendable {
    var role: String
    var name: String
    var pid: Int32
    var cpuSeconds: Double
    var peakRSSKiB: Int
}

struct RoleFigures: Codable, Sendable {
    var copies: Int
    var cpuSeconds: Double
    var cpuSecondsPer1000Orders: Double
    /// Sum of every copy's peak RSS (VmHWM).
    var peakRSSMiB: Double
    var largestCopyPeakRSSMiB: Double
}

struct LatencyFigures: Codable, Sendable {
    var count: UInt64
    var p50Ms, p90Ms, p99Ms, p999Ms, maxMs, meanMs: Double
    /// (percentile, latency ms) pairs of the HDR histogram's percentile iteration.
    var distribution: [[Double]]

    init(_ h: Histogram<UInt64>) {
        let ms = { (us: UInt64) in Double(us) / 1000 }
        count = h.totalCount
        p50Ms = ms(h.valueAtPercentile(50))
        p90Ms = ms(h.valueAtPercentile(90))
        p99Ms = ms(h.valueAtPercentile(99))
        p999Ms = ms(h.valueAtPercentile(99.9))
        maxMs = ms(h.max)
        meanMs = h.mean / 1000
        var points: [[Double]] = []
        if h.totalCount > 0 {
            for v in h.percentiles(ticksPerHalfDistance: 5) {
                points.append([v.percentileLevelIteratedTo, ms(v.value)])
                if v.percentileLevelIteratedTo >= 100 { break }
            }
        }
        distribution = points
    }
}

struct TemplateUse: Codable, Sendable {
    var template: String
    var used: Bool
    var probeStatus: String
    var reason: String?
}

struct ScenarioResult: Codable, Sendable {
    var spec: ScenarioSpec
    var error: String?
    var orders: Int
    var sent: Int
    var settled: Int
    var missing: Int
    var missingSample: [String]
    var duplicates: Int
    var foreignOutcomes: Int
    var unreadableOutcomes: Int
    var statusCounts: [String: Int]
    var duplicateStatusCounts: [String: Int]
    var unexpectedStatusSamples: [String]
    /// W3: first-outcome status counts per provider/operation.
    var perTemplateStatusCounts: [String: [String: Int]]
    var templates: [TemplateUse]
    /// First send to last outcome.
    var windowSeconds: Double
    var ordersPerSecond: Double
    /// Orders/s between the 10 % and the 90 % mark of first outcomes.
    var steadyOrdersPerSecond: Double?
    var sendSeconds: Double
    var latency: LatencyFigures?
    var processes: [ProcessFigures]
    var roles: [String: RoleFigures]
    /// Pipeline roles only (ledger, signer, submitter, sandbox); the driver is apart.
    var pipelineCPUSeconds: Double
    var pipelineCPUSecondsPer1000Orders: Double
    var driverCPUSeconds: Double
    /// Fraction of the whole machine's CPU time that was busy during the measured window.
    var machineBusyFraction: Double?
    /// Machine CPU seconds in the window not used by the pipeline or the driver (other work on a
    /// shared machine), as a fraction of the machine's capacity: more than a small share means the
    /// run was disturbed.
    var otherLoadFraction: Double?
    var logDirectory: String
}

let roleOrder = ["ledger", "postgres", "streamer", "signer", "submitter", "sandbox"]

/// Runs one scenario on a fresh pipeline and stops every child it started, whatever happens.
func runScenario(_ spec: ScenarioSpec, allTemplates: [OrderTemplate], settings: RunSettings) -> ScenarioResult {
    var result = ScenarioResult(
        spec: spec, error: nil, orders: spec.orders, sent: 0, settled: 0, missing: spec.orders, missingSample: [], duplicates: 0,
        foreignOutcomes: 0, unreadableOutcomes: 0, statusCounts: [:], duplicateStatusCounts: [:], unexpectedStatusSamples: [],
        perTemplateStatusCounts: [:], templates: [], windowSeconds: 0, ordersPerSecond: 0, steadyOrdersPerSecond: nil, sendSeconds: 0, latency: nil,
        processes: [], roles: [:], pipelineCPUSeconds: 0, pipelineCPUSecondsPer1000Orders: 0, driverCPUSeconds: 0,
        machineBusyFraction: nil, otherLoadFraction: nil, logDirectory: "")
    var children: [Child] = []
    var load: Load?
    let work = NSTemporaryDirectory() + "paypipe-bench-\(spec.name)-\(UUID().uuidString.prefix(8))"
    defer {
        load?.close()
        ChildRegistry.shared.stop(children.reversed())
        if !settings.keepTemp { try? FileManager.default.removeItem(atPath: work) }
    }
    do {
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        let logs = "\(settings.logDirectory)/\(spec.name)"
        try FileManager.default.createDirectory(atPath: logs, withIntermediateDirectories: true)
        result.logDirectory = logs
        let endpoints = try BenchEndpoints.allocate()
        let configPath = "\(work)/config.json"
        try configText(
            endpoints: endpoints, providerURL: spec.providerURL, otlpEndpoint: settings.otlpEndpoint, sampleRatio: settings.traceSampleRatio
        ).write(
            toFile: configPath, atomically: true, encoding: .utf8)
        let environment = childEnvironment(logLevel: settings.logLevel)
        func start(_ role: String, _ name: String, _ arguments: [String]) throws -> Child {
            let child = try spawnChild(
                role: role, name: name, executable: "\(settings.binDirectory)/paypipe-\(role)", arguments: arguments,
                environment: environment, logDirectory: logs, nice: ["signer", "submitter"].contains(role) ? settings.workerNice : 0)
            children.append(child)
            return child
        }

        // Start the pipeline: sandbox, ledger, signers, submitters (like `paypipe up`).
        if spec.providerURL == nil {
            var arguments = [
                "--config", configPath, "--port", String(endpoints.sandboxPort), "--log-level", "error",
                "--phonepe-callback-delay-ms", "3600000", "--nets-complete-checkout-after-ms=-1",
                "--cleeng-grant-after-ms=-1",
            ]
            if spec.sandboxLatencyMs > 0 { arguments += ["--latency-ms", String(spec.sandboxLatencyMs)] }
            arguments += settings.sandboxArguments
            try waitForMarker(try start("sandbox", "sandbox", arguments), "listening")
        }
        let store = ledgerStore(work: work, settings)
        let ready = try waitForMarker(
            try start(
                "ledger", "ledger",
                ["--config", configPath, "--store", store, "--metrics", "127.0.0.1:0"] + (spec.ledgers == nil ? [] : ["--no-streamer"])),
            LedgerAddresses.readyMarker)
        guard var ledger = LedgerAddresses(readyLine: ready),
            ledger.all.allSatisfy({ $0.address.hasPrefix("tcp://") || (spec.ledgers != nil && $0.address == "none") })
        else {
            throw BenchError("the ledger's ready line names an address missing, unbound or not TCP: \(ready)")
        }
        if let copies = spec.ledgers {
            // The other ledgers on ports the kernel picks; every stage connects to all of them
            // (comma-separated endpoints), upstream sends to all of them and reads the whole log
            // from the first.
            var others: [LedgerAddresses] = []
            for copy in 2..<(copies + 1) {
                let any = "tcp://127.0.0.1:*"
                let line = try waitForMarker(
                    try start(
                        "ledger", "ledger-\(copy)",
                        [
                            "--config", configPath, "--store", store, "--metrics", "127.0.0.1:0", "--no-streamer", "--intake", any, "--outcomes", any,
                            "--sign-queue", any, "--results", any, "--ledger-rpc", any, "--poll-queue", any, "--outcomes-replay", any,
                            "--admin", any,
                        ]), LedgerAddresses.readyMarker)
                guard let other = LedgerAddresses(readyLine: line) else { throw BenchError("ledger \(copy)'s ready line: \(line)") }
                others.append(other)
            }
            let streamerLine = try waitForMarker(
                try start(
                    "streamer", "streamer",
                    ["--config", configPath, "--metrics", "127.0.0.1:0", "--signed-in", "tcp://127.0.0.1:*", "--signed-out", "tcp://127.0.0.1:*"]),
                "paypipe-streamer ready")
            let streamer = LedgerAddresses.printed(in: streamerLine)
            guard let signedIn = streamer["signedIn"], let signedOut = streamer["signedOut"] else {
                throw BenchError("the streamer's ready line: \(streamerLine)")
            }
            let all = [ledger] + others
            ledger.signedIn = signedIn
            ledger.signedOut = signedOut
            ledger.intake = all.map(\.intake).joined(separator: ",")
            ledger.signQueue = all.map(\.signQueue).joined(separator: ",")
            ledger.results = all.map(\.results).joined(separator: ",")
            ledger.ledgerRPC = all.map(\.ledgerRPC).joined(separator: ",")
        }
        var pending: [(Child, String)] = []
        for i in 0..<spec.signers {
            let arguments = ["--config", configPath, "--sign-queue", ledger.signQueue, "--signed-in", ledger.signedIn, "--results", ledger.results]
            pending.append((try start("signer", "signer-\(i + 1)", arguments), "signer ready"))
        }
        for i in 0..<spec.submitters {
            let arguments = [
                "--config", configPath, "--concurrency", String(spec.concurrency), "--signed-out", ledger.signedOut, "--results", ledger.results,
                "--ledger-rpc", ledger.ledgerRPC,
            ]
            pending.append((try start("submitter", "submitter-\(i + 1)", arguments), "submitter ready"))
        }
        for (child, marker) in pending { try waitForMarker(child, marker) }
        log("[\(spec.name)] pipeline up: " + children.map { "\($0.name)=\($0.pid)" }.joined(separator: " "))

        let run = String(UInt32.random(in: 0...UInt32.max), radix: 16)
        let l = try Load(intake: ledger.intake, outcomes: ledger.outcomes)
        load = l
        l.startReceiver()

        // Templates: W1/W2 the PhonePe authInit; W3 every example order the sandbox takes.
        var templates = [try phonePeTemplate(allTemplates)]
        var expected: String? = "pending"
        if spec.workload == .w3 {
            expected = nil
            templates = try probe(allTemplates, load: l, run: run, children: children, againstProviderURL: spec.providerURL != nil, into: &result)
            guard !templates.isEmpty else { throw BenchError("no example order got an outcome other than rejected/failed") }
        }

        // Warm-up: connections, allocators and SQLite pages, not measured.
        if settings.warmup > 0 {
            let warm = Tally(tag: "w\(run)-", count: settings.warmup, templateCount: templates.count, expectedStatus: expected)
            l.register(warm)
            let sent = DispatchSemaphore(value: 0)
            l.startSending(warm, templates: templates, rate: nil, done: sent)
            try waitAll(warm, sendDone: sent, children: children, timeout: 60, label: "\(spec.name) warm-up", progress: false)
            guard warm.settledCount.load(ordering: .relaxed) == warm.count else {
                throw BenchError("warm-up: only \(warm.settledCount.load(ordering: .relaxed)) of \(warm.count) orders got an outcome")
            }
            usleep(300_000)
        }

        // The measured run.
        let tally = Tally(tag: "m\(run)-", count: spec.orders, templateCount: templates.count, expectedStatus: expected)
        l.register(tally)
        let before = children.map { cpuSeconds($0.pid) ?? 0 }
        let postgresBefore = settings.postgresData.map { postgresCPUSeconds(dataDirectory: $0) } ?? [:]
        let driverBefore = cpuSeconds(getpid()) ?? 0
        let machineBefore = machineCPU()
        let sendDone = DispatchSemaphore(value: 0)
        l.startSending(tally, templates: templates, rate: spec.rate, done: sendDone)
        let sendingFinished = try waitAll(
            tally, sendDone: sendDone, children: children, timeout: settings.drainTimeout, label: spec.name, progress: true,
            maxSeconds: settings.maxSeconds)
        let after = children.map { cpuSeconds($0.pid) ?? 0 }
        let postgresAfter = settings.postgresData.map { postgresCPUSeconds(dataDirectory: $0) } ?? [:]
        let driverAfter = cpuSeconds(getpid()) ?? 0
        let machineAfter = machineCPU()
        if !sendingFinished { l.abortFlag.store(true, ordering: .relaxed) }
        // A short grace period to see duplicates that trail the last first outcome.
        usleep(300_000)
        let peaks = children.map { statusKilobytes($0.pid, "VmHWM") ?? 0 }
        l.stopReceiver()
        _ = sendDone.wait(timeout: .now() + 2)

        // Figures.
        let settled = tally.settledCount.load(ordering: .relaxed)
        result.sent = tally.sentCount.load(ordering: .relaxed)
        result.settled = settled
        let missing = tally.missing()
        result.missing = missing.count
        result.missingSample = missing.prefix(10).map { tally.orderId($0) }
        result.duplicates = tally.duplicateCount.load(ordering: .relaxed)
        result.foreignOutcomes = l.foreignCount.load(ordering: .relaxed)
        result.unreadableOutcomes = l.unreadableCount.load(ordering: .relaxed)
        result.statusCounts = named(tally.statusCounts)
        result.duplicateStatusCounts = named(tally.duplicateStatusCounts)
        result.unexpectedStatusSamples = tally.unexpectedSamples
        if spec.workload == .w3 {
            for (index, template) in templates.enumerated() {
                result.perTemplateStatusCounts[template.label] = named(tally.templateStatusCounts[index])
            }
        }
        let first = tally.firstSendNanoseconds.load(ordering: .relaxed)
        let last = tally.lastOutcomeNanoseconds.load(ordering: .relaxed)
        result.windowSeconds = last > first ? Double(last - first) / 1e9 : 0
        result.ordersPerSecond = result.windowSeconds > 0 ? Double(settled) / result.windowSeconds : 0
        let (lowMark, highMark) = (tally.lowMarkNanoseconds.load(ordering: .relaxed), tally.highMarkNanoseconds.load(ordering: .relaxed))
        if highMark > lowMark {
            result.steadyOrdersPerSecond = Double(tally.steadyMarks.high - tally.steadyMarks.low) / (Double(highMark - lowMark) / 1e9)
        }
        let lastSend = tally.lastSendNanoseconds.load(ordering: .relaxed)
        result.sendSeconds = lastSend > first ? Double(lastSend - first) / 1e9 : 0
        result.latency = LatencyFigures(tally.histogram)
        for (index, child) in children.enumerated() {
            result.processes.append(
                ProcessFigures(
                    role: child.role, name: child.name, pid: child.pid, cpuSeconds: max(0, after[index] - before[index]), peakRSSKiB: peaks[index]))
        }
        if !postgresAfter.isEmpty {
            let cpu = postgresAfter.map { pid, seconds in max(0, seconds - (postgresBefore[pid] ?? 0)) }.reduce(0, +)
            result.processes.append(
                ProcessFigures(role: "postgres", name: "postgres", pid: postgresAfter.keys.min() ?? 0, cpuSeconds: cpu, peakRSSKiB: 0))
        }
        let perThousand = { (seconds: Double) in settled > 0 ? seconds / Double(settled) * 1000 : 0 }
        for role in roleOrder {
            let copies = result.processes.filter { $0.role == role }
            guard !copies.isEmpty else { continue }
            let cpu = copies.map(\.cpuSeconds).reduce(0, +)
            result.roles[role] = RoleFigures(
                copies: copies.count, cpuSeconds: cpu, cpuSecondsPer1000Orders: perThousand(cpu),
                peakRSSMiB: Double(copies.map(\.peakRSSKiB).reduce(0, +)) / 1024,
                largestCopyPeakRSSMiB: Double(copies.map(\.peakRSSKiB).max() ?? 0) / 1024)
        }
        result.pipelineCPUSeconds = result.processes.map(\.cpuSeconds).reduce(0, +)
        result.pipelineCPUSecondsPer1000Orders = perThousand(result.pipelineCPUSeconds)
        result.driverCPUSeconds = max(0, driverAfter - driverBefore)
        if let a = machineBefore, let b = machineAfter, b.total > a.total {
            result.machineBusyFraction = (b.busy - a.busy) / (b.total - a.total)
            let ours = result.pipelineCPUSeconds + result.driverCPUSeconds
            result.otherLoadFraction = max(0, (b.busy - a.busy) - ours) / (b.total - a.total)
        }
        if !sendingFinished { result.error = "the run hit --max-seconds before every order was sent" }
        if result.statusCounts["rejected", default: 0] > 0 {
            result.error = "\(result.statusCounts["rejected"]!) order(s) rejected: a benchmark setup failure"
        }
    } catch {
        result.error = "\(error)"
        log("[\(spec.name)] failed: \(error)")
    }
    return result
}

func named(_ counts: [Int]) -> [String: Int] {
    var out: [String: Int] = [:]
    for (index, n) in counts.enumerated() where n > 0 { out[statusNames[index]] = n }
    return out
}

/// Waits until every order of `tally` has an outcome, or `timeout` seconds pass without a new
/// one once sending is done, or `maxSeconds` pass in all; prints progress each second and fails
/// when a child exits. Returns whether sending finished.
@discardableResult
func waitAll(
    _ tally: Tally, sendDone: DispatchSemaphore, children: [Child], timeout: Double, label: String, progress: Bool,
    maxSeconds: Double = 600
) throws -> Bool {
    let start = monotonicNanoseconds()
    var sendingFinished = false
    var lastSettled = 0
    var lastChange = start
    var lastTick = start
    var tickSettled = 0
    while true {
        if tally.complete.wait(timeout: .now() + .milliseconds(100)) == .success {
            tally.complete.signal()  // leave it signalled for any later waiter
            if !sendingFinished { sendingFinished = sendDone.wait(timeout: .now() + 5) == .success }
            return sendingFinished
        }
        let now = monotonicNanoseconds()
        if !sendingFinished, sendDone.wait(timeout: .now()) == .success { sendingFinished = true }
        let settled = tally.settledCount.load(ordering: .relaxed)
        if settled != lastSettled {
            lastSettled = settled
            lastChange = now
        }
        for child in children {
            if let status = ChildRegistry.shared.poll(child.pid) {
                throw BenchError("\(child.name) (pid \(child.pid)) exited during the run (wait status \(status)):\n\(lastLines(child.stderrPath))")
            }
        }
        if progress && now - lastTick >= 1_000_000_000 {
            let elapsed = Double(now - start) / 1e9
            let rate = Double(settled - tickSettled) / (Double(now - lastTick) / 1e9)
            log(
                "[\(label)] \(String(format: "%5.1f", elapsed)) s  sent \(tally.sentCount.load(ordering: .relaxed))/\(tally.count)  outcomes \(settled)  \(Int(rate)) orders/s (last 1 s)  avg \(Int(Double(settled) / elapsed)) orders/s  dup \(tally.duplicateCount.load(ordering: .relaxed))"
            )
            lastTick = now
            tickSettled = settled
        }
        if sendingFinished && Double(now - lastChange) / 1e9 > timeout {
            log("[\(label)] no new outcome for \(Int(timeout)) s; \(tally.count - settled) order(s) missing")
            return true
        }
        if Double(now - start) / 1e9 > maxSeconds {
            log("[\(label)] stopped after --max-seconds \(Int(maxSeconds)); \(tally.count - settled) order(s) missing")
            return sendingFinished
        }
    }
}

/// W3: sends every example order once and keeps those whose first outcome is neither
/// `rejected` nor (against the sandbox) `failed`: the examples that name provider objects the
/// sandbox does not have are refused by it, and the deliberately invalid example is rejected by
/// the pipeline.
func probe(
    _ templates: [OrderTemplate], load: Load, run: String, children: [Child], againstProviderURL: Bool, into result: inout ScenarioResult
) throws -> [OrderTemplate] {
    let tally = Tally(tag: "p\(run)-", count: templates.count, templateCount: templates.count, expectedStatus: nil, keepBodies: true)
    load.register(tally)
    let sent = DispatchSemaphore(value: 0)
    load.startSending(tally, templates: templates, rate: nil, done: sent)
    try waitAll(tally, sendDone: sent, children: children, timeout: 15, label: "W3 probe", progress: false, maxSeconds: 30)
    usleep(100_000)
    var used: [OrderTemplate] = []
    for (seq, template) in templates.enumerated() {
        let first = tally.firsts.withLock { $0[seq] }
        let body = first?.body
        let status = first.map { statusNames[$0.status] } ?? "none"
        var reason: String?
        // Against the sandbox a `failed` first outcome means the example names an object the
        // sandbox does not have; against --provider-url every answer is the point of the run.
        let refused = status == "rejected" || status == "none" || (status == "failed" && !againstProviderURL)
        if refused {
            if let body, let error = (try? Outcome.parse(Array(body.utf8)))?.error {
                reason = "\(status): \(error.code): \(error.message)"
            } else {
                reason = status == "none" ? "no outcome within 15 s" : status
            }
        }
        result.templates.append(TemplateUse(template: template.label, used: reason == nil, probeStatus: status, reason: reason))
        if reason == nil { used.append(template) }
        log("W3 probe: \(template.label) -> \(status)\(reason.map { " (skipped: \($0))" } ?? "")")
    }
    return used
}

/// The ledger's `--store` for one run.
func ledgerStore(work: String, _ settings: RunSettings) -> String {
    guard let url = settings.postgresURL else { return "\(work)/ledger.sqlite" }
    let schema = "bench_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(16)
    return url + (url.contains("?") ? "&" : "?") + "schema=\(schema)"
}

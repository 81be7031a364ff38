import ArgumentParser
import BenchSupport
import Dispatch
import Foundation
import Supervision

struct PaypipeBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "paypipe-bench",
        abstract: "End-to-end throughput and latency benchmark of the paypipe pipeline.",
        discussion: """
            Each scenario starts a fresh pipeline (sandbox, ledger, signers, submitters) as child processes on free \
            loopback ports with a fresh ledger database, warms it up, pushes orders into the intake, reads the outcomes, \
            and stops every child by PID. Scenarios: w1 (PhonePe authInit, sandbox answering at once), w2 (the same with \
            sandbox latency), scale (w1 with 1, 2, 4 submitter copies), w3 (every example order type), w1rate (w1 at a \
            fixed rate below saturation, for latency without queueing). Results go to \
            bench/results/<timestamp>/ (results.json, summary.md, throughput.svg, latency.svg, logs/).
            """)

    @Option(help: "Scenarios to run, comma separated, in order: w1, w2, scale, w3, w1rate.") var scenarios = "w1,w2,scale,w3,w1rate"
    @Option(help: "Orders per measured run (W1 and scale-out).") var orders = 50_000
    @Option(help: "Orders for W2 (default: --orders).") var w2Orders: Int?
    @Option(help: "Orders for W3 (default: --orders).") var w3Orders: Int?
    @Option(help: "Send at this many orders/s instead of as fast as the pipeline takes them (every scenario but w1rate).") var rate: Double?
    @Option(help: "The fixed rate of the w1rate scenario (W1 below saturation, for service latency), orders/s; it sends 10 s worth.")
    var w1Rate = 1000.0
    @Option(help: "Signer copies.") var signers = 1
    @Option(help: "Submitter copies for W1, W2 and W3.") var submitters = 1
    @Option(help: "Submitter copies of the scale-out series, comma separated.") var scaleCopies = "1,2,4"
    @Option(help: "Ledger copies of the ledgers series (over --postgres-url, a streamer of its own), comma separated.")
    var ledgerCopies = "1,2,3"
    @Option(help: "Workloads of the ledgers series, comma separated, each with every --ledger-copies: w1 (--orders), w2 (--w2-orders).")
    var ledgersWorkloads = "w2"
    @Option(help: "Requests in flight per submitter (its --concurrency).") var concurrency = 256
    @Option(help: "Sandbox latency for W2 in ms.") var latencyMs = 50
    @Option(
        help: ArgumentHelp(
            "Point every provider base URL at this URL instead of starting the sandbox (e.g. an nginx answering a fixed JSON body).",
            discussion: "Every first outcome counts, whatever its status; W2 then equals W1."))
    var providerURL: String?
    @Option(help: "Trace every order: the config's tracing.otlpEndpoint, e.g. an nginx that answers every export 200 (bench/tracing/run).")
    var otlpEndpoint: String?
    @Option(help: "With --otlp-endpoint: the config's tracing.sampleRatio.") var traceSampleRatio = 1.0
    @Option(help: "Extra sandbox arguments, space separated (e.g. \"--error-rate 0.01\").") var sandboxArgs = ""
    @Option(help: "Warm-up orders per scenario before the measured run (not counted).") var warmup = 1000
    @Option(help: "After the last send, seconds without a new outcome before the missing orders are reported.") var drainTimeout = 20.0
    @Option(help: "Upper bound on one measured run in seconds.") var maxSeconds = 300.0
    @Option(help: "PAYPIPE_LOG_LEVEL for the stages (default: theirs, info).") var logLevel: String?
    @Option(help: "Directory with the paypipe executables (default: next to this one).") var binDir: String?
    @Option(help: "Example orders (W1/W2 use its phonepe authInit, W3 all of them).") var examples = "examples/orders.jsonl"
    @Option(help: "Results directory (default bench/results/<timestamp>).") var out: String?
    @Flag(help: "Keep each scenario's temporary directory (config, ledger database).") var keepTemp = false
    @Option(help: "The signers' and submitters' nice increment below the ledger's, as `paypipe up --worker-nice` (0: all equal).")
    var workerNice = 5
    @Option(help: "The ledger's store: a postgres:// URL (each run a schema of its own), or by default a SQLite file.") var postgresURL: String?
    @Option(help: "With --postgres-url: the server's data directory, so that its processes' CPU is counted (role postgres).")
    var postgresData: String?

    func validate() throws {
        guard orders > 0, (w2Orders ?? 1) > 0, (w3Orders ?? 1) > 0 else { throw ValidationError("order counts must be positive") }
        guard signers > 0, submitters > 0, concurrency > 0 else {
            throw ValidationError("--signers, --submitters and --concurrency must be positive")
        }
        guard rate.map({ $0 > 0 }) ?? true, w1Rate > 0 else { throw ValidationError("--rate and --w1-rate must be positive") }
        guard (0...19).contains(workerNice) else { throw ValidationError("--worker-nice must be 0 to 19") }
        guard warmup >= 0, drainTimeout > 0, maxSeconds > 0 else { throw ValidationError("--warmup, --drain-timeout, --max-seconds out of range") }
        _ = try scenarioList()
    }

    func scaleList() throws -> [Int] { try copyList(scaleCopies, "--scale-copies") }

    func ledgersWorkloadList() throws -> [Workload] {
        let workloads = ledgersWorkloads.lowercased().split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        guard !workloads.isEmpty, workloads.allSatisfy({ ["w1", "w2"].contains($0) }) else {
            throw ValidationError("--ledgers-workloads: w1, w2 or both, comma separated")
        }
        return workloads.map { $0 == "w1" ? .w1 : .w2 }
    }

    func copyList(_ text: String, _ option: String) throws -> [Int] {
        let copies = text.split(separator: ",").map { Int($0.trimmingCharacters(in: .whitespaces)) }
        guard !copies.isEmpty, copies.allSatisfy({ ($0 ?? 0) > 0 }) else { throw ValidationError("\(option): positive integers, comma separated") }
        return copies.map { $0! }
    }

    func scenarioList() throws -> [ScenarioSpec] {
        var list: [ScenarioSpec] = []
        func spec(
            _ name: String, _ workload: Workload, _ series: String, submitters: Int, orders: Int, latency: Int = 0, rate: Double? = rate
        )
            -> ScenarioSpec
        {
            ScenarioSpec(
                name: name, workload: workload, series: series, submitters: submitters, signers: signers, concurrency: concurrency,
                orders: orders, sandboxLatencyMs: providerURL == nil ? latency : 0, rate: rate, providerURL: providerURL)
        }
        for item in scenarios.lowercased().split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) {
            switch item {
            case "w1": list.append(spec("W1", .w1, "W1", submitters: submitters, orders: orders))
            case "w2": list.append(spec("W2", .w2, "W2", submitters: submitters, orders: w2Orders ?? orders, latency: latencyMs))
            case "w3": list.append(spec("W3", .w3, "W3", submitters: submitters, orders: w3Orders ?? orders))
            case "w1rate":
                list.append(spec("W1@\(Int(w1Rate))", .w1, "W1-rate", submitters: submitters, orders: max(1, Int(w1Rate * 10)), rate: w1Rate))
            case "scale":
                for copies in try scaleList() { list.append(spec("scale-\(copies)", .w1, "scale-out", submitters: copies, orders: orders)) }
            case "ledgers":
                guard postgresURL != nil else { throw ValidationError("the ledgers series needs --postgres-url: several ledgers share one store") }
                for workload in try ledgersWorkloadList() {
                    for copies in try copyList(ledgerCopies, "--ledger-copies") {
                        // W2's rows keep the names they had when the series was W2 alone.
                        var ledgers =
                            workload == .w2
                            ? spec("ledgers-\(copies)", .w2, "ledgers", submitters: submitters, orders: w2Orders ?? orders, latency: latencyMs)
                            : spec("ledgers-\(copies)-w1", .w1, "ledgers", submitters: submitters, orders: orders)
                        ledgers.ledgers = copies
                        list.append(ledgers)
                    }
                }
            default: throw ValidationError("unknown scenario \(item) (w1, w2, scale, w3, w1rate, ledgers)")
            }
        }
        guard !list.isEmpty else { throw ValidationError("no scenario") }
        return list
    }

    func run() throws {
        let wallStart = monotonicNanoseconds()
        let startedAt = Date()
        installSignalHandlers()
        let specs = try scenarioList()
        let templates = try loadExampleTemplates(path: examples)
        let binDirectory =
            binDir
            ?? URL(fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0])
            .deletingLastPathComponent().path
        let stamp = { () -> String in
            let f = DateFormatter()
            f.locale = Locale(identifier: "en_US_POSIX")
            f.timeZone = TimeZone(identifier: "UTC")
            f.dateFormat = "yyyyMMdd-HHmmss"
            return f.string(from: startedAt)
        }()
        let outDirectory = out ?? "bench/results/\(stamp)"
        try FileManager.default.createDirectory(atPath: "\(outDirectory)/logs", withIntermediateDirectories: true)
        let nproc = Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))
        log("nproc \(nproc); results in \(outDirectory); executables from \(binDirectory); signers and submitters at nice +\(workerNice)")
        print("nproc: \(nproc)")

        let settings = RunSettings(
            binDirectory: binDirectory, warmup: warmup, drainTimeout: drainTimeout, maxSeconds: maxSeconds, logLevel: logLevel,
            logDirectory: "\(outDirectory)/logs", keepTemp: keepTemp,
            sandboxArguments: sandboxArgs.split(separator: " ").map(String.init), workerNice: workerNice, postgresURL: postgresURL,
            postgresData: postgresData, otlpEndpoint: otlpEndpoint, traceSampleRatio: traceSampleRatio)
        var results: [ScenarioResult] = []
        for spec in specs {
            log(
                "[\(spec.name)] \(spec.orders) orders, \(spec.submitters) submitter(s), \(spec.signers) signer(s)\(spec.rate.map { " at \(Int($0)) orders/s" } ?? ", full speed")"
            )
            let result = runScenario(spec, allTemplates: templates, settings: settings)
            results.append(result)
            log(
                "[\(spec.name)] \(Int(result.ordersPerSecond)) orders/s, p50 \(result.latency.map { fmt($0.p50Ms) } ?? "-") ms, missing \(result.missing)\(result.error.map { ", error: \($0)" } ?? "")"
            )
        }

        let run = RunResult(
            startedAt: ISO8601DateFormatter().string(from: startedAt), nproc: nproc, machine: machineDescription(),
            gitCommit: gitCommit(), arguments: Array(CommandLine.arguments.dropFirst()), binDirectory: binDirectory,
            warmupOrders: warmup, workerNice: workerNice, wallSeconds: Double(monotonicNanoseconds() - wallStart) / 1e9, scenarios: results)
        try writeReport(run, to: outDirectory)
        print(summaryTable(run))
        print("results: \(outDirectory)/ (results.json, summary.md, throughput.svg, latency.svg)")
        let failed = results.filter { $0.error != nil || $0.missing > 0 }
        if !failed.isEmpty {
            for r in failed {
                log(
                    "[\(r.spec.name)] FAILED: missing \(r.missing)\(r.missingSample.isEmpty ? "" : " (first: \(r.missingSample.prefix(5).joined(separator: ", ")))")\(r.error.map { "; \($0)" } ?? "")"
                )
            }
            throw ExitCode(1)
        }
    }
}

/// Ctrl-C / SIGTERM: stop every child by PID, then exit.
func installSignalHandlers() {
    for sig in [SIGINT, SIGTERM, SIGHUP] {
        signal(sig, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
        source.setEventHandler {
            log("signal \(sig): stopping the pipeline")
            ChildRegistry.shared.stopAll(timeout: 5)
            exit(130)
        }
        source.resume()
        signalSources.append(source)
    }
    signal(SIGPIPE, SIG_IGN)
}

nonisolated(unsafe) var signalSources: [any DispatchSourceSignal] = []

func machineDescription() -> String {
    var parts: [String] = []
    if let data = FileManager.default.contents(atPath: "/proc/cpuinfo"),
        let line = String(decoding: data, as: UTF8.self).split(separator: "\n").first(where: { $0.hasPrefix("model name") }),
        let colon = line.firstIndex(of: ":")
    {
        parts.append(line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
    }
    var u = utsname()
    uname(&u)
    let release = withUnsafeBytes(of: &u.release) { String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self) }
    parts.append("Linux \(release)")
    return parts.joined(separator: ", ")
}

func gitCommit() -> String? {
    guard let git = try? ChildProcess.run(["/usr/bin/git", "rev-parse", "--short", "HEAD"]), git.status == 0 else { return nil }
    return git.output.trimmingCharacters(in: .whitespacesAndNewlines)
}

import BenchSupport
import Foundation
import Supervision

struct RunResult: Codable, Sendable {
    var startedAt: String
    var nproc: Int
    var machine: String
    var gitCommit: String?
    var arguments: [String]
    var binDirectory: String
    var warmupOrders: Int
    /// The signers' and submitters' nice increment (`--worker-nice`).
    var workerNice: Int
    var wallSeconds: Double
    var scenarios: [ScenarioResult]
}

func fmt(_ value: Double, _ digits: Int = 1) -> String { String(format: "%.\(digits)f", value) }

func writeReport(_ run: RunResult, to directory: String) throws {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
    try encoder.encode(run).write(to: URL(fileURLWithPath: "\(directory)/results.json"))
    try summaryMarkdown(run).write(toFile: "\(directory)/summary.md", atomically: true, encoding: .utf8)
    drawCharts(directory)
}

/// The charts come from the benchmarks' one renderer, `bench/support/charts.py`, which reads
/// results.json; without Python 3 the run still has its table and its figures.
func drawCharts(_ directory: String) {
    let renderer = "bench/support/charts.py"
    guard FileManager.default.fileExists(atPath: renderer) else {
        log("no \(renderer) here (run from the repository root): charts not drawn")
        return
    }
    do {
        let status = try ChildProcess(["/usr/bin/env", "python3", renderer, "driver", directory]).waitForExitBlocking() ?? -1
        if status != 0 { log("\(renderer) failed (exit \(status)): charts not drawn") }
    } catch {
        log("cannot run \(renderer): \(error)")
    }
}

/// The main table (also printed to stdout).
func summaryTable(_ run: RunResult) -> String {
    func cpu(_ r: ScenarioResult, _ role: String) -> String { r.roles[role].map { fmt($0.cpuSecondsPer1000Orders, 3) } ?? "-" }
    func rss(_ r: ScenarioResult, _ role: String) -> String { r.roles[role].map { fmt($0.peakRSSMiB, 0) } ?? "-" }
    var lines = [
        "| scenario | copies (sub/sign) | orders | orders/s | p50 ms | p90 ms | p99 ms | max ms | CPU s/1k ledger | postgres | signer | submitter | sandbox | total | peak RSS MiB ledger | signer | submitter | sandbox | missing | steady orders/s |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in run.scenarios {
        let l = r.latency
        lines.append(
            "| \(r.spec.name)\(r.error == nil ? "" : " (error)") | \(r.spec.submitters)/\(r.spec.signers) | \(r.orders) | \(fmt(r.ordersPerSecond, 0)) | "
                + "\(l.map { fmt($0.p50Ms) } ?? "-") | \(l.map { fmt($0.p90Ms) } ?? "-") | \(l.map { fmt($0.p99Ms) } ?? "-") | \(l.map { fmt($0.maxMs) } ?? "-") | "
                + "\(cpu(r, "ledger")) | \(cpu(r, "postgres")) | \(cpu(r, "signer")) | \(cpu(r, "submitter")) | \(cpu(r, "sandbox")) | \(fmt(r.pipelineCPUSecondsPer1000Orders, 3)) | "
                + "\(rss(r, "ledger")) | \(rss(r, "signer")) | \(rss(r, "submitter")) | \(rss(r, "sandbox")) | \(r.missing) | \(r.steadyOrdersPerSecond.map { fmt($0, 0) } ?? "-") |"
        )
    }
    return lines.joined(separator: "\n")
}

func summaryMarkdown(_ run: RunResult) -> String {
    var text = """
        # paypipe-bench \(run.startedAt)

        Machine: nproc \(run.nproc), \(run.machine). Commit \(run.gitCommit ?? "?"). Arguments: `\(run.arguments.joined(separator: " "))`. \
        Warm-up \(run.warmupOrders) orders per scenario (not measured). Signers and submitters at nice +\(run.workerNice). Wall time \(fmt(run.wallSeconds)) s.

        Throughput = orders with a first outcome / (last outcome − first send); steady = the same between the 10 % and \
        the 90 % mark of first outcomes (without the intake burst at the start and the drain at the end). Latency = outcome arrival − send time \
        per order. CPU = utime+stime from /proc/PID/stat over the measured window, per 1,000 orders, summed over a role's \
        copies; total = the pipeline's roles (the driver is apart, below). Peak RSS = VmHWM, summed over copies. \
        "Other load" = machine CPU in the window used by neither the pipeline nor the driver (another job on a shared machine); above a few % the figures are disturbed. Compare ratios within one run only: absolute figures drift on shared machines.


        """
    text += summaryTable(run) + "\n\n"
    text +=
        "| scenario | first-outcome statuses | duplicates | window s | send s | driver CPU s | machine busy | other load |\n|---|---|--:|--:|--:|--:|--:|--:|\n"
    for r in run.scenarios {
        let statuses = r.statusCounts.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        text +=
            "| \(r.spec.name) | \(statuses) | \(r.duplicates) | \(fmt(r.windowSeconds, 2)) | \(fmt(r.sendSeconds, 2)) | \(fmt(r.driverCPUSeconds, 2)) | \(r.machineBusyFraction.map { "\(fmt($0 * 100, 0)) %" } ?? "-") | \(r.otherLoadFraction.map { "\(fmt($0 * 100, 0)) %" } ?? "-") |\n"
    }
    for r in run.scenarios where !r.templates.isEmpty {
        text += "\n\(r.spec.name) order types (probe: one order each before the run; those the sandbox refuses are skipped):\n\n"
        for t in r.templates {
            let counts =
                r.perTemplateStatusCounts[t.template].map { c in c.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
                } ?? ""
            text += "- `\(t.template)`: " + (t.used ? "used (\(counts))" : "skipped, \(t.reason ?? t.probeStatus)") + "\n"
        }
    }
    for r in run.scenarios where r.error != nil || r.missing > 0 {
        text +=
            "\n**\(r.spec.name)**: \(r.error ?? "") missing \(r.missing)\(r.missingSample.isEmpty ? "" : ", first: \(r.missingSample.prefix(5).joined(separator: ", "))")\n"
    }
    text += "\nCharts: [throughput.svg](throughput.svg), [latency.svg](latency.svg). Every figure: results.json.\n"
    return text
}

// MARK: - SVG

import BenchSupport
import Foundation

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
    try throughputSVG(run).write(toFile: "\(directory)/throughput.svg", atomically: true, encoding: .utf8)
    try latencySVG(run).write(toFile: "\(directory)/latency.svg", atomically: true, encoding: .utf8)
}

/// The main table (also printed to stdout).
func summaryTable(_ run: RunResult) -> String {
    func cpu(_ r: ScenarioResult, _ role: String) -> String { r.roles[role].map { fmt($0.cpuSecondsPer1000Orders, 3) } ?? "-" }
    func rss(_ r: ScenarioResult, _ role: String) -> String { r.roles[role].map { fmt($0.peakRSSMiB, 0) } ?? "-" }
    var lines = [
        "| scenario | copies (sub/sign) | orders | orders/s | p50 ms | p90 ms | p99 ms | max ms | CPU s/1k ledger | signer | submitter | sandbox | total | peak RSS MiB ledger | signer | submitter | sandbox | missing | steady orders/s |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in run.scenarios {
        let l = r.latency
        lines.append(
            "| \(r.spec.name)\(r.error == nil ? "" : " (error)") | \(r.spec.submitters)/\(r.spec.signers) | \(r.orders) | \(fmt(r.ordersPerSecond, 0)) | "
                + "\(l.map { fmt($0.p50Ms) } ?? "-") | \(l.map { fmt($0.p90Ms) } ?? "-") | \(l.map { fmt($0.p99Ms) } ?? "-") | \(l.map { fmt($0.maxMs) } ?? "-") | "
                + "\(cpu(r, "ledger")) | \(cpu(r, "signer")) | \(cpu(r, "submitter")) | \(cpu(r, "sandbox")) | \(fmt(r.pipelineCPUSecondsPer1000Orders, 3)) | "
                + "\(rss(r, "ledger")) | \(rss(r, "signer")) | \(rss(r, "submitter")) | \(rss(r, "sandbox")) | \(r.missing) | \(r.steadyOrdersPerSecond.map { fmt($0, 0) } ?? "-") |")
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
    text += "| scenario | first-outcome statuses | duplicates | window s | send s | driver CPU s | machine busy | other load |\n|---|---|--:|--:|--:|--:|--:|--:|\n"
    for r in run.scenarios {
        let statuses = r.statusCounts.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        text += "| \(r.spec.name) | \(statuses) | \(r.duplicates) | \(fmt(r.windowSeconds, 2)) | \(fmt(r.sendSeconds, 2)) | \(fmt(r.driverCPUSeconds, 2)) | \(r.machineBusyFraction.map { "\(fmt($0 * 100, 0)) %" } ?? "-") | \(r.otherLoadFraction.map { "\(fmt($0 * 100, 0)) %" } ?? "-") |\n"
    }
    for r in run.scenarios where !r.templates.isEmpty {
        text += "\n\(r.spec.name) order types (probe: one order each before the run; those the sandbox refuses are skipped):\n\n"
        for t in r.templates {
            let counts = r.perTemplateStatusCounts[t.template].map { c in c.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ") } ?? ""
            text += "- `\(t.template)`: " + (t.used ? "used (\(counts))" : "skipped, \(t.reason ?? t.probeStatus)") + "\n"
        }
    }
    for r in run.scenarios where r.error != nil || r.missing > 0 {
        text += "\n**\(r.spec.name)**: \(r.error ?? "") missing \(r.missing)\(r.missingSample.isEmpty ? "" : ", first: \(r.missingSample.prefix(5).joined(separator: ", "))")\n"
    }
    text += "\nCharts: [throughput.svg](throughput.svg), [latency.svg](latency.svg). Every figure: results.json.\n"
    return text
}

// MARK: - SVG

private func escape(_ s: String) -> String {
    s.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
}

private let palette = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"]

/// Throughput against submitter copies for the scale-out series, with the ideal linear line
/// (copies × the 1-copy throughput).
func throughputSVG(_ run: RunResult) -> String {
    let width = 640.0, height = 420.0, left = 80.0, right = 60.0, top = 50.0, bottom = 60.0
    var points = run.scenarios.filter { $0.spec.series == "scale-out" && $0.error == nil }.map { (Double($0.spec.submitters), $0.ordersPerSecond) }
    points.sort { $0.0 < $1.0 }
    var svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(Int(width))\" height=\"\(Int(height))\" font-family=\"sans-serif\" font-size=\"12\">\n"
    svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    svg += "<text x=\"\(width / 2)\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">Throughput vs submitter copies (W1, nproc \(run.nproc))</text>\n"
    guard let base = points.first, base.1 > 0 else {
        return svg + "<text x=\"\(width / 2)\" y=\"\(height / 2)\" text-anchor=\"middle\">no scale-out series in this run</text>\n</svg>\n"
    }
    let maxCopies = max(points.map(\.0).max() ?? 1, 1)
    let perCopy = base.1 / base.0
    let ideal = (points.map { $0.0 * perCopy })
    let yMax = niceCeiling(max(ideal.max() ?? 0, points.map(\.1).max() ?? 0) * 1.05)
    let x = { (c: Double) in left + (c / maxCopies) * (width - left - right) }
    let y = { (v: Double) in height - bottom - (v / yMax) * (height - top - bottom) }
    // Axes and grid.
    svg += "<line x1=\"\(left)\" y1=\"\(height - bottom)\" x2=\"\(width - right)\" y2=\"\(height - bottom)\" stroke=\"black\"/>\n"
    svg += "<line x1=\"\(left)\" y1=\"\(top)\" x2=\"\(left)\" y2=\"\(height - bottom)\" stroke=\"black\"/>\n"
    for i in 0...5 {
        let v = yMax * Double(i) / 5
        svg += "<line x1=\"\(left)\" y1=\"\(y(v))\" x2=\"\(width - right)\" y2=\"\(y(v))\" stroke=\"#ddd\"/>\n"
        svg += "<text x=\"\(left - 6)\" y=\"\(y(v) + 4)\" text-anchor=\"end\">\(Int(v))</text>\n"
    }
    for (c, _) in points {
        svg += "<text x=\"\(x(c))\" y=\"\(height - bottom + 18)\" text-anchor=\"middle\">\(Int(c))</text>\n"
    }
    svg += "<text x=\"\((left + width - right) / 2)\" y=\"\(height - 18)\" text-anchor=\"middle\">submitter copies</text>\n"
    svg += "<text x=\"18\" y=\"\((top + height - bottom) / 2)\" text-anchor=\"middle\" transform=\"rotate(-90 18 \((top + height - bottom) / 2))\">orders/s</text>\n"
    // Ideal line from the origin through copies × per-copy throughput.
    svg += "<line x1=\"\(x(0))\" y1=\"\(y(0))\" x2=\"\(x(maxCopies))\" y2=\"\(y(maxCopies * perCopy))\" stroke=\"#999\" stroke-dasharray=\"6 4\"/>\n"
    let path = points.map { "\(x($0.0)),\(y($0.1))" }.joined(separator: " ")
    svg += "<polyline points=\"\(path)\" fill=\"none\" stroke=\"\(palette[0])\" stroke-width=\"2\"/>\n"
    for (c, v) in points {
        svg += "<circle cx=\"\(x(c))\" cy=\"\(y(v))\" r=\"4\" fill=\"\(palette[0])\"/>\n"
        svg += "<text x=\"\(x(c) + 6)\" y=\"\(y(v) + 16)\">\(Int(v))</text>\n"
    }
    svg += "<line x1=\"\(left + 20)\" y1=\"\(top + 10)\" x2=\"\(left + 50)\" y2=\"\(top + 10)\" stroke=\"\(palette[0])\" stroke-width=\"2\"/>"
    svg += "<text x=\"\(left + 56)\" y=\"\(top + 14)\">measured</text>\n"
    svg += "<line x1=\"\(left + 20)\" y1=\"\(top + 28)\" x2=\"\(left + 50)\" y2=\"\(top + 28)\" stroke=\"#999\" stroke-dasharray=\"6 4\"/>"
    svg += "<text x=\"\(left + 56)\" y=\"\(top + 32)\">ideal linear (copies × 1-copy rate)</text>\n"
    return svg + "</svg>\n"
}

/// The latency percentile distribution of every scenario: x is the percentile on the usual
/// HdrHistogram scale (1/(1−p), so 90, 99, 99.9 % are evenly spaced), y the latency on a log scale.
func latencySVG(_ run: RunResult) -> String {
    let width = 760.0, height = 460.0, left = 80.0, right = 170.0, top = 50.0, bottom = 60.0
    let maxX = 5.0  // 99.999 %
    let series = run.scenarios.compactMap { r -> (String, [(Double, Double)])? in
        guard let d = r.latency?.distribution, !d.isEmpty else { return nil }
        let pts = d.map { p -> (Double, Double) in
            let fraction = min(p[0] / 100, 1 - pow(10, -maxX))
            return (min(maxX, log10(1 / (1 - fraction))), max(p[1], 0.001))
        }
        return (r.spec.name, pts)
    }
    var svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(Int(width))\" height=\"\(Int(height))\" font-family=\"sans-serif\" font-size=\"12\">\n"
    svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    svg += "<text x=\"\((left + width - right) / 2)\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">End-to-end latency by percentile</text>\n"
    guard !series.isEmpty else { return svg + "</svg>\n" }
    let values = series.flatMap { $0.1.map(\.1) }
    let yLow = floor(log10(values.min() ?? 0.1)), yHigh = ceil(log10(values.max() ?? 1000))
    let yRange = max(yHigh - yLow, 1)
    let x = { (v: Double) in left + (v / maxX) * (width - left - right) }
    let y = { (ms: Double) in height - bottom - ((log10(ms) - yLow) / yRange) * (height - top - bottom) }
    svg += "<line x1=\"\(left)\" y1=\"\(height - bottom)\" x2=\"\(width - right)\" y2=\"\(height - bottom)\" stroke=\"black\"/>\n"
    svg += "<line x1=\"\(left)\" y1=\"\(top)\" x2=\"\(left)\" y2=\"\(height - bottom)\" stroke=\"black\"/>\n"
    for (i, label) in ["0%", "90%", "99%", "99.9%", "99.99%", "99.999%"].enumerated() {
        let px = x(Double(i))
        svg += "<line x1=\"\(px)\" y1=\"\(top)\" x2=\"\(px)\" y2=\"\(height - bottom)\" stroke=\"#eee\"/>\n"
        svg += "<text x=\"\(px)\" y=\"\(height - bottom + 18)\" text-anchor=\"middle\">\(label)</text>\n"
    }
    var e = yLow
    while e <= yHigh {
        let ms = pow(10, e)
        svg += "<line x1=\"\(left)\" y1=\"\(y(ms))\" x2=\"\(width - right)\" y2=\"\(y(ms))\" stroke=\"#ddd\"/>\n"
        let label = ms >= 1 ? String(Int(ms)) : String(format: "%g", ms)
        svg += "<text x=\"\(left - 6)\" y=\"\(y(ms) + 4)\" text-anchor=\"end\">\(label)</text>\n"
        e += 1
    }
    svg += "<text x=\"\((left + width - right) / 2)\" y=\"\(height - 18)\" text-anchor=\"middle\">percentile</text>\n"
    svg += "<text x=\"18\" y=\"\((top + height - bottom) / 2)\" text-anchor=\"middle\" transform=\"rotate(-90 18 \((top + height - bottom) / 2))\">latency ms (log)</text>\n"
    for (index, (name, pts)) in series.enumerated() {
        let color = palette[index % palette.count]
        let path = pts.map { "\(fmt(x($0.0), 2)),\(fmt(y($0.1), 2))" }.joined(separator: " ")
        svg += "<polyline points=\"\(path)\" fill=\"none\" stroke=\"\(color)\" stroke-width=\"2\"/>\n"
        let ly = top + 10 + Double(index) * 20
        svg += "<line x1=\"\(width - right + 15)\" y1=\"\(ly)\" x2=\"\(width - right + 40)\" y2=\"\(ly)\" stroke=\"\(color)\" stroke-width=\"2\"/>"
        svg += "<text x=\"\(width - right + 46)\" y=\"\(ly + 4)\">\(escape(name))</text>\n"
    }
    return svg + "</svg>\n"
}

func niceCeiling(_ value: Double) -> Double {
    guard value > 0 else { return 1 }
    let magnitude = pow(10, floor(log10(value)))
    for step in [1.0, 2.0, 2.5, 5.0, 10.0] where step * magnitude >= value { return step * magnitude }
    return 10 * magnitude
}

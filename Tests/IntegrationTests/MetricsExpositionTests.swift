import Foundation
import TestSupport
import Testing

/// Every stage's `/metrics`, scraped live after an order went through, passes `promtool check
/// metrics` (the Prometheus naming conventions: base units, `_total` counters, help text), and
/// carries the series the dashboard and the alert rules in deploy/observability read.
@Suite("Every stage's metrics pass promtool")
struct MetricsExpositionTests {
    /// promtool's findings on `exposition`; nil when it passed.
    static func promtoolFindings(_ exposition: String) async throws -> String? {
        let run = try await runCapturing("/usr/bin/env", ["promtool", "check", "metrics"], input: Array(exposition.utf8))
        let text = run.output + run.errors
        if run.status == 127 || text.contains("No such file") {
            throw HarnessError("promtool is missing: apt-get install prometheus (.ci/install-packages does)")
        }
        return run.status == 0 && text.isEmpty ? nil : text
    }

    @Test func everyStagesLiveScrapePassesPromtoolAndCarriesTheDashboardsSeries() async throws {
        let h = try await PipelineHarness()
        try await h.stopping { h in
            let signer = try h.startSigner()
            let submitter = try h.startSubmitter()
            try h.startCallbacks()
            let poller = try h.startPoller()
            let streamerPort = try freeLoopbackPort()
            _ = try h.spawn(
                "paypipe-streamer",
                [
                    "--config", h.configPath, "--signed-in", "tcp://127.0.0.1:\(try freeLoopbackPort())",
                    "--signed-out", "tcp://127.0.0.1:\(try freeLoopbackPort())", "--metrics", "127.0.0.1:\(streamerPort)",
                ], waitForLine: "paypipe-streamer ready")
            try await h.send(phonePeAuthInit("metrics-1", authRequestId: "ARmetrics1"))
            _ = try await h.collect(timeout: .seconds(30)) { $0.contains { $0.orderId == "metrics-1" && $0.status == .pending } }

            var ports: [String: Int] = ["callbacks": h.callbacksMetricsPort, "streamer": streamerPort]
            for (name, process) in [("ledger", h.ledgerProcess), ("signer", signer), ("submitter", submitter), ("poller", poller)] {
                for _ in 0..<100 where h.metricsPort(of: process) == nil { try await Task.sleep(for: .milliseconds(100)) }
                guard let port = h.metricsPort(of: process) else { throw HarnessError("\(name) printed no metrics port") }
                ports[name] = port
            }
            var scraped: [String: String] = [:]
            // The oldest-order gauges are read from the store every few seconds.
            for _ in 0..<40 {
                scraped = ports.compactMapValues { httpGet("http://127.0.0.1:\($0)/metrics") }
                if scraped["ledger"]?.contains(#"paypipe_oldest_pending_order_age_seconds{provider="phonepe"}"#) == true { break }
                try await Task.sleep(for: .milliseconds(500))
            }
            for (stage, port) in ports.sorted(by: { $0.key < $1.key }) {
                let text = try #require(scraped[stage], "\(stage) answered /metrics on \(port)")
                let findings = try await Self.promtoolFindings(text)
                #expect(findings == nil, "\(stage): \(findings ?? "")")
                #expect(text.contains("paypipe_build_info{stage=\"paypipe-"), "\(stage) says what it runs")
                #expect(text.contains("paypipe_ready "), "\(stage) says whether it is ready")
            }
            let ledger = scraped["ledger"] ?? ""
            #expect(ledger.contains(#"paypipe_outcomes_out_total{status="pending",provider="phonepe",operation="authInit"} 1"#), "\(ledger)")
            #expect(ledger.contains(#"paypipe_oldest_pending_order_age_seconds{provider="phonepe"}"#))
            #expect(ledger.contains("paypipe_store_errors_total 0"))
            // What alerts.yaml reads of the ledger beside: corrections, the review queue's age,
            // the scheduler's lag and the live push's.
            #expect(ledger.contains("paypipe_orders_corrected_total 0"))
            #expect(ledger.contains("paypipe_oldest_review_order_age_seconds 0"))
            #expect(ledger.contains("paypipe_schedule_lag_seconds 0"))
            #expect(ledger.contains("paypipe_outcomes_push_lag_seconds "))
            let submitted = scraped["submitter"] ?? ""
            #expect(
                submitted.contains(#"paypipe_provider_responses_total{provider="phonepe",operation="authInit",status_class="2xx"} 1"#), "\(submitted)"
            )
            #expect(submitted.contains(#"paypipe_provider_request_duration_seconds_count{provider="phonepe",operation="authInit"} 1"#))
        }
    }
}

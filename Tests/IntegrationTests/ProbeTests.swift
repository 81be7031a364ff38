import Foundation
import TestSupport
import Testing

/// `/livez` and `/readyz` on every stage's fixed metrics address, read by `paypipe probe` as a
/// container healthcheck would: a stage that cannot reach a ledger is alive but not ready.
@Suite("Liveness and readiness probes through real processes", .serialized)
struct ProbeTests {
    static func probe(_ url: String) async -> Int32? {
        await runToEnd(
            PipelineHarness.buildDirectory().appendingPathComponent("paypipe").path, ["probe", url, "--timeout-ms", "1000"], within: .seconds(10))
    }

    /// Probes until the status is `wanted`, for at most 20 s; the last status.
    static func probe(_ url: String, until wanted: Int32) async -> Int32? {
        var status: Int32?
        for _ in 0..<40 {
            status = await probe(url)
            if status == wanted { break }
            try? await Task.sleep(for: .milliseconds(500))
        }
        return status
    }

    @Test func aStageIsReadyOnlyWhileItReachesALedger() async throws {
        let h = try await PipelineHarness()
        // Stopped here, not in a detached task: run alone, the test process would exit first
        // and leave the stages running.
        let result: Result<Void, any Error>
        do {
            try await Self.readiness(h)
            result = .success(())
        } catch {
            result = .failure(error)
        }
        await h.shutdown()
        try result.get()
    }

    static func readiness(_ h: PipelineHarness) async throws {
        let e = h.ledgerEndpoints
        let (submitterPort, signerPort, streamerPort) = (try freeLoopbackPort(), try freeLoopbackPort(), try freeLoopbackPort())
        _ = try h.spawn(
            "paypipe-submitter",
            [
                "--config", h.configPath, "--signed-out", e["signedOut"]!, "--results", e["results"]!, "--ledger-rpc", e["ledgerRPC"]!,
                "--metrics", "127.0.0.1:\(submitterPort)",
            ], waitForLine: nil)
        // A signer whose ledger is nowhere.
        _ = try h.spawn(
            "paypipe-signer",
            [
                "--config", h.configPath, "--sign-queue", "tcp://127.0.0.1:\(try freeLoopbackPort())", "--signed-in", e["signedIn"]!,
                "--results", "tcp://127.0.0.1:\(try freeLoopbackPort())", "--metrics", "127.0.0.1:\(signerPort)",
            ], waitForLine: nil)
        _ = try h.spawn(
            "paypipe-streamer",
            [
                "--config", h.configPath, "--signed-in", "tcp://127.0.0.1:\(try freeLoopbackPort())",
                "--signed-out", "tcp://127.0.0.1:\(try freeLoopbackPort())", "--metrics", "127.0.0.1:\(streamerPort)",
            ],
            waitForLine: "paypipe-streamer ready")
        let ready = await probe("http://127.0.0.1:\(submitterPort)/readyz", until: 0)
        #expect(ready == 0, "a submitter connected to its ledger is ready")
        #expect(await Self.probe("http://127.0.0.1:\(signerPort)/livez") == 0)
        #expect(await Self.probe("http://127.0.0.1:\(signerPort)/readyz") == 1, "a signer without a ledger is not ready")
        #expect(await Self.probe("http://127.0.0.1:\(streamerPort)/readyz") == 0)

        // The ledger goes away: the submitter stays alive and stops being ready.
        h.ledgerProcess.signal(SIGKILL)
        let unready = await Self.probe("http://127.0.0.1:\(submitterPort)/readyz", until: 1)
        #expect(unready == 1)
        #expect(await Self.probe("http://127.0.0.1:\(submitterPort)/livez") == 0)
    }

    /// The callback validator's public port carries the callback routes alone: its /metrics
    /// and probes answer on endpoints.callbacksMetrics, and are not found on the public port.
    @Test func theCallbackValidatorsMetricsAndProbesAreOffItsPublicPort() async throws {
        let h = try await PipelineHarness()
        try await h.stopping { h in
            try h.startCallbacks()
            #expect(await Self.probe("http://127.0.0.1:\(h.callbacksMetricsPort)/readyz", until: 0) == 0)
            #expect(await Self.probe("http://127.0.0.1:\(h.callbacksMetricsPort)/livez") == 0)
            let metrics = httpExchange(port: h.callbacksMetricsPort, method: "GET", path: "/metrics")
            #expect(metrics?.0 == 200)
            #expect(metrics?.1.contains(#"paypipe_build_info{stage="paypipe-callbacks""#) == true)
            for path in ["/metrics", "/livez", "/readyz", "/healthz"] {
                #expect(httpExchange(port: h.callbacksPort, method: "GET", path: path)?.0 == 404, "GET \(path) on the public port")
            }
            let callback = try #require(await h.postCallback("/callbacks/phonepe", body: Array("{}".utf8)))
            #expect(callback.0 != 404, "the public port still takes callbacks")
        }
    }

    /// `--scrape` (endpoints.ledgerScrape): a second address with the ledger's metrics and
    /// probes but not `/review`, so the network Prometheus scrapes over cannot read every
    /// merchant's orders in review; `/review` stays on `--metrics` alone.
    @Test func theLedgersScrapeAddressServesMetricsAndProbesButNotReview() async throws {
        let h = try await PipelineHarness()
        try await h.stopping { h in
            let (metricsPort, scrapePort) = (try freeLoopbackPort(), try freeLoopbackPort())
            var arguments = PipelineHarness.ledgerArguments(
                configPath: h.configPath, store: h.directory.appendingPathComponent("scrape.sqlite").path, redeliverAfterMilliseconds: 60_000)
            for option in [
                "--intake", "--outcomes", "--outcomes-replay", "--sign-queue", "--signed-in", "--signed-out", "--results", "--ledger-rpc",
                "--poll-queue", "--admin",
            ] {
                arguments += [option, "tcp://127.0.0.1:\(try freeLoopbackPort())"]
            }
            arguments += ["--metrics", "127.0.0.1:\(metricsPort)", "--scrape", "127.0.0.1:\(scrapePort)"]
            _ = try h.spawn("paypipe-ledger", arguments, waitForLine: "paypipe-ledger ready")
            #expect(await Self.probe("http://127.0.0.1:\(scrapePort)/readyz", until: 0) == 0)
            #expect(httpExchange(port: scrapePort, method: "GET", path: "/metrics")?.1.contains("paypipe_build_info") == true)
            #expect(httpExchange(port: scrapePort, method: "GET", path: "/review")?.0 == 404)
            #expect(httpExchange(port: metricsPort, method: "GET", path: "/review")?.0 == 200)
        }
    }

    /// A ledger whose PostgreSQL server cannot be reached when it starts (down, or failing over)
    /// tries for its retry window, then exits 75, the status its supervisor restarts on, not 1
    /// (a bad config).
    @Test func aLedgerThatCannotReachItsDatabaseServerAtStartExits75() async throws {
        let h = try await PipelineHarness(storeRetryWindowMs: 2000)
        let unreachable = "postgres://paypipe@127.0.0.1:\(try freeLoopbackPort())/paypipe"
        let status = await runToEnd(
            PipelineHarness.buildDirectory().appendingPathComponent("paypipe-ledger").path,
            ["--config", h.configPath, "--store", unreachable, "--intake", "tcp://127.0.0.1:\(try freeLoopbackPort())"],
            within: .seconds(60))
        await h.shutdown()
        #expect(status == 75)
    }
}

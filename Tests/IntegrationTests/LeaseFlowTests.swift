import Foundation
import HTTPTypes
import Hummingbird
import PaypipeCore
import Sandbox
import StageRuntime
import StageWire
import Synchronization
import TestSupport
import Testing
import ZeroMQ

@testable import PhonePeEmulation

/// A Nets charge endpoint on loopback that answers after `latency` and counts every request per
/// Idempotency-Key itself: it never replays, so a second request for one order shows up here.
final class SlowNetsProvider: Sendable {
    let latency: Duration
    let requestsPerKey = Mutex<[String: Int]>([:])
    /// Charge status reads per Idempotency-Key (`GET …/charges/status`).
    let statusReadsPerKey = Mutex<[String: Int]>([:])

    init(latency: Duration) { self.latency = latency }

    /// A merchant profile whose Nets calls reach this provider on `port`.
    func merchant(port: Int) -> JSONValue {
        ["nets": ["baseURL": .string("http://127.0.0.1:\(port)"), "secretKey": "fake-nets-secret-key", "webhookAuthorization": "fakeWebhookAuth1"]]
    }

    /// Serves until the task is cancelled; returns the port once listening.
    func start() async throws -> (port: Int, task: Task<Void, any Error>) {
        let router = Router()
        router.post("/v1/subscriptions/:id/charges") { request, _ -> Response in
            let key = request.headers[HTTPField.Name("Idempotency-Key")!] ?? ""
            let seen = self.requestsPerKey.withLock { counts -> Int in
                counts[key, default: 0] += 1
                return counts[key]!
            }
            try await Task.sleep(for: self.latency)
            let answer: JSONValue = ["paymentId": .string("pay-\(key.prefix(64))"), "chargeId": .string("chg-\(key.prefix(64))-\(seen)")]
            return Response(status: .created, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: answer.bytes)))
        }
        // A charge it took (a POST it answered or is answering) is found by its key; another is 404.
        router.get("/v1/subscriptions/:id/charges/status") { request, _ -> Response in
            let key = request.headers[HTTPField.Name("Idempotency-Key")!] ?? ""
            self.statusReadsPerKey.withLock { $0[key, default: 0] += 1 }
            guard self.requestsPerKey.withLock({ $0[key] != nil }) else { return Response(status: .notFound) }
            let answer: JSONValue = [
                "paymentId": .string("pay-\(key.prefix(64))"), "chargeId": .string("chg-\(key.prefix(64))-1"), "completed": true,
            ]
            return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: answer.bytes)))
        }
        let port = Mutex<Int?>(nil)
        let app = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in port.withLock { $0 = channel.localAddress?.port } })
        let task = Task { try await app.runService() }
        for _ in 0..<500 where port.withLock({ $0 }) == nil { try await Task.sleep(for: .milliseconds(10)) }
        guard let bound = port.withLock({ $0 }) else { throw HarnessError("the fake Nets provider did not start") }
        return (bound, task)
    }
}

func netsCharge(_ id: String, merchant: String = "default") -> String {
    #"{"v":1,"orderId":"\#(id)","merchant":"\#(merchant)","provider":"nets","operation":"chargeSubscription","amount":9900,"currency":"SEK","params":{"subscriptionId":"d079718b-ff63-45dd-947b-4950c023750f","reference":"\#(id)-ref"}}"#
}

/// The value of the Prometheus sample named exactly `sample` (labels included), 0 when absent.
func metricValue(_ text: String?, _ sample: String) -> Double {
    let line = text?.split(separator: "\n").first { $0.hasPrefix(sample + " ") }
    return line?.split(separator: " ").last.flatMap { Double($0) } ?? 0
}

/// The ledger's `GET /review` (JSON lines).
func reviewList(_ h: PipelineHarness) -> String? {
    guard let port = h.metricsPort(of: h.ledgerProcess) else { return nil }
    return httpGet("http://127.0.0.1:\(port)/review")
}

@Suite("Leases through real processes: slow providers, kills, unknowns, the dispatch cap", .serialized)
struct LeaseFlowTests {
    /// Scaled down from the full size of 1,000 charges at 4 s with concurrency 8 (`bench/lease/run`
    /// runs that size through this test with PAYPIPE_LEASE_ORDERS and PAYPIPE_LEASE_LATENCY_MS):
    /// 120 charges at 1.5 s with concurrency 8 is 22.5 s of provider time. The ledger's
    /// redelivery delay is 0.7 s, under the provider's latency, so a timer on `dispatched_at`
    /// alone would send every one of them again.
    @Test func aSlowProviderGetsOneRequestPerOrder() async throws {
        let environment = ProcessInfo.processInfo.environment
        let count = environment["PAYPIPE_LEASE_ORDERS"].flatMap(Int.init) ?? 120
        let latencyMilliseconds = environment["PAYPIPE_LEASE_LATENCY_MS"].flatMap(Int.init) ?? 1500
        let provider = SlowNetsProvider(latency: .milliseconds(latencyMilliseconds))
        let (port, providerTask) = try await provider.start()
        defer { providerTask.cancel() }
        // A request may take twice the provider's latency, and a lease twice that (a holder sends
        // only while a whole request fits in its lease); it only matters when a holder dies.
        let requestTimeout = Int64(2 * latencyMilliseconds)
        let h = try await PipelineHarness(
            timers: ["leaseMs": 2 * requestTimeout, "httpRequestTimeoutMs": requestTimeout], extraMerchants: ["slow": provider.merchant(port: port)],
            redeliverAfterMilliseconds: 700)
        defer { Task { await h.shutdown() } }
        try h.startSigner()
        let concurrency = 8
        try h.startSubmitter(concurrency: concurrency, backlog: count + concurrency)
        let started = ContinuousClock.now
        for i in 0..<count { try await h.send(netsCharge("slow-\(i)", merchant: "slow")) }
        let providerTime = Duration.milliseconds(count * latencyMilliseconds / concurrency)
        let outcomes = try await h.collect(timeout: providerTime * 2 + .seconds(60)) {
            Set($0.filter { $0.status.isTerminal }.map(\.orderId)).count >= count
        }
        let terminal = outcomes.filter { $0.status.isTerminal }
        #expect(Set(terminal.map(\.orderId)).count == count)
        #expect(terminal.allSatisfy { $0.status == .succeeded })
        #expect(!outcomes.contains { $0.error?.code == "NEEDS_REVIEW" })
        let counts = provider.requestsPerKey.withLock { $0 }
        #expect(counts.count == count)
        #expect(
            counts.values.allSatisfy { $0 == 1 }, "requests per Idempotency-Key: \(counts.values.filter { $0 > 1 }.count) keys sent more than once")
        let metrics = ledgerMetrics(h) ?? ""
        print(
            "lease run: \(count) charges at \(latencyMilliseconds) ms, concurrency \(concurrency): \(terminal.count) terminal in \(ContinuousClock.now - started),",
            "\(counts.values.reduce(0, +)) provider requests for \(counts.count) keys,",
            metrics.split(separator: "\n").filter {
                $0.hasPrefix("paypipe_orders_redelivered_total") || $0.hasPrefix("paypipe_orders_dispatch_cap_total")
            }.joined(separator: ", "))
        await h.shutdown()
    }

    /// A submitter told to stop takes no more work, but the submissions it holds finish and
    /// their outcomes go out before it exits: none is left to the lease's lapse and a second
    /// request.
    @Test func aSubmitterStoppedWithRequestsInFlightReportsThemBeforeItExits() async throws {
        let provider = SlowNetsProvider(latency: .milliseconds(1500))
        let (port, providerTask) = try await provider.start()
        defer { providerTask.cancel() }
        let h = try await PipelineHarness(extraMerchants: ["slow": provider.merchant(port: port)])
        defer { Task { await h.shutdown() } }
        try h.startSigner()
        let submitter = try h.startSubmitter(concurrency: 4)
        let ids = (0..<4).map { "stopping-\($0)" }
        for id in ids { try await h.send(netsCharge(id, merchant: "slow")) }
        #expect(await eventually(within: .seconds(20)) { provider.requestsPerKey.withLock { $0.count } == ids.count })
        submitter.signal(SIGTERM)
        let outcomes = try await h.collect(timeout: .seconds(30)) { Set($0.filter { $0.status.isTerminal }.map(\.orderId)).count >= ids.count }
        #expect(Set(outcomes.filter { $0.status == .succeeded }.map(\.orderId)) == Set(ids))
        #expect(await waitForExit(submitter, within: .seconds(20)))
        #expect(submitter.exitStatus == 0)
        #expect(provider.requestsPerKey.withLock { $0.values.allSatisfy { $0 == 1 } })
        await h.shutdown()
    }

    /// No submitter runs at first, so the ledger dispatches the order again and again; the copies
    /// wait in the queues. The submitter that starts later claims them all in one request: one
    /// copy is granted, the others are dropped unsent and counted.
    @Test func staleCopiesAreDroppedUnsent() async throws {
        let provider = SlowNetsProvider(latency: .zero)
        let (port, providerTask) = try await provider.start()
        defer { providerTask.cancel() }
        let h = try await PipelineHarness(
            timers: ["maxDispatches": 40], extraMerchants: ["fast": provider.merchant(port: port)], redeliverAfterMilliseconds: 300)
        defer { Task { await h.shutdown() } }
        try h.startSigner()
        try await h.send(netsCharge("stale-1", merchant: "fast"))
        // Copies pile up unclaimed before any submitter runs: the older ones arrive stale.
        #expect(await eventually(within: .seconds(20)) { metricValue(ledgerMetrics(h), "paypipe_orders_redelivered_total") >= 2 })
        let submitter = try h.startSubmitter()
        let outcomes = try await h.collect(timeout: .seconds(30)) { $0.contains { $0.orderId == "stale-1" } }
        #expect(outcomes.first { $0.orderId == "stale-1" }?.status == .succeeded)
        #expect(provider.requestsPerKey.withLock { $0.values.reduce(0, +) } == 1)
        let submitterMetrics = h.metricsPort(of: submitter).flatMap { httpGet("http://127.0.0.1:\($0)/metrics") }
        #expect(metricValue(submitterMetrics, #"paypipe_submitter_work_dropped_total{reason="stale"}"#) >= 1)
        await h.shutdown()
    }

    /// auth/init reaches PhonePe but its answer never comes back in time, and neither do the
    /// status calls: the order ends in review, and PhonePe sees auth/init once.
    @Test func anUnknownPhonePeOrderIsNeverInitiatedAgain() async throws {
        let h = try await PipelineHarness(
            sandboxConfiguration: SandboxConfiguration(port: 0, latencyMilliseconds: 1500).with { $0.phonePe.callbackDelayMilliseconds = 3_600_000 },
            timers: ["leaseMs": 900, "httpRequestTimeoutMs": 500], redeliverAfterMilliseconds: 700)
        defer { Task { await h.shutdown() } }
        try h.startSigner()
        try h.startSubmitter()
        try await h.send(phonePeAuthInit("pp-unknown-1", authRequestId: "ARunknown1"))
        let outcomes = try await h.collect(timeout: .seconds(60)) { $0.contains { $0.error?.code == "NEEDS_REVIEW" } }
        #expect(outcomes.contains { $0.status == .unknown && $0.error?.code == "OUTCOME_UNKNOWN" })
        let review = try #require(outcomes.first { $0.error?.code == "NEEDS_REVIEW" })
        #expect(review.orderId == "pp-unknown-1" && review.status == .unknown)
        // The product's own timer is under test: several redelivery windows pass, and nothing is
        // sent again.
        try await Task.sleep(for: .seconds(3))
        #expect(h.sandbox.ledger.requests("phonepe:ARunknown1") == 1)
        #expect(reviewList(h)?.contains("pp-unknown-1") == true)
        await h.shutdown()
    }

    /// The submitter holding the lease is killed while PhonePe works on auth/init: once the
    /// lease lapses the order goes out again, a new submitter asks the status first, and
    /// PhonePe sees auth/init once.
    @Test func aKilledHolderIsRedeliveredAfterItsLeaseLapsesAndResolvedFirst() async throws {
        let h = try await PipelineHarness(
            sandboxConfiguration: SandboxConfiguration(port: 0, latencyMilliseconds: 2000).with { $0.phonePe.callbackDelayMilliseconds = 3_600_000 },
            timers: ["leaseMs": 6000, "httpRequestTimeoutMs": 3500])
        defer { Task { await h.shutdown() } }
        try h.startSigner()
        let holder = try h.startSubmitter()
        try await h.send(phonePeAuthInit("pp-kill-1", authRequestId: "ARkill1"))
        #expect(await eventually(within: .seconds(20)) { h.sandbox.ledger.requests("phonepe:ARkill1") == 1 })
        holder.signal(SIGKILL)
        _ = await waitForExit(holder, within: .seconds(10))
        try h.startSubmitter()
        let outcomes = try await h.collect(timeout: .seconds(30)) { $0.contains { $0.orderId == "pp-kill-1" } }
        let outcome = try #require(outcomes.first { $0.orderId == "pp-kill-1" })
        #expect(outcome.status == .pending)
        #expect(h.sandbox.ledger.requests("phonepe:ARkill1") == 1)
        #expect(h.sandbox.ledger.effects("phonepe:ARkill1") == 1)
        #expect(metricValue(ledgerMetrics(h), "paypipe_orders_redelivered_total") >= 1)
        await h.shutdown()
    }

    /// The test takes each dispatch up in a submitter's place (it claims it and then never
    /// renews, as a submitter that dies would): after the second lost claim the order goes to
    /// review, is counted, and both `GET /review` and `paypipe review` list it.
    @Test func theDispatchCapSendsAnOrderToReview() async throws {
        let h = try await PipelineHarness(timers: ["maxDispatches": 2, "leaseMs": 300, "httpRequestTimeoutMs": 150], redeliverAfterMilliseconds: 300)
        defer { Task { await h.shutdown() } }
        let signQueue = try h.context.socket(.pull)
        try signQueue.connect(h.ledgerEndpoints["signQueue"]!)
        let dispatched = try ZMQReceiver(socket: signQueue)
        let ledger = try LedgerClient(context: h.context, endpoint: h.ledgerEndpoints["ledgerRPC"]!)
        defer { dispatched.stop() }
        try await h.send(netsCharge("capped-1"))
        var claimed: [Int64] = []
        var outcomes: [Outcome] = []
        let deadline = ContinuousClock.now + .seconds(20)
        while !outcomes.contains(where: { $0.orderId == "capped-1" }), ContinuousClock.now < deadline {
            for message in try await dispatched.nextBatch(timeoutMilliseconds: 100) ?? [] {
                guard let dispatch = try? DispatchFrame.decode(message.body, catalog: testCatalog) else { continue }
                if case .claimed([true]) = try await ledger.call(
                    .claim([LeaseClaim(key: dispatch.order.key, generation: dispatch.generation, token: dispatch.token)]))
                {
                    claimed.append(dispatch.generation)
                }
            }
            outcomes += try await h.collect(timeout: .milliseconds(100)) { !$0.isEmpty }
        }
        await ledger.close()
        #expect(claimed.count == 2, "claimed generations \(claimed)")
        let outcome = try #require(outcomes.first { $0.orderId == "capped-1" })
        #expect(outcome.status == .unknown && outcome.error?.code == "NEEDS_REVIEW")
        #expect(ledgerMetrics(h)?.contains("paypipe_orders_dispatch_cap_total 1") == true)
        let listed = try #require(reviewList(h))
        #expect(listed.split(separator: "\n").count == 1 && listed.contains(#""orderId":"capped-1""#))

        let port = try #require(h.metricsPort(of: h.ledgerProcess))
        let cli = try await runCapturing(
            PipelineHarness.buildDirectory().appendingPathComponent("paypipe").path, ["review", "--ledger", "127.0.0.1:\(port)"],
            within: .seconds(30))
        #expect(cli.status == 0)
        #expect(cli.output == listed)
        await h.shutdown()
    }
}

import Foundation
import PaypipeCore
import Sandbox
import StageRuntime
import StageWire
import TestSupport
import Testing
import ZeroMQ

@testable import LedgerStage
@testable import PhonePeEmulation

/// The trust rules through the real processes and sockets: forged results, a lost frame's
/// neighbours, a Nets redelivery, and upstream authentication.
@Suite("Trust through real processes: forged results, big frames, Nets redelivery, upstream CURVE", .serialized)
struct TrustFlowTests {
    /// The ledger's ticket key, read from its store as an attacker who stole the disk could:
    /// enough to forge any ticket, so that only the role and claim rules stop what follows.
    static func tickets(_ h: PipelineHarness) throws -> DispatchTickets {
        let db = try TestStores.database(directory: h.directory)
        let text = try #require(try db.query("SELECT value FROM meta WHERE name='ticket_key'").first?[0].text)
        let parts = text.split(separator: ":").compactMap { UInt64($0, radix: 16) }
        return DispatchTickets(key: (parts[0], parts[1]))
    }

    /// Pushes one result frame to the ledger's results socket with `options`, and lets it go.
    static func push(_ h: PipelineHarness, _ frame: [UInt8], options: ZMQSocketOptions) async throws {
        let context = try ZMQContext()
        var options = options
        options.lingerMilliseconds = 2000
        let socket = try context.socket(.push, options: options)
        try socket.connect(h.ledgerEndpoints["results"]!)
        let sender = try ZMQSender(socket: socket)
        try await sender.send(frame)
        _ = await sender.finish(drainTimeoutMilliseconds: 2000)
        context.terminate()
    }

    static func refusedCount(_ h: PipelineHarness) -> Double { metricValue(ledgerMetrics(h), "paypipe_results_refused_total") }

    /// A PhonePe mandate a submitter holds (its provider answers slowly): a success pushed with
    /// the signer's key, with a submitter's key for a generation never dispatched, or with no
    /// key at all changes nothing; the order's own outcome follows.
    @Test func forgedResultsChangeNothingWithCurve() async throws {
        let h = try await PipelineHarness(
            sandboxConfiguration: SandboxConfiguration(port: 0, latencyMilliseconds: 3000).with { $0.phonePe.callbackDelayMilliseconds = 3_600_000 },
            curve: true)
        defer { Task { await h.shutdown() } }
        try h.startSigner()
        try h.startSubmitter()
        try await h.send(phonePeAuthInit("forge-1", authRequestId: "ARforge1"))
        #expect(await eventually(within: .seconds(20)) { h.sandbox.ledger.requests("phonepe:ARforge1") == 1 })
        let tickets = try Self.tickets(h)
        let key = OrderKey(merchant: "default", orderId: "forge-1")
        let forged = Outcome(
            orderId: "forge-1", merchant: "default", provider: "phonepe", operation: "authInit", status: .succeeded, result: ["state": "COMPLETED"])
        func frame(_ generation: Int64) -> [UInt8] {
            StageResult(answering: .submit, ticket: tickets.ticket(for: key, generation: generation), outcome: forged).frame
        }
        try await Self.push(h, frame(1), options: CurveLinkTests.options(h, h.curveKeys[.signer]))
        try await Self.push(h, frame(2), options: CurveLinkTests.options(h, h.curveKeys[.submitter]))
        try await Self.push(h, frame(1), options: CurveLinkTests.options(h, nil))
        #expect(await eventually(within: .seconds(10)) { Self.refusedCount(h) >= 2 })
        let outcomes = try await h.collect(timeout: .seconds(30)) { $0.contains { $0.orderId == "forge-1" } }
        #expect(outcomes.filter { $0.orderId == "forge-1" }.map(\.status) == [.pending])
        #expect(Self.refusedCount(h) == 2, "the plaintext frame never got past the handshake")
        #expect(h.stderr(of: 0).contains("refused a stage's outcome"))
        await h.shutdown()
    }

    /// Without CURVE anyone may reach the results socket: a frame without a ticket the ledger
    /// issued (a bare outcome, or a made-up token) changes nothing.
    @Test func forgedResultsChangeNothingWithoutCurve() async throws {
        let h = try await PipelineHarness()
        defer { Task { await h.shutdown() } }
        try await h.send(vivaSaleJSON("forge-2"))
        #expect(await eventually(within: .seconds(20)) { metricValue(ledgerMetrics(h), "paypipe_orders_in_total") == 1 })
        let forged = Outcome(orderId: "forge-2", merchant: "default", provider: "viva", operation: "sale", status: .succeeded, result: [:])
        try await Self.push(h, forged.bytes, options: ZMQSocketOptions())
        try await Self.push(
            h, StageResult(answering: .submit, ticket: DispatchTicket(generation: 1, token: 0xDEAD_BEEF), outcome: forged).frame,
            options: ZMQSocketOptions())
        #expect(await eventually(within: .seconds(10)) { Self.refusedCount(h) == 1 })
        // The signer, started now, issues the sale's URL: the order was still open.
        try h.startSigner()
        let outcomes = try await h.collect(timeout: .seconds(20)) { $0.contains { $0.orderId == "forge-2" } }
        #expect(outcomes.filter { $0.orderId == "forge-2" }.map(\.status) == [.pending])
        await h.shutdown()
    }

    /// A second order system's connection to the intake, with the harness's options but for
    /// `immediate`.
    static func intakeSender(_ h: PipelineHarness, immediate: Bool = true) throws -> (context: ZMQContext, sender: ZMQSender) {
        let context = try ZMQContext()
        var options = PipelineHarness.upstreamClientOptions(nil, ledger: nil)
        options.immediate = immediate
        let socket = try context.socket(.push, options: options)
        try socket.connect(h.ledgerEndpoints["intake"]!)
        return (context, try ZMQSender(socket: socket))
    }

    /// A frame over the order limit but within the socket's is read and refused: with an
    /// outcome when it names its order, counted when it does not, and the orders behind it on
    /// its connection and on another all get theirs.
    @Test func anOversizedOrderIsRejectedAndNothingAroundItIsLost() async throws {
        let h = try await PipelineHarness()
        defer { Task { await h.shutdown() } }
        try h.startSigner()
        let other = try Self.intakeSender(h)
        defer { other.context.terminate() }
        let padding = String(repeating: "x", count: 1 << 20)
        try await h.send(
            #"{"v":1,"orderId":"huge-1","provider":"viva","operation":"sale","amount":1050,"currency":"EUR","params":{"pad":"\#(padding)"}}"#)
        try await h.send(bytes: Array(repeating: UInt8(ascii: "x"), count: 1 << 20))
        let behind = (0..<500).map { "behind-\($0)" }
        let beside = (0..<100).map { "beside-\($0)" }
        for (index, id) in behind.enumerated() {
            try await h.send(vivaSaleJSON(id))
            if index < beside.count { try await other.sender.send(Array(vivaSaleJSON(beside[index]).utf8)) }
        }
        let expected = Set(behind + beside + ["huge-1"])
        let outcomes = try await h.collect(timeout: .seconds(60)) { expected.isSubset(of: Set($0.map(\.orderId))) }
        #expect(Set(outcomes.map(\.orderId)) == expected)
        let huge = outcomes.first { $0.orderId == "huge-1" }
        #expect(huge?.status == .rejected && huge?.error?.code == "FRAME_TOO_LARGE")
        #expect(metricValue(ledgerMetrics(h), #"paypipe_frames_dropped_total{reason="FRAME_TOO_LARGE"}"#) == 1)
        _ = await other.sender.finish(drainTimeoutMilliseconds: 2000)
        await h.shutdown()
    }

    /// A frame over the socket's limit (`intake.maxFrameBytes`) is never read: libzmq closes the
    /// connection that brings it, and the orders its sender had queued behind it are lost with
    /// it. Other connections lose nothing, and the sender's later orders, once it has
    /// reconnected, get their outcomes. With ZMQ_IMMEDIATE off (libzmq's default) the sender
    /// keeps its queue across the reconnection, and only what was already on the wire is lost.
    @Test(arguments: [true, false]) func aFrameOverTheSocketLimitClosesOnlyItsConnection(immediate: Bool) async throws {
        let h = try await PipelineHarness()
        defer { Task { await h.shutdown() } }
        try h.startSigner()
        let offender = try Self.intakeSender(h, immediate: immediate)
        defer { offender.context.terminate() }
        let before = (0..<100).map { "before-\($0)" }
        for id in before { try await offender.sender.send(Array(vivaSaleJSON(id).utf8)) }
        var outcomes = try await h.collect(timeout: .seconds(30)) { Set($0.map(\.orderId)).isSuperset(of: before) }
        let limit = Int(PaypipeConfig.Intake().maxFrameBytes)
        try await offender.sender.send(Array(repeating: UInt8(ascii: "x"), count: limit + 1))
        let behind = (0..<200).map { "behind-\($0)" }
        let beside = (0..<200).map { "beside-\($0)" }
        for (id, neighbour) in zip(behind, beside) {
            try await offender.sender.send(Array(vivaSaleJSON(id).utf8))
            try await h.send(vivaSaleJSON(neighbour))
        }
        outcomes += try await h.collect(timeout: .seconds(30)) { Set($0.map(\.orderId)).isSuperset(of: beside) }
        #expect(Set(outcomes.map(\.orderId)).isSuperset(of: before + beside))
        let after = (0..<100).map { "after-\($0)" }
        for id in after { try await offender.sender.send(Array(vivaSaleJSON(id).utf8)) }
        outcomes += try await h.collect(timeout: .seconds(30)) { Set($0.map(\.orderId)).isSuperset(of: after) }
        let received = Set(outcomes.map(\.orderId))
        let lostBehind = behind.filter { !received.contains($0) }.count
        print("frame over the socket limit, immediate \(immediate): \(lostBehind) of \(behind.count) orders behind it lost")
        #expect(after.allSatisfy(received.contains))
        #expect(metricValue(ledgerMetrics(h), #"paypipe_frames_dropped_total{reason="FRAME_TOO_LARGE"}"#) == 0)
        _ = await offender.sender.finish(drainTimeoutMilliseconds: 2000)
        await h.shutdown()
    }

    /// The holder of a Nets charge dies while Nets takes it: the order goes out again, the new
    /// submitter reads the charge's status by its Idempotency-Key and ends the order with it,
    /// and Nets gets one POST.
    @Test func aRedeliveredNetsChargeIsNeverPostedTwice() async throws {
        let provider = SlowNetsProvider(latency: .milliseconds(2500))
        let (port, providerTask) = try await provider.start()
        defer { providerTask.cancel() }
        let h = try await PipelineHarness(
            timers: ["leaseMs": 6000, "httpRequestTimeoutMs": 3500], extraMerchants: ["slow": provider.merchant(port: port)])
        defer { Task { await h.shutdown() } }
        try h.startSigner()
        let holder = try h.startSubmitter()
        try await h.send(netsCharge("once-1", merchant: "slow"))
        #expect(await eventually(within: .seconds(20)) { provider.requestsPerKey.withLock { $0.count } == 1 })
        holder.signal(SIGKILL)
        _ = await waitForExit(holder, within: .seconds(10))
        try h.startSubmitter()
        let outcomes = try await h.collect(timeout: .seconds(40)) { $0.contains { $0.orderId == "once-1" && $0.status.isTerminal } }
        let outcome = try #require(outcomes.first { $0.orderId == "once-1" && $0.status.isTerminal })
        #expect(outcome.status == .succeeded && outcome.result?["chargeId"]?.stringValue?.hasPrefix("chg-") == true)
        #expect(provider.requestsPerKey.withLock { $0.values.map { $0 } } == [1], "POSTs per Idempotency-Key")
        #expect(provider.statusReadsPerKey.withLock { $0.values.reduce(0, +) } >= 1)
        await h.shutdown()
    }

    /// With `curve.upstream`, intake, outcomes and replay take only the listed clients: a
    /// plaintext or unlisted client can neither push an order nor pull an outcome; a client
    /// limited to some merchants cannot pull the live outcomes, its orders for other merchants
    /// are dropped, and replay gives it only its merchants' outcomes.
    @Test func onlyListedUpstreamClientsPushAndPull() async throws {
        let h = try await PipelineHarness(curve: true, upstream: [("order-system", nil), ("shop-b", ["shop-b"])])
        defer { Task { await h.shutdown() } }
        try h.startSigner()
        let context = try ZMQContext()
        defer { context.terminate() }
        let stranger = try ZMQCurveKeyPair.generate()
        let shopB = try #require(h.upstreamKeys["shop-b"])
        // Three eavesdroppers on the live outcomes and three pushers of orders.
        var pullers: [ZMQReceiver] = []
        for pair in [nil, stranger, shopB] as [ZMQCurveKeyPair?] {
            let pull = try context.socket(.pull, options: h.upstreamClientOptions(pair))
            try pull.connect(h.ledgerEndpoints["outcomes"]!)
            pullers.append(try ZMQReceiver(socket: pull))
        }
        for (pair, id) in [(nil, "plain-1"), (stranger, "stranger-1"), (shopB, "shopb-default-1")] as [(ZMQCurveKeyPair?, String)] {
            var options = h.upstreamClientOptions(pair)
            options.sendTimeoutMilliseconds = 2000
            options.lingerMilliseconds = 0
            let push = try context.socket(.push, options: options)
            try push.connect(h.ledgerEndpoints["intake"]!)
            _ = try? push.send(Array(vivaSaleJSON(id).utf8))
            push.close()
        }
        try await h.send(vivaSaleJSON("listed-1"))
        var outcomes = try await h.collect(timeout: .seconds(20)) { $0.contains { $0.orderId == "listed-1" } }
        // Every frame taken in (the unlisted client's is dropped): anything else would have come by now.
        #expect(
            await eventually(within: .seconds(20)) {
                metricValue(ledgerMetrics(h), #"paypipe_frames_dropped_total{reason="MERCHANT_NOT_ALLOWED"}"#) == 1
            })
        outcomes += try await h.collect(timeout: .milliseconds(300)) { _ in false }
        #expect(Set(outcomes.map(\.orderId)) == ["listed-1"])
        #expect(metricValue(ledgerMetrics(h), "paypipe_orders_in_total") == 2, "the listed client's order and shop-b's, which is dropped")
        #expect(metricValue(ledgerMetrics(h), #"paypipe_frames_dropped_total{reason="MERCHANT_NOT_ALLOWED"}"#) == 1)
        for puller in pullers {
            #expect(try await puller.nextBatch(timeoutMilliseconds: 500)?.isEmpty ?? true)
            puller.stop()
        }
        // Replay: every outcome for the unrestricted client; none of default's for shop-b.
        func replay(_ pair: ZMQCurveKeyPair?) async throws -> [[UInt8]] {
            let client = try OutcomeReplayClient(
                context: context, endpoint: h.ledgerEndpoints["outcomesReplay"]!, options: h.upstreamClientOptions(pair))
            defer { Task { await client.close() } }
            return try await client.fetch(since: 0, limit: 100, timeoutMilliseconds: 3000).outcomes
        }
        #expect(try await replay(h.upstreamKeys["order-system"]).count == 1)
        #expect(try await replay(shopB).isEmpty)
        await #expect(throws: (any Error).self) { try await replay(stranger) }
        await h.shutdown()
    }
}

func vivaSaleJSON(_ id: String) -> String {
    #"{"v":1,"orderId":"\#(id)","provider":"viva","operation":"sale","amount":1050,"currency":"EUR","params":{}}"#
}

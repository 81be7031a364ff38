import Connectors
import Foundation
import PaypipeCore
import Sandbox
import SignerStage
import StageRuntime
import StageWire
import Supervision
import TestSupport
import Testing
import ZeroMQ

@testable import LedgerStage
@testable import PhonePeEmulation
@testable import SubmitterStage

/// Stage behaviours that are easy to get wrong, each through its real code path.
@Suite("Stage fixes", .serialized)
struct StageFixesTests {
    /// A failed status check reports `unknown`; the pending mandate must stay pending (and be
    /// checked again later), not go back to be initiated again.
    @Test func anUnknownOutcomeDoesNotReopenAPendingOrder() async throws {
        var core = LedgerCore(store: try temporaryStore(), registry: await testRegistry(), timers: timers(phonepeCallbackWaitMs: 10_000))
        _ = try core.intake([Array(phonePeOrder.utf8)], now: 1000)
        let o = try order(phonePeOrder)
        _ = try core.submitted(Outcome(order: o, status: .pending, result: ["authRequestId": "AR1"]), now: 2000)
        let unknown = Outcome(order: o, status: .unknown, error: .init(code: "OUTCOME_UNKNOWN", message: "status call timed out"))
        #expect(try core.submitted(unknown, now: 3000).isEmpty)
        #expect(try core.store.lookup(o.key)?.state == .pending)
        // No redelivery of the whole order, ever: only the next status check.
        #expect(
            try core.redeliver(now: 3000 + 61_000).allSatisfy { effect in
                guard case .dispatch(let frame) = effect else { return false }
                return readDispatch(frame)?.purpose == .statusCheck
            })
    }

    @Test func aWorkItemWhoseContextIsUnreadableEndsRejectedBeforeAnythingIsSent() async throws {
        var work = try await SignerCoreProbe.phonePeWork()
        work.context = .string("garbage")
        var submission = Submission(work: work, connector: await connector(for: work))
        guard case .finish(let outcome) = submission.start() else {
            Issue.record("expected an outcome, not a send")
            return
        }
        #expect(outcome.status == .rejected)
        #expect(outcome.error?.code == "UNREADABLE_WORK")
    }

    /// A real signer and submitter fed by this test's own sockets: a first submission's frame
    /// that names its order but cannot be read otherwise gets that order a `rejected` outcome,
    /// naming the dispatch it answers, and the next frame is still served.
    @Test func unreadableDispatchAndWorkFramesGiveTheirOrderAnOutcome() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("paypipe-frames-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let configPath = directory.appendingPathComponent("config.json").path
        try DemoConfig.text(sandboxURL: "http://127.0.0.1:9").write(toFile: configPath, atomically: true, encoding: .utf8)
        let context = try ZMQContext()
        defer { context.terminate() }
        let work = try context.socket(.push)
        let workEndpoint = try work.bind("tcp://127.0.0.1:*")
        let signedIn = try context.socket(.pull)
        let signedEndpoint = try signedIn.bind("tcp://127.0.0.1:*")
        let results = try context.socket(.pull)
        let resultsEndpoint = try results.bind("tcp://127.0.0.1:*")
        let outcomes = try ZMQReceiver(socket: results)
        defer { outcomes.stop() }
        let sender = try ZMQSender(socket: work)

        var started: [ChildProcess] = []
        for (index, stage) in ["signer", "submitter"].enumerated() {
            let arguments =
                stage == "signer"
                ? ["--sign-queue", workEndpoint, "--signed-in", signedEndpoint, "--results", resultsEndpoint]
                : ["--signed-out", workEndpoint, "--results", resultsEndpoint]
            let ((process, _), _) = try PipelineHarness.spawn(
                "paypipe-\(stage)", ["--config", configPath] + arguments, in: directory, index: index, waitForLine: nil)
            started.append(process)
            defer { process.signal(SIGTERM) }
            let orderId = "unreadable-\(stage)"
            // A first submission whose order is readable; the frame ends with a byte no release writes.
            let orderJSON =
                #"{"v":1,"orderId":"\#(orderId)","merchant":"default","provider":"viva","operation":"sale","amount":1,"currency":"EUR","params":{}}"#
            let readable: [UInt8] =
                stage == "signer"
                ? DispatchFrame.encode(orderJSON: orderJSON, acceptedAt: 1, token: 42)
                : SubmitWork(
                    order: try order(orderJSON), request: HTTPRequestSpec(method: .GET, url: "http://127.0.0.1:9/"), acceptedAt: 1,
                    token: 42
                ).frame
            var received: [StageResult] = []
            let deadline = ContinuousClock.now + .seconds(20)
            while !received.contains(where: { $0.outcome.orderId == orderId }), ContinuousClock.now < deadline {
                if received.isEmpty { try await sender.send(readable + [0]) }
                for message in try await outcomes.nextBatch(timeoutMilliseconds: 500) ?? [] {
                    if let (answering, ticket, bytes, _) = StageResult.decode(message.body), let outcome = try? Outcome.parse(bytes) {
                        received.append(StageResult(answering: answering, ticket: ticket, outcome: outcome))
                    }
                }
            }
            let result = try #require(received.first { $0.outcome.orderId == orderId })
            #expect(result.outcome.status == .rejected)
            #expect(result.outcome.error?.code == "UNREADABLE_WORK")
            #expect(result.ticket == DispatchTicket(generation: 1, token: 42) && result.answering == .submit)
        }
        for process in started { _ = await waitForExit(process, within: .seconds(30)) }
        _ = await sender.finish(drainTimeoutMilliseconds: 200)
    }

    /// The gauge counts submissions between their first send and their outcome: up while the
    /// provider is slow, back to 0 when everything has ended.
    @Test func theInFlightGaugeCountsWhatIsInFlight() async throws {
        let h = try await PipelineHarness(
            sandboxConfiguration: SandboxConfiguration(port: 0, latencyMilliseconds: 1500).with { $0.phonePe.callbackDelayMilliseconds = 3_600_000 })
        defer { Task { await h.shutdown() } }
        try h.startSigner()
        let submitter = try h.startSubmitter(concurrency: 8)
        for i in 0..<20 {
            try await h.send(
                #"{"v":1,"orderId":"gauge-\#(i)","provider":"phonepe","operation":"authInit","amount":39900,"currency":"INR","params":{"merchantUserId":"U1","subscriptionId":"SUB1"}}"#
            )
        }
        var during: Double = -1
        for _ in 0..<50 where during <= 0 {
            try await Task.sleep(for: .milliseconds(100))
            during = inFlight(h, submitter)
        }
        #expect(during > 0 && during <= 8, "in flight while the provider is slow: \(during)")
        _ = try await h.collect(timeout: .seconds(30)) { $0.count >= 20 }
        try await Task.sleep(for: .milliseconds(200))
        #expect(inFlight(h, submitter) == 0)
        await h.shutdown()
    }

    func inFlight(_ h: PipelineHarness, _ process: ChildProcess) -> Double {
        guard let port = h.metricsPort(of: process), let text = httpGet("http://127.0.0.1:\(port)/metrics") else { return -1 }
        let line = text.split(separator: "\n").first { $0.hasPrefix("paypipe_submitter_in_flight ") }
        return line.flatMap { Double($0.split(separator: " ").last ?? "") } ?? -1
    }
}

enum SignerCoreProbe {
    static func phonePeWork() async throws -> SubmitWork {
        guard
            case .submit(let work) = SignerCore(registry: await testRegistry()).sign(
                try order(phonePeOrder), acceptedAt: 1, nowSeconds: 1_795_237_200)
        else {
            throw EnvelopeTestError("no work")
        }
        return work
    }
}

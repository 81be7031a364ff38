import Connectors
import Crypto
import Emulators
import ExampleConnector
import ExampleEmulation
import Foundation
import Logging
import PaypipeCore
import Sandbox
import StageRuntime
import Supervision
import Synchronization
import TestSupport
import Testing
import ZeroMQ

/// The made-up sixth provider through the real stage processes (`paypipe-example-stages`: the
/// standard stages with one more registry line) against its own sandbox emulator, served by
/// the real sandbox server, which counts every request per idempotency key.
@Suite("A sixth provider added through the seams: connector, config section, polling, emulator")
struct ExampleConnectorTests {
    static func charge(_ id: String, note: JSONValue, extra: String = "") -> String {
        #"{"v":1,"orderId":"\#(id)","provider":"example","operation":"charge","amount":500,"currency":"EUR","params":{"note":\#(note.serialized)\#(extra)}}"#
    }

    @Test func chargesWebhooksAndRejectionsGoThroughTheRealStages() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("paypipe-example-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let callbacksPort = try freeLoopbackPort()
        let demo = { (sandboxURL: String, endpoints: [String: String]) in
            DemoConfig.text(
                sandboxURL: sandboxURL, callbacks: "127.0.0.1:\(callbacksPort)", endpoints: endpoints, sections: [ExampleConfig.self])
        }
        var logger = Logger(label: "example-sandbox")
        logger.logLevel = .critical
        let sandbox = try SandboxServer(
            configuration: SandboxConfiguration(port: 0, providerOptions: ["example.decideAfterPolls": "3"]),
            config: try PaypipeConfig.parse(Array(demo("http://127.0.0.1:9", [:]).utf8), sections: [ExampleConfig.self]),
            emulators: [ExampleEmulator.self], logger: logger)
        let port = Mutex<Int?>(nil)
        let sandboxTask = Task { try await sandbox.run { p in port.withLock { $0 = p } } }
        defer { sandboxTask.cancel() }
        for _ in 0..<500 where port.withLock({ $0 }) == nil { try await Task.sleep(for: .milliseconds(10)) }
        let sandboxPort = try #require(port.withLock { $0 })
        let any = "tcp://127.0.0.1:*"
        let config = demo(
            "http://127.0.0.1:\(sandboxPort)",
            [
                "intake": any, "outcomes": any, "signQueue": any, "signedIn": any, "signedOut": any, "results": any, "ledgerRPC": any,
                "pollQueue": any, "outcomesReplay": any, "ledgerMetrics": "127.0.0.1:0",
            ])
        let configPath = directory.appendingPathComponent("config.json").path
        try config.write(toFile: configPath, atomically: true, encoding: .utf8)

        let stages = "paypipe-example-stages"
        var children: [ChildProcess] = []
        defer { for child in children.reversed() where child.isRunning { child.signal(SIGKILL) } }
        let ((ledger, _), ready) = try PipelineHarness.spawn(
            stages, ["ledger", "--config", configPath, "--store", TestStores.ledgerArgument(directory: directory)],
            in: directory, index: 0, waitForLine: LedgerAddresses.readyMarker)
        children.append(ledger)
        let endpoints = LedgerAddresses.printed(in: ready ?? "")
        for (index, arguments) in [
            ["signer", "--sign-queue", endpoints["signQueue"]!, "--signed-in", endpoints["signedIn"]!, "--results", endpoints["results"]!],
            ["submitter", "--signed-out", endpoints["signedOut"]!, "--results", endpoints["results"]!, "--ledger-rpc", endpoints["ledgerRPC"]!],
            ["poller", "--poll-queue", endpoints["pollQueue"]!, "--results", endpoints["results"]!, "--ledger-rpc", endpoints["ledgerRPC"]!],
        ].enumerated() {
            children.append(
                try PipelineHarness.spawn(stages, arguments + ["--config", configPath], in: directory, index: index + 1, waitForLine: nil).0.0)
        }
        children.append(
            try PipelineHarness.spawn(
                stages, ["callbacks", "--config", configPath, "--ledger-rpc", endpoints["ledgerRPC"]!], in: directory, index: 4,
                waitForLine: "paypipe-callbacks listening"
            ).0.0)

        let context = try ZMQContext()
        let push = try context.socket(.push)
        try push.connect(endpoints["intake"]!)
        let pull = try context.socket(.pull)
        try pull.connect(endpoints["outcomes"]!)
        let sender = try ZMQSender(socket: push)
        let receiver = try ZMQReceiver(socket: pull)
        // A failed expectation leaves the context open: terminating it would wait for the
        // unsent orders forever.
        defer { receiver.stop() }
        for order in [
            Self.charge("ex-instant", note: "instant"), Self.charge("ex-async", note: "async"), Self.charge("ex-decline", note: "decline"),
            Self.charge("ex-polled", note: "polled"),
            Self.charge("ex-bad", note: 7), Self.charge("ex-extra", note: "instant", extra: #","tip":1"#),
        ] {
            try await sender.send(Array(order.utf8))
        }
        var outcomes: [String: [Outcome]] = [:]
        func collect(until done: ([String: [Outcome]]) -> Bool) async throws {
            let deadline = ContinuousClock.now + .seconds(20)
            while !done(outcomes), ContinuousClock.now < deadline {
                for message in try await receiver.nextBatch(timeoutMilliseconds: 200) ?? [] {
                    if let outcome = try? Outcome.parse(message.body) { outcomes[outcome.orderId, default: []].append(outcome) }
                }
            }
        }
        try await collect { outcomes in
            ["ex-instant", "ex-async", "ex-decline", "ex-bad", "ex-extra"].allSatisfy { outcomes[$0] != nil }
                && outcomes["ex-polled"]?.last?.status == .succeeded
        }
        // An at-least-once upstream sends an ended order again: the same outcome, no new request.
        try await sender.send(Array(Self.charge("ex-instant", note: "instant").utf8))
        try await collect { $0["ex-instant"]?.count == 2 }
        #expect(outcomes["ex-instant"]?.map(\.status) == [.succeeded, .succeeded])
        #expect(outcomes["ex-instant"]?.first == outcomes["ex-instant"]?.last)
        #expect(outcomes["ex-decline"]?.last?.error?.code == "EXAMPLE_DECLINED")
        #expect(outcomes["ex-bad"]?.last?.status == .rejected)
        #expect(outcomes["ex-bad"]?.last?.error?.code == "INVALID_PARAM")
        #expect(outcomes["ex-extra"]?.last?.error?.code == "UNKNOWN_FIELD")
        // The polled charge: pending, then the poller's third read finds it succeeded.
        #expect(outcomes["ex-polled"]?.map(\.status) == [.pending, .succeeded])
        #expect(outcomes["ex-polled"]?.last?.result?["chargeId"] == outcomes["ex-polled"]?.first?.result?["chargeId"])
        let pending = try #require(outcomes["ex-async"]?.last)
        #expect(pending.status == .pending)
        let chargeId = try #require(pending.result?["chargeId"]?.stringValue)

        // The webhook: a forged one changes nothing; the genuine one ends the order, once.
        let body = Array(#"{"chargeId":"\#(chargeId)","status":"succeeded"}"#.utf8)
        let callbacks = callbacksPort
        func post(signature: String) async -> (Int, String)? {
            // The example webhook route may ask the in-process emulator before it answers.
            await offCooperativeThreads {
                httpPost(port: callbacks, path: "/callbacks/example", headers: [("X-Example-Signature", signature)], body: body)
            }
        }
        let forged = await post(signature: String(repeating: "0", count: 64))
        #expect(forged?.0 == 401)
        let signature = Digest.hex(
            Array(HMAC<SHA256>.authenticationCode(for: body, using: SymmetricKey(data: Array("demo-example-webhook-secret".utf8)))))
        let genuine = await post(signature: signature)
        #expect(genuine?.0 == 200)
        #expect(genuine?.1.contains("applied") == true)
        let again = await post(signature: signature)
        #expect(again?.1.contains("duplicate") == true)
        try await collect { $0["ex-async"]?.last?.status == .succeeded }
        #expect(outcomes["ex-async"]?.last?.status == .succeeded)

        // Every charge reached the provider once and took effect once.
        for id in ["ex-instant", "ex-async", "ex-decline", "ex-polled"] {
            let key = "example:" + ExampleConnector.idempotencyKey(OrderKey(merchant: "default", orderId: id))
            #expect(sandbox.ledger.requests(key) == 1 && sandbox.ledger.effects(key) == 1, "\(id)")
        }
        for child in children.reversed() { child.signal(SIGTERM) }
        for child in children { _ = await waitForExit(child, within: .seconds(30)) }
        _ = await sender.finish(drainTimeoutMilliseconds: 200)
        receiver.stop()
        context.terminate()
    }
}

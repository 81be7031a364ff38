import Crypto
import ExampleConnector
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import PaypipeCore
import StageRuntime
import Synchronization
import Testing
import ZeroMQ

/// The made-up "example" provider through the real stage processes (`paypipe-example-stages`:
/// the standard stages with one more registry line) against a fake provider on loopback that
/// counts every request per idempotency key.
@Suite("A provider added as one connector module plus one registry line")
struct ExampleConnectorTests {
    /// Answers by the order's note: "instant" succeeds, "async" is pending until its webhook,
    /// "decline" is declined.
    final class FakeProvider: Sendable {
        let requestsPerKey = Mutex<[String: Int]>([:])
        let authorizations = Mutex<Set<String>>([])

        func run(onListening: @escaping @Sendable (Int) -> Void) async throws {
            let router = Router()
            router.post("/charges") { request, _ -> Response in
                let key = request.headers[HTTPField.Name("Idempotency-Key")!] ?? ""
                self.requestsPerKey.withLock { $0[key, default: 0] += 1 }
                self.authorizations.withLock { _ = $0.insert(request.headers[.authorization] ?? "") }
                let body = try await request.body.collect(upTo: 65536)
                let note = (try? JSONValue.parse(Array(body.readableBytesView)))?["note"]?.stringValue ?? ""
                let status = note == "instant" ? "succeeded" : note == "async" ? "pending" : "declined"
                let answer: JSONValue = ["id": .string("ch_" + key.suffix(8)), "status": .string(status)]
                return Response(status: .created, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: answer.bytes)))
            }
            let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)), onServerRunning: { onListening($0.localAddress?.port ?? 0) })
            try await app.runService()
        }
    }

    static func charge(_ id: String, note: JSONValue, extra: String = "") -> String {
        #"{"v":1,"orderId":"\#(id)","provider":"example","operation":"charge","amount":500,"currency":"EUR","params":{"note":\#(note.serialized)\#(extra)}}"#
    }

    @Test func chargesWebhooksAndRejectionsGoThroughTheRealStages() async throws {
        let provider = FakeProvider()
        let port = Mutex<Int?>(nil)
        let providerTask = Task { try await provider.run { p in port.withLock { $0 = p } } }
        defer { providerTask.cancel() }
        for _ in 0..<500 where port.withLock({ $0 }) == nil { try await Task.sleep(for: .milliseconds(10)) }
        let providerPort = try #require(port.withLock { $0 })

        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("paypipe-example-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let secretFile = directory.appendingPathComponent("webhook-secret").path
        try "whsec-example\n".write(toFile: secretFile, atomically: true, encoding: .utf8)
        let callbacksPort = try freeLoopbackPort()
        let any = "tcp://127.0.0.1:*"
        let config = """
            {"merchants": {"default": {"example": {"baseURL": "http://127.0.0.1:\(providerPort)", "apiKey": "key-example",
                                                   "webhookSecret": "file:\(secretFile)"}}},
             "endpoints": {"intake": "\(any)", "outcomes": "\(any)", "signQueue": "\(any)", "signedIn": "\(any)", "signedOut": "\(any)",
                           "results": "\(any)", "ledgerRPC": "\(any)", "pollQueue": "\(any)", "ledgerMetrics": "127.0.0.1:0",
                           "callbacks": "127.0.0.1:\(callbacksPort)"}}
            """
        let configPath = directory.appendingPathComponent("config.json").path
        try config.write(toFile: configPath, atomically: true, encoding: .utf8)

        let stages = "paypipe-example-stages"
        var children: [Process] = []
        defer { for child in children.reversed() where child.isRunning { kill(child.processIdentifier, SIGKILL) } }
        let ((ledger, _), ready) = try PipelineHarness.spawn(
            stages, ["ledger", "--config", configPath, "--store", directory.appendingPathComponent("ledger.sqlite").path],
            in: directory, index: 0, waitForLine: LedgerAddresses.readyMarker)
        children.append(ledger)
        let endpoints = LedgerAddresses.printed(in: ready ?? "")
        for (index, arguments) in [
            ["signer", "--sign-queue", endpoints["signQueue"]!, "--signed-in", endpoints["signedIn"]!, "--results", endpoints["results"]!],
            ["submitter", "--signed-out", endpoints["signedOut"]!, "--results", endpoints["results"]!, "--ledger-rpc", endpoints["ledgerRPC"]!],
        ].enumerated() {
            children.append(try PipelineHarness.spawn(stages, arguments + ["--config", configPath], in: directory, index: index + 1, waitForLine: nil).0.0)
        }
        children.append(try PipelineHarness.spawn(
            stages, ["callbacks", "--config", configPath, "--ledger-rpc", endpoints["ledgerRPC"]!], in: directory, index: 3,
            waitForLine: "paypipe-callbacks listening").0.0)

        let context = try ZMQContext()
        let push = try context.socket(.push)
        try push.connect(endpoints["intake"]!)
        let pull = try context.socket(.pull)
        try pull.connect(endpoints["outcomes"]!)
        let sender = try ZMQSender(socket: push)
        let receiver = try ZMQReceiver(socket: pull)
        defer {
            receiver.stop()
            context.terminate()
        }
        for order in [
            Self.charge("ex-instant", note: "instant"), Self.charge("ex-async", note: "async"), Self.charge("ex-decline", note: "decline"),
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
        try await collect { $0["ex-instant"] != nil && $0["ex-async"] != nil && $0["ex-decline"] != nil && $0["ex-bad"] != nil && $0["ex-extra"] != nil }
        // An at-least-once upstream sends an ended order again: the same outcome, no new request.
        try await sender.send(Array(Self.charge("ex-instant", note: "instant").utf8))
        try await collect { $0["ex-instant"]?.count == 2 }
        #expect(outcomes["ex-instant"]?.map(\.status) == [.succeeded, .succeeded])
        #expect(outcomes["ex-instant"]?.first == outcomes["ex-instant"]?.last)
        #expect(outcomes["ex-decline"]?.last?.error?.code == "EXAMPLE_DECLINED")
        #expect(outcomes["ex-bad"]?.last?.status == .rejected)
        #expect(outcomes["ex-bad"]?.last?.error?.code == "INVALID_PARAM")
        #expect(outcomes["ex-extra"]?.last?.error?.code == "UNKNOWN_FIELD")
        let pending = try #require(outcomes["ex-async"]?.last)
        #expect(pending.status == .pending)
        let chargeId = try #require(pending.result?["chargeId"]?.stringValue)

        // The webhook: a forged one changes nothing; the genuine one ends the order, once.
        let body = Array(#"{"chargeId":"\#(chargeId)","status":"succeeded"}"#.utf8)
        let forged = httpPost(port: callbacksPort, path: "/callbacks/example", headers: [("X-Example-Signature", String(repeating: "0", count: 64))], body: body)
        #expect(forged?.0 == 401)
        let signature = Digest.hex(Array(HMAC<SHA256>.authenticationCode(for: body, using: SymmetricKey(data: Array("whsec-example".utf8)))))
        let genuine = httpPost(port: callbacksPort, path: "/callbacks/example", headers: [("X-Example-Signature", signature)], body: body)
        #expect(genuine?.0 == 200)
        #expect(genuine?.1.contains("applied") == true)
        let again = httpPost(port: callbacksPort, path: "/callbacks/example", headers: [("X-Example-Signature", signature)], body: body)
        #expect(again?.1.contains("duplicate") == true)
        try await collect { $0["ex-async"]?.last?.status == .succeeded }
        #expect(outcomes["ex-async"]?.last?.status == .succeeded)

        // Every charge reached the provider once, with the key from the config.
        let counts = provider.requestsPerKey.withLock { $0 }
        #expect(counts.count == 3 && counts.values.allSatisfy { $0 == 1 })
        #expect(provider.authorizations.withLock { $0 } == ["Bearer key-example"])
        for child in children.reversed() { kill(child.processIdentifier, SIGTERM) }
        for child in children { _ = await waitForExit(child, within: .seconds(30)) }
        _ = await sender.finish(drainTimeoutMilliseconds: 200)
    }
}

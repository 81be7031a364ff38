import Connectors
import Foundation
import PaypipeCore
import Sandbox
import StageRuntime
import TestSupport
import Testing
import ZeroMQ

@testable import NetsEasyEmulation
@testable import PhonePeEmulation

/// The operators' commands (`paypipe order`, `paypipe orders`, `paypipe config check`,
/// `paypipe send`'s refusal) run as the `paypipe` executable against real stage processes.
@Suite("Operators find, explain and resolve orders")
struct OperatorCommandsTests {
    struct Run {
        var status: Int32
        var output: String
        var errors: String
    }

    static func paypipe(_ arguments: [String], environment: [String: String] = [:]) async throws -> Run {
        var inherited = ProcessInfo.processInfo.environment
        inherited["PAYPIPE_CONFIG"] = nil
        let run = try await runCapturing(
            PipelineHarness.buildDirectory().appendingPathComponent("paypipe").path, arguments, environment: inherited.merging(environment) { $1 })
        return Run(status: run.status, output: run.output, errors: run.errors)
    }

    /// An order the pipeline gave up on (PhonePe never answers in time) is listed, shown,
    /// re-checked and resolved by an operator holding a key on `curve.admins`: the resolution
    /// reaches upstream as the order's outcome, names who and why, and is in the order's audit
    /// trail. Keys not on the list, a stage's included, get no answer at all.
    @Test func anOrderInReviewIsFoundShownRecheckedAndResolvedWithTheAdminKeyOnly() async throws {
        let h = try await PipelineHarness(
            sandboxConfiguration: SandboxConfiguration(port: 0, latencyMilliseconds: 1500).with { $0.phonePe.callbackDelayMilliseconds = 3_600_000 },
            timers: ["leaseMs": 900, "httpRequestTimeoutMs": 500], curve: true, redeliverAfterMilliseconds: 700, admins: ["alice"])
        try await h.stopping { h in
            try h.startSigner()
            try h.startSubmitter()
            try await h.send(phonePeAuthInit("op-review-1", authRequestId: "ARopreview1"))
            // An order that broke a rule has ended: it cannot be resolved by hand.
            try await h.send(#"{"v":1,"orderId":"op-ended-1","provider":"phonepe","operation":"authInit","amount":-5,"currency":"INR","params":{}}"#)
            _ = try await h.collect(timeout: .seconds(60)) { (outcomes: [Outcome]) -> Bool in
                let review = outcomes.contains { (o: Outcome) in o.orderId == "op-review-1" && o.error?.code == "NEEDS_REVIEW" }
                return review && outcomes.contains { (o: Outcome) in o.orderId == "op-ended-1" }
            }
            let admin = h.ledgerEndpoints["admin"]!
            let asAlice = ["--admin", admin, "--config", h.configPath, "--admin-key", h.adminKeyPath("alice")]

            let listed = try await Self.paypipe(["orders", "list", "--review", "--json"] + asAlice)
            #expect(listed.status == 0, "\(listed.errors)")
            let rows = listed.output.split(separator: "\n").compactMap { try? JSONValue.parse(Array($0.utf8)) }
            #expect(rows.map { $0["orderId"]?.stringValue } == ["op-review-1"], "\(listed.output)")
            #expect(rows.first?["code"]?.stringValue == "NEEDS_REVIEW")
            let table = try await Self.paypipe(["orders", "list", "--older-than", "0s"] + asAlice)
            #expect(table.output.contains("default/op-review-1") && table.output.contains("default/op-ended-1"), "\(table.output)")

            // A re-check sends the provider's status call now.
            let before = h.sandbox.ledger.total
            let recheck = try await Self.paypipe(["order", "recheck", "default/op-review-1"] + asAlice)
            #expect(recheck.status == 0 && recheck.output.contains(#""state":"review""#), "\(recheck.output) \(recheck.errors)")
            for _ in 0..<100 where h.sandbox.ledger.total == before { try await Task.sleep(for: .milliseconds(100)) }
            #expect(h.sandbox.ledger.total > before, "the status call reached the provider")

            let refused = try await Self.paypipe(
                ["order", "resolve", "op-ended-1", "--status", "failed", "--reason", "x", "--by", "alice"] + asAlice)
            #expect(refused.status != 0 && refused.errors.contains("is terminal, not in review"), "\(refused.errors)")

            let resolved = try await Self.paypipe(
                [
                    "order", "resolve", "op-review-1", "--status", "failed", "--reason", "PhonePe support: the mandate was never created", "--by",
                    "Alice Ops",
                ]
                    + asAlice)
            #expect(resolved.status == 0, "\(resolved.errors)")
            let upstream = try await h.collect(timeout: .seconds(20)) { outcomes in
                outcomes.contains { $0.orderId == "op-review-1" && $0.status == .failed }
            }
            let outcome = try #require(upstream.last { $0.orderId == "op-review-1" })
            #expect(outcome.status == .failed && outcome.error?.code == "RESOLVED_BY_OPERATOR")
            #expect(outcome.error?.message == "PhonePe support: the mandate was never created")
            let again = try await Self.paypipe(
                ["order", "resolve", "op-review-1", "--status", "succeeded", "--reason", "y", "--by", "bob"] + asAlice)
            #expect(again.status != 0, "a resolved order is resolved once")

            let shown = try await Self.paypipe(["order", "show", "op-review-1", "--json"] + asAlice)
            let story = try JSONValue.parse(Array(shown.output.utf8))
            #expect(story["state"]?.stringValue == "terminal" && story["provider"]?.stringValue == "phonepe")
            let audit = story["audit"]?.arrayValue ?? []
            #expect(audit.map { $0["action"]?.stringValue } == ["recheck", "resolve"], "\(shown.output)")
            #expect(audit.last?["by"]?.stringValue == "Alice Ops" && audit.last?["operatorKey"]?.stringValue == "alice")
            #expect(audit.last?["reason"]?.stringValue == "PhonePe support: the mandate was never created")
            let logged = story["outcomes"]?.arrayValue ?? []
            #expect(logged.first?["outcome"]?["error"]?["code"]?.stringValue == "OUTCOME_UNKNOWN" || logged.count >= 2)
            let last = try #require(logged.last)
            #expect(last["outcome"]?["resolution"]?["by"]?.stringValue == "Alice Ops" && last["seq"]?.integerValue != nil)
            #expect(story["order"]?["params"]?["authRequestId"]?.stringValue == "ARopreview1")
            let text = try await Self.paypipe(["order", "show", "default/op-review-1"] + asAlice)
            #expect(text.output.contains("resolve by Alice Ops (key alice)"), "\(text.output)")

            // No key, or a key that is not an operator's (here the signer's own), gets no answer.
            let signerKey = h.directory.appendingPathComponent("signer-as-admin").path
            try PipelineHarness.writeKeyPair(h.curveKeys[.signer]!, at: signerKey)
            let asSigner = try await Self.paypipe(["orders", "list", "--admin", admin, "--config", h.configPath, "--admin-key", signerKey])
            #expect(asSigner.status != 0 && asSigner.errors.contains("no answer"), "\(asSigner.errors)")
            let context = try ZMQContext()
            let plaintext = try AdminClient(context: context, endpoint: admin)
            await #expect(throws: AdminClient.Failure.self) { _ = try await plaintext.ask(.list(.init()), timeoutMilliseconds: 1500) }
            await plaintext.close()
            context.terminate()
            let noKey = try await Self.paypipe(["orders", "list", "--admin", admin, "--config", h.configPath])
            #expect(noKey.status != 0 && noKey.errors.contains("--admin-key"))
        }
    }

    /// An operator outside the fleet (through `kubectl port-forward`) has no config naming its
    /// merchants and files: the ledger's public key file and the operator's key pair reach the
    /// admin endpoint; a key not on `curve.admins` still gets no answer.
    @Test func anOperatorOutsideTheFleetNeedsOnlyTheLedgersPublicKey() async throws {
        let h = try await PipelineHarness(curve: true, admins: ["alice"])
        try await h.stopping { h in
            let admin = h.ledgerEndpoints["admin"]!
            let ledgerPublic = h.directory.appendingPathComponent("ledger-only.public").path
            try (h.curveKeys[.ledger]!.publicKey + "\n").write(toFile: ledgerPublic, atomically: true, encoding: .utf8)
            let listed = try await Self.paypipe(
                [
                    "orders", "list", "--review", "--json", "--admin", admin, "--ledger-public-key", ledgerPublic, "--admin-key",
                    h.adminKeyPath("alice"),
                ])
            #expect(listed.status == 0 && listed.errors.isEmpty, "\(listed.errors)")

            let signerKey = h.directory.appendingPathComponent("signer-as-admin").path
            try PipelineHarness.writeKeyPair(h.curveKeys[.signer]!, at: signerKey)
            let asSigner = try await Self.paypipe(
                ["orders", "list", "--admin", admin, "--ledger-public-key", ledgerPublic, "--admin-key", signerKey])
            #expect(asSigner.status != 0 && asSigner.errors.contains("no answer"), "\(asSigner.errors)")
            let withoutKey = try await Self.paypipe(["orders", "list", "--admin", admin, "--ledger-public-key", ledgerPublic])
            #expect(withoutKey.status != 0 && withoutKey.errors.contains("--ledger-public-key goes with --admin-key"), "\(withoutKey.errors)")
        }
    }

    /// `paypipe config check` reports every error of a config in one run, naming each path and
    /// rule, and exits 1; a good config passes.
    @Test func configCheckReportsEveryErrorInOneRun() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("paypipe-config-check-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        guard case .object(var document) = try JSONValue.parse(Array(DemoConfig.text(sandboxURL: "http://127.0.0.1:9100").utf8)) else {
            throw HarnessError("the demo config is an object")
        }
        let good = directory.appendingPathComponent("good.json").path
        try JSONValue.object(document).serialized.write(toFile: good, atomically: true, encoding: .utf8)
        let passed = try await Self.paypipe(["config", "check", good])
        #expect(passed.status == 0 && passed.output.contains("ok"), "\(passed.output) \(passed.errors)")

        document["endpoints"] = ["intake": 5, "outcomes": "tcp://127.0.0.1:5559", "bogus": "x"]
        document["timers"] = ["httpRequestTimeoutMs": -1]
        document["retention"] = ["ordersDays": "seven"]
        let bad = directory.appendingPathComponent("bad.json").path
        try JSONValue.object(document).serialized.write(toFile: bad, atomically: true, encoding: .utf8)
        let failed = try await Self.paypipe(["config", "check", bad])
        #expect(failed.status == 1)
        let lines = failed.output.split(separator: "\n").map(String.init)
        for path in ["endpoints.intake", "endpoints.bogus", "timers.httpRequestTimeoutMs", "retention.ordersDays"] {
            #expect(lines.contains { $0.contains(": \(path): ") }, "\(path) in \(failed.output)")
        }
    }

    /// `paypipe send` reads the live outcomes socket: with a config that names real provider
    /// hosts it refuses to start unless told.
    @Test func sendRefusesAProductionConfigUnlessTold() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("paypipe-send-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let production = directory.appendingPathComponent("production.json").path
        try DemoConfig.text(sandboxURL: "https://api.nets.eu").write(toFile: production, atomically: true, encoding: .utf8)
        let orders = directory.appendingPathComponent("orders.jsonl").path
        try "".write(toFile: orders, atomically: true, encoding: .utf8)
        let refused = try await Self.paypipe(["send", orders, "--config", production, "--timeout", "1"])
        #expect(refused.status != 0 && refused.errors.contains("api.nets.eu") && refused.errors.contains("--allow-production"), "\(refused.errors)")
        let sandbox = directory.appendingPathComponent("sandbox.json").path
        try DemoConfig.text(sandboxURL: "http://127.0.0.1:9").write(toFile: sandbox, atomically: true, encoding: .utf8)
        let allowed = try await Self.paypipe(
            ["send", orders, "--config", sandbox, "--timeout", "1", "--intake", "tcp://127.0.0.1:9", "--outcomes", "tcp://127.0.0.1:9"])
        #expect(!allowed.errors.contains("--allow-production"), "\(allowed.errors)")
    }
}

/// `--log-format json`: every line a stage writes is one JSON object with time, level, stage and
/// event, and the ledger writes one info line per order transition with the order's identity,
/// never a secret.
@Suite("JSON logs through real processes")
struct JSONLogTests {
    @Test func theLedgerLogsEachTransitionAsOneJSONLine() async throws {
        let h = try await PipelineHarness(ledgerLogFormat: "json")
        try await h.stopping { h in
            try h.startSigner()
            try h.startSubmitter()
            try await h.send(phonePeAuthInit("log-1", authRequestId: "ARlog1"))
            try await h.send(#"{"v":1,"orderId":"log-2","provider":"phonepe","operation":"authInit","amount":-5,"currency":"INR","params":{}}"#)
            _ = try await h.collect(timeout: .seconds(30)) { outcomes in
                outcomes.contains { $0.orderId == "log-1" && $0.status == .pending } && outcomes.contains { $0.orderId == "log-2" }
            }
            try await Task.sleep(for: .milliseconds(300))
            let lines = h.stderr(of: 0).split(separator: "\n").filter { !$0.isEmpty }
            #expect(!lines.isEmpty)
            let records = lines.compactMap { try? JSONValue.parse(Array($0.utf8)) }
            #expect(records.count == lines.count, "every line is JSON: \(lines.prefix(3))")
            for record in records {
                #expect(record["time"]?.stringValue != nil && record["level"]?.stringValue != nil && record["event"]?.stringValue != nil)
                #expect(record["stage"]?.stringValue?.hasPrefix("paypipe-ledger") == true)
            }
            func event(_ name: String, _ orderId: String) -> JSONValue? {
                records.first { $0["event"]?.stringValue == name && $0["orderId"]?.stringValue == orderId }
            }
            let accepted = try #require(event("order.accepted", "log-1"), "\(lines)")
            #expect(accepted["generation"]?.stringValue == "1" && accepted["provider"]?.stringValue == "phonepe")
            #expect(accepted["operation"]?.stringValue == "authInit" && accepted["merchant"]?.stringValue == "default" && accepted["level"] == "info")
            #expect(event("order.pending", "log-1")?["seq"]?.stringValue != nil)
            #expect(event("order.rejected", "log-2")?["code"]?.stringValue != nil)
            let text = h.stderr(of: 0)
            for secret in ["demo-salt-099eb0cd", "demo-nets-secret-key", "demoWebhookAuth123"] { #expect(!text.contains(secret)) }
        }
    }
}

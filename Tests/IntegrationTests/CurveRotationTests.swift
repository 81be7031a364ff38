import Foundation
import PaypipeCore
import StageRuntime
import StageWire
import Supervision
import TestSupport
import Testing
import ZeroMQ

/// Replacing a role's CURVE key pair while orders flow (docs/security.md, "Rotating a key"):
/// each step restarts one kind of process, as a rolling update does, and no order is lost,
/// doubled or stuck at any step.
@Suite("CURVE key rotation through real processes", .serialized)
struct CurveRotationTests {
    /// Orders that go through the signer, the submitter and the provider, and end succeeded.
    static func order(_ id: String) -> String {
        #"{"v":1,"orderId":"\#(id)","provider":"trustpayments","operation":"transactionQuery","params":{"transactionReference":"56-9-1234"}}"#
    }

    /// Sends `count` orders and waits until each has ended; `seen` gathers every outcome.
    static func flow(_ h: PipelineHarness, _ step: String, count: Int = 6, seen: inout [Outcome]) async throws {
        let ids = (1...count).map { "\(step)-\($0)" }
        for id in ids { try await h.send(order(id)) }
        let outcomes = try await h.collect(timeout: .seconds(30)) { got in Set(got.map(\.orderId)).isSuperset(of: ids) }
        seen += outcomes
        for id in ids {
            #expect(outcomes.first { $0.orderId == id }?.status == .succeeded, "\(id) did not end during \(step)")
        }
    }

    /// Each order of every step ended exactly once, also those of the steps before.
    static func endedOnce(_ h: PipelineHarness, _ seen: [Outcome]) async throws {
        let all = seen + (try await h.collect(timeout: .seconds(1)) { _ in false })
        let counts = Dictionary(all.map { ($0.orderId, 1) }, uniquingKeysWith: +)
        #expect(counts.values.allSatisfy { $0 == 1 }, "\(counts.filter { $0.value != 1 })")
    }

    /// `h`'s config with `change` made to its `curve` section, written to `path`.
    static func writeConfig(_ h: PipelineHarness, to path: String, _ change: (inout [String: JSONValue]) throws -> Void) throws {
        let text = try String(contentsOfFile: h.configPath, encoding: .utf8)
        guard case .object(var document) = try JSONValue.parse(Array(text.utf8)), var curve = document["curve"]?.objectValue else {
            throw HarnessError("no curve section")
        }
        try change(&curve)
        document["curve"] = .object(curve)
        try JSONValue.object(document).serialized.write(toFile: path, atomically: true, encoding: .utf8)
    }

    /// Sets `role`'s entry: its public key, the next one (nil: none) and its secret key file.
    static func set(_ curve: inout [String: JSONValue], _ role: CurveConfig.Role, publicKey: String, next: String?, secretFile: String) {
        var entry: [String: JSONValue] = ["publicKey": .string(publicKey), "secretKey": .string("file:" + secretFile)]
        if let next { entry["nextPublicKey"] = .string(next) }
        curve[role.rawValue] = .object(entry)
    }

    static func secretFile(_ h: PipelineHarness, _ name: String, _ pair: ZMQCurveKeyPair) throws -> String {
        let path = h.directory.appendingPathComponent("\(name).secret").path
        try (pair.secretKey + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
        return path
    }

    /// Stops a process as a rolling update does (SIGTERM) and waits for it to end.
    static func stop(_ process: ChildProcess) async {
        process.signal(SIGTERM)
        #expect(await eventually(within: .seconds(20)) { !process.isRunning })
    }

    /// The ledger, restarted on the harness's config file as it now reads.
    static func rollLedger(_ h: PipelineHarness) async throws {
        await stop(h.ledgerProcess)
        try await h.restartLedger()
    }

    static func startSigner(_ h: PipelineHarness, config: String) throws -> ChildProcess {
        let e = h.ledgerEndpoints
        return try h.spawn(
            "paypipe-signer", ["--config", config, "--sign-queue", e["signQueue"]!, "--signed-in", e["signedIn"]!, "--results", e["results"]!],
            waitForLine: nil
        ).0
    }

    static func startSubmitter(_ h: PipelineHarness, config: String) throws -> ChildProcess {
        let e = h.ledgerEndpoints
        return try h.spawn(
            "paypipe-submitter",
            ["--config", config, "--signed-out", e["signedOut"]!, "--results", e["results"]!, "--ledger-rpc", e["ledgerRPC"]!],
            waitForLine: nil
        ).0
    }

    /// Whether a PUSH to the results link holding `client` and expecting `server` completes
    /// its handshake (and so could send) within a short deadline.
    static func handshakes(_ h: PipelineHarness, client: ZMQCurveKeyPair, server: String) async throws -> Bool {
        let context = try ZMQContext()
        var options = stageOptions()
        options.lingerMilliseconds = 0
        options.curve = .client(serverPublicKey: server, publicKey: client.publicKey, secretKey: client.secretKey)
        let push = try context.socket(.push, options: options)
        try push.connect(h.ledgerEndpoints["results"]!)
        let completed = await eventually(within: .seconds(2)) { push.canSend }
        push.close()
        context.terminate()
        return completed
    }

    /// A client role's key (the signer's): the ledger admits both pairs during the window, the
    /// signers move to the new pair one by one, and afterwards the old pair is refused.
    @Test func aSignerKeyIsReplacedWhileOrdersFlow() async throws {
        let h = try await PipelineHarness(curve: true)
        defer { Task { await h.shutdown() } }
        var seen: [Outcome] = []
        let old = try #require(h.curveKeys[.signer])
        let oldSecret = h.directory.appendingPathComponent("signer.secret").path
        let oldSigner = try h.startSigner()
        try h.startSubmitter()
        try await Self.flow(h, "before", seen: &seen)

        // The window opens: the ledger admits the next key too.
        let new = try ZMQCurveKeyPair.generate()
        let newSecret = try Self.secretFile(h, "signer.next", new)
        try Self.writeConfig(h, to: h.configPath) { Self.set(&$0, .signer, publicKey: old.publicKey, next: new.publicKey, secretFile: oldSecret) }
        try await Self.rollLedger(h)
        try await Self.flow(h, "window-old-signer", seen: &seen)

        // The signers switch to the new pair one by one: both kinds serve side by side, then
        // only the new one.
        let newConfig = h.directory.appendingPathComponent("config-signer-new.json").path
        try Self.writeConfig(h, to: newConfig) { Self.set(&$0, .signer, publicKey: old.publicKey, next: new.publicKey, secretFile: newSecret) }
        let newSigner = try Self.startSigner(h, config: newConfig)
        try await Self.flow(h, "window-both-signers", count: 12, seen: &seen)
        await Self.stop(oldSigner)
        try await Self.flow(h, "window-new-signer", seen: &seen)

        // The window closes: the new key is the only one.
        try Self.writeConfig(h, to: h.configPath) { Self.set(&$0, .signer, publicKey: new.publicKey, next: nil, secretFile: newSecret) }
        try await Self.rollLedger(h)
        try await Self.flow(h, "after", seen: &seen)
        let ledgerKey = try #require(h.curveKeys[.ledger]).publicKey
        #expect(try await Self.handshakes(h, client: new, server: ledgerKey))
        #expect(try await !Self.handshakes(h, client: old, server: ledgerKey), "the old signer key was still admitted")
        #expect(newSigner.isRunning)
        try await Self.endedOnce(h, seen)
        await h.shutdown()
    }

    /// The ledger's key, which every client holds: the clients learn the next key first and
    /// then reach a ledger holding either; the ledger moves to the new pair; the clients drop
    /// the old key.
    @Test func theLedgerKeyIsReplacedWhileOrdersFlow() async throws {
        let h = try await PipelineHarness(curve: true)
        defer { Task { await h.shutdown() } }
        var seen: [Outcome] = []
        let old = try #require(h.curveKeys[.ledger])
        let oldSecret = h.directory.appendingPathComponent("ledger.secret").path
        let oldOnlySigner = try h.startSigner()
        let oldOnlySubmitter = try h.startSubmitter()
        try await Self.flow(h, "before", seen: &seen)

        // The window opens: the clients, one by one, learn the next key; an old-only client
        // still serves beside them.
        let new = try ZMQCurveKeyPair.generate()
        let newSecret = try Self.secretFile(h, "ledger.next", new)
        try Self.writeConfig(h, to: h.configPath) { Self.set(&$0, .ledger, publicKey: old.publicKey, next: new.publicKey, secretFile: oldSecret) }
        let bothSigner = try h.startSigner()
        let bothSubmitter = try h.startSubmitter()
        try await Self.flow(h, "window-both-kinds", count: 12, seen: &seen)
        await Self.stop(oldOnlySigner)
        await Self.stop(oldOnlySubmitter)
        try await Self.flow(h, "window-clients-rolled", seen: &seen)

        // The ledger moves to the new pair: the clients' connections expecting it complete.
        try Self.writeConfig(h, to: h.configPath) { Self.set(&$0, .ledger, publicKey: old.publicKey, next: new.publicKey, secretFile: newSecret) }
        try await Self.rollLedger(h)
        try await Self.flow(h, "window-ledger-rolled", seen: &seen)

        // The window closes: the clients hold only the new key, and new-only clients serve.
        try Self.writeConfig(h, to: h.configPath) { Self.set(&$0, .ledger, publicKey: new.publicKey, next: nil, secretFile: newSecret) }
        let newOnlySigner = try h.startSigner()
        let newOnlySubmitter = try h.startSubmitter()
        await Self.stop(bothSigner)
        await Self.stop(bothSubmitter)
        try await Self.flow(h, "after", seen: &seen)
        let submitter = try #require(h.curveKeys[.submitter])
        #expect(try await Self.handshakes(h, client: submitter, server: new.publicKey))
        #expect(try await !Self.handshakes(h, client: submitter, server: old.publicKey), "the old ledger key still completed a handshake")
        #expect(newOnlySigner.isRunning && newOnlySubmitter.isRunning)
        try await Self.endedOnce(h, seen)
        await h.shutdown()
    }

    /// A secret key that is neither of the role's public keys stops the process at start,
    /// naming the key and never printing it.
    @Test func aSecretKeyOfNeitherPublicKeyIsRefusedAtStart() async throws {
        let h = try await PipelineHarness(curve: true)
        defer { Task { await h.shutdown() } }
        let stranger = try ZMQCurveKeyPair.generate()
        let strangerSecret = try Self.secretFile(h, "stranger", stranger)
        let config = h.directory.appendingPathComponent("config-stranger.json").path
        let signer = try #require(h.curveKeys[.signer])
        try Self.writeConfig(h, to: config) { Self.set(&$0, .signer, publicKey: signer.publicKey, next: nil, secretFile: strangerSecret) }
        let process = try Self.startSigner(h, config: config)
        #expect(await waitForExit(process, within: .seconds(20)))
        #expect(process.exitStatus != 0)
        let index = try #require(h.index(of: process))
        let log = h.stderr(of: index)
        #expect(log.contains("curve.signer.secretKey: is the secret half of neither curve.signer.publicKey nor its nextPublicKey"), "\(log)")
        #expect(!log.contains(stranger.secretKey))
        await h.shutdown()
    }
}

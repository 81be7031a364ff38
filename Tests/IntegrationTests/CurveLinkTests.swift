import Foundation
import PaypipeCore
import Sandbox
import StageRuntime
import StageWire
import Supervision
import TestSupport
import Testing
import ZeroMQ

@testable import NetsEasyEmulation
@testable import PhonePeEmulation

/// CURVE with an allow-list on every internal link, through the real processes.
@Suite("CURVE on the internal links through real processes", .serialized)
struct CurveLinkTests {
    static func phonePeOrder(_ id: String) -> String {
        #"{"v":1,"orderId":"\#(id)","provider":"phonepe","operation":"authInit","amount":39900,"currency":"INR","params":{"merchantUserId":"U-\#(id)","subscriptionId":"SUB-\#(id)"}}"#
    }

    static func outcome(_ h: PipelineHarness, _ orderId: String, _ status: Outcome.Status, timeout: Duration = .seconds(20)) async throws -> Outcome?
    {
        try await h.collect(timeout: timeout) { $0.contains { $0.orderId == orderId && $0.status == status } }
            .first { $0.orderId == orderId && $0.status == status }
    }

    /// Client options carrying `pair` as a role's key (nil: no CURVE at all).
    static func options(_ h: PipelineHarness, _ pair: ZMQCurveKeyPair?) -> ZMQSocketOptions {
        var options = stageOptions()
        if let pair {
            options.curve = .client(serverPublicKey: h.curveKeys[.ledger]!.publicKey, publicKey: pair.publicKey, secretKey: pair.secretKey)
        }
        return options
    }

    /// One settle on ledgerRPC as the holder of `pair`: the reply, or the reason there was none.
    static func settle(_ h: PipelineHarness, as pair: ZMQCurveKeyPair?, _ outcome: Outcome) async throws -> Result<LedgerReply, LedgerUnavailable> {
        let context = try ZMQContext()
        let client = try LedgerClient(
            context: context, endpoint: h.ledgerEndpoints["ledgerRPC"]!, options: options(h, pair), timeoutMilliseconds: 1500)
        let result: Result<LedgerReply, LedgerUnavailable>
        do {
            result = .success(
                try await client.call(.settle(OrderKey(merchant: outcome.merchant, orderId: outcome.orderId), event: nil, outcome: outcome)))
        } catch {
            result = .failure(error)
        }
        await client.close()
        context.terminate()
        return result
    }

    @Test func everyProviderStillEndsInTheRightOutcomeWithCurveOn() async throws {
        let h = try await PipelineHarness(
            sandboxConfiguration: SandboxConfiguration(port: 0).with {
                $0.phonePe.callbackDelayMilliseconds = 3_600_000
                $0.nets.completeCheckoutAfterMilliseconds = 300
            },
            curve: true)
        defer { Task { await h.shutdown() } }
        try h.startSigner()
        try h.startSubmitter()
        try h.startCallbacks()
        let poller = try h.startPoller()
        let lines = try String(contentsOfFile: examplesPath(), encoding: .utf8).split(separator: "\n").map(String.init)
        for line in lines { try await h.send(line) }
        let outcomes = try await h.collect { $0.count >= lines.count }
        let byId = Dictionary(outcomes.map { ($0.orderId, $0) }, uniquingKeysWith: { first, _ in first })
        let expected: [String: Outcome.Status] = [
            "demo-tp-query-1": .succeeded, "demo-tp-update-1": .succeeded, "demo-nets-get-1": .failed,
            "demo-phonepe-1": .pending, "demo-cleeng-1": .pending, "demo-rejected-1": .rejected,
        ]
        for (id, status) in expected {
            #expect(byId[id]?.status == status, "\(id): \(byId[id].map { "\($0.status) \($0.error?.code ?? "")" } ?? "no outcome")")
        }
        // The sandbox completes the Nets checkout and sends its webhook: the callback validator
        // looks the order up and settles it over the CURVE link.
        #expect(try await Self.outcome(h, "demo-nets-create-1", .succeeded) != nil)
        // The poller asked for pending receipts over ledgerRPC (its role may).
        let pollerIndex = try #require(h.index(of: poller))
        #expect(h.stderr(of: pollerIndex).contains("asked the ledger for pending receipts"))
        #expect(h.stderr(of: 0).contains("curve=true"))
        await h.shutdown()
    }

    @Test func onlyTheCallbackValidatorsKeyMaySettle() async throws {
        let h = try await PipelineHarness(curve: true)
        defer { Task { await h.shutdown() } }
        try h.startSigner()
        try h.startSubmitter()
        try await h.send(Self.phonePeOrder("curve-forge-1"))
        let pending = try #require(try await Self.outcome(h, "curve-forge-1", .pending))
        let forged = Outcome(
            orderId: pending.orderId, merchant: pending.merchant, provider: pending.provider, operation: pending.operation,
            status: .succeeded, result: ["forged": true])

        // No key: the handshake fails, so the request is never read.
        guard case .failure(let plain) = try await Self.settle(h, as: nil, forged) else {
            Issue.record("a plaintext settle was answered")
            return
        }
        #expect(plain.description.contains("did not answer"))
        // A key that knows the ledger's public key but is not on the allow-list.
        guard case .failure(let stranger) = try await Self.settle(h, as: try ZMQCurveKeyPair.generate(), forged) else {
            Issue.record("an unlisted key's settle was answered")
            return
        }
        #expect(stranger.description.contains("did not answer"))
        // A listed key whose role may not connect to ledgerRPC at all.
        guard case .failure(let signer) = try await Self.settle(h, as: h.curveKeys[.signer], forged) else {
            Issue.record("the signer key's settle was answered")
            return
        }
        #expect(signer.description.contains("did not answer"))
        // The poller may connect (for resumePolls) and is refused explicitly.
        guard case .failure(let poller) = try await Self.settle(h, as: h.curveKeys[.poller], forged) else {
            Issue.record("the poller key's settle was applied")
            return
        }
        #expect(poller.description.contains("forbidden: the poller role may not settle"))
        #expect(try await h.collect(timeout: .seconds(1)) { _ in false }.filter { $0.orderId == "curve-forge-1" }.isEmpty)

        // The callback validator's key settles (this is how a verified callback arrives).
        let accepted = try await Self.settle(h, as: h.curveKeys[.callbacks], forged)
        guard case .success(let reply) = accepted else {
            Issue.record("the callback validator's settle failed: \(accepted)")
            return
        }
        #expect(reply == .settled(applied: true, duplicate: false))
        #expect(try await Self.outcome(h, "curve-forge-1", .succeeded) != nil)
        await h.shutdown()
    }

    @Test func theSignedWorkQueueDeliversOnlyToTheSubmittersKey() async throws {
        let h = try await PipelineHarness(curve: true)
        defer { Task { await h.shutdown() } }
        try h.startSigner()
        let context = try ZMQContext()
        // Would-be readers of signed requests: no key, and the signer's (listed, wrong role).
        var readers: [ZMQReceiver] = []
        for pair in [nil, h.curveKeys[.signer]] {
            let pull = try context.socket(.pull, options: Self.options(h, pair))
            try pull.connect(h.ledgerEndpoints["signedOut"]!)
            readers.append(try ZMQReceiver(socket: pull))
        }
        try await h.send(
            #"{"v":1,"orderId":"curve-read-1","provider":"nets","operation":"getSubscription","params":{"paymentId":"0123456789abcdef0123456789abcdef"}}"#
        )
        for reader in readers {
            #expect(try await reader.nextBatch(timeoutMilliseconds: 2000)?.isEmpty ?? true)
        }
        // The submitter's key gets the signed request.
        let pull = try context.socket(.pull, options: Self.options(h, h.curveKeys[.submitter]))
        try pull.connect(h.ledgerEndpoints["signedOut"]!)
        let submitter = try ZMQReceiver(socket: pull)
        let work = try await submitter.nextBatch(timeoutMilliseconds: 10_000) ?? []
        #expect(work.count == 1)
        for reader in readers + [submitter] {
            reader.stop()
            await reader.waitUntilClosed()
        }
        context.terminate()
        await h.shutdown()
    }

    static let captureTool = ["/usr/bin/tcpdump", "/usr/sbin/tcpdump"].first { FileManager.default.isExecutableFile(atPath: $0) }

    /// tcpdump on lo while orders whose signed requests carry provider credentials cross the
    /// internal links: with CURVE no credential shows up; without it (the control) they do.
    @Test(
        .enabled(
            if: captureTool != nil && geteuid() == 0,
            "needs tcpdump (apt-get install -y tcpdump) and root to capture on lo; CurveAuthenticatorTests checks the bytes through a recording proxy instead"
        ),
        arguments: [true, false])
    func aLoopbackCaptureOfTheInternalLinksShowsNoCredential(curve: Bool) async throws {
        let h = try await PipelineHarness(curve: curve)
        defer { Task { await h.shutdown() } }
        let ports = ["signQueue", "signedIn", "signedOut", "results", "ledgerRPC", "pollQueue"].compactMap {
            h.ledgerEndpoints[$0]?.split(separator: ":").last
        }
        let capture = h.directory.appendingPathComponent("lo.pcap").path
        // Immediate mode: each packet is written as it arrives, not when the kernel's buffer block
        // times out, so the SIGTERM that ends the capture leaves nothing unread.
        let tcpdump = try ChildProcess(
            [
                Self.captureTool!, "-i", "lo", "--immediate-mode", "-U", "-w", capture,
                "tcp and (" + ports.map { "port \($0)" }.joined(separator: " or ") + ")",
            ],
            stdout: .readyLine(), stderr: .standardOutput, readyMarker: "listening on")
        let listening = await tcpdump.waitForLine(within: .seconds(10))
        try #require(listening != .timedOut && listening != .ended, "tcpdump: \(tcpdump.printed)")
        try h.startSigner()
        try h.startSubmitter()
        let lines = try String(contentsOfFile: examplesPath(), encoding: .utf8).split(separator: "\n").map(String.init)
        for line in lines { try await h.send(line) }
        let outcomes = try await h.collect { $0.count >= lines.count }
        #expect(outcomes.count >= lines.count)
        // tcpdump has written what crossed the links once its capture stops growing.
        var size = -1
        _ = await eventually(within: .seconds(5)) {
            let now = (try? FileManager.default.attributesOfItem(atPath: capture)[.size] as? Int) ?? 0
            defer { size = now }
            return now > 0 && now == size
        }
        await tcpdump.stop(grace: .seconds(5))

        let text = try await runCapturing(Self.captureTool!, ["-A", "-n", "-r", capture]).output
        await h.shutdown()  // after reading: it removes the directory holding the capture
        #expect(text.count > 1000, "the capture is nearly empty")
        let credentials = ["demo-nets-secret-key", Data("ws@example.com:demo-ws-password".utf8).base64EncodedString()]
        for credential in credentials {
            #expect(
                text.contains(credential) == !curve,
                "curve \(curve): \(credential.prefix(8))… \(text.contains(credential) ? "was" : "was not") on the wire")
        }
    }
}

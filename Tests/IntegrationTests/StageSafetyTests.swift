import Connectors
import Foundation
import HTTPTransport
import Hummingbird
import Logging
import PaypipeCore
import ServiceLifecycle
import SignerStage
import StageRuntime
import StageWire
import Supervision
import Synchronization
import TestSupport
import Testing

@testable import LedgerStage
@testable import SubmitterStage

/// The stages' smaller safety rules, each through the code that enforces it.
@Suite("Stage safety: lost leases, unreadable work, file modes, slow clients")
struct StageSafetyTests {
    /// Work whose lease is lost (a renewal refused: the order ended elsewhere, or went to
    /// another submitter) sends nothing more: the retry that was due never leaves, and the work
    /// ends with no outcome of its own.
    @Test func workWhoseLeaseIsLostSendsNothingMore() async throws {
        let answers = Mutex(0)
        let window = LeaseWindow(requestTimeoutMilliseconds: 1000)
        let lost = Mutex<LeaseClaim?>(nil)
        let server = try ScriptedHTTPServer { _ in
            answers.withLock { $0 += 1 }
            // The renewal is refused while the provider answers: the retry it leads to is due later.
            if let claim = lost.withLock({ $0 }) { window.drop([claim]) }
            return .bytes(ScriptedHTTPServer.response(503, body: "busy"), thenClose: false)
        }
        defer { server.stop() }
        let config = try PaypipeConfig.parse(Array(DemoConfig.text(sandboxURL: "http://127.0.0.1:\(server.port)").utf8))
        guard case .submit(let work) = SignerCore(registry: await testRegistry(config)).sign(try order(netsChargeOrder), acceptedAt: 1, nowSeconds: 1)
        else {
            Issue.record("the charge is signed into work")
            return
        }
        let lease = try #require(work.lease)
        window.hold([lease], until: steadyMilliseconds() + 60_000)
        lost.withLock { $0 = lease }
        var policy = SubmissionPolicy()
        policy.baseBackoffMilliseconds = 300
        let http = ProviderHTTPClient(connectTimeoutMilliseconds: 5000, requestTimeoutMilliseconds: 5000)
        let finished = Mutex<[SubmissionRunner.Finished]>([])
        let runner = SubmissionRunner(
            concurrency: 1, registry: await testRegistry(config), policy: policy, http: http, leases: window,
            onFinish: { done in finished.withLock { $0.append(done) } })
        runner.start([work])
        #expect(await eventually(within: .seconds(20)) { finished.withLock { $0.count } == 1 })
        // The product's own timer is under test: a retry the lost lease cancelled would have left
        // within its back-off (300 ms, doubled) by now.
        try await Task.sleep(for: .milliseconds(800))
        #expect(answers.withLock { $0 } == 1, "a request left after the lease was lost")
        #expect(finished.withLock { $0.first?.outcome } == nil)
        await http.shutdown()
    }

    /// A renewal the ledger refuses takes the lease out of the window the sends check; a grant
    /// holds from when the claim was first sent, for a lease.
    @Test func aRefusedRenewalClosesTheWindow() throws {
        let window = LeaseWindow(requestTimeoutMilliseconds: 1000, now: { 0 })
        var book = LeaseBook(leaseMilliseconds: 3000, now: 0, window: window)
        let work = try SubmitWork(order: order(netsChargeOrder), request: HTTPRequestSpec(method: .GET, url: "http://x/"), acceptedAt: 1, token: 7)
        let (_, requests) = book.claim([work], now: 0)
        _ = book.reply([requests[0].frames[0], LedgerReply.claimed([true]).json.bytes])
        #expect(window.allowsSend(work))
        let renewal = try #require(book.tick(now: 1000).send.first)
        let (_, lost) = book.reply([renewal.frames[0], LedgerReply.claimed([false]).json.bytes])
        #expect(lost == [work.lease!])
        #expect(!window.allowsSend(work))
        // A status check sends only a read and needs no lease.
        var check = work
        check.purpose = .statusCheck
        #expect(window.allowsSend(check))
        // Near the end of a grant, no whole request fits: no send.
        let late = LeaseWindow(requestTimeoutMilliseconds: 1000, now: { 2500 })
        late.hold([work.lease!], until: 3000)
        #expect(!late.allowsSend(work))
    }

    /// An unreadable frame's order ends `rejected` only when the frame is a first submission;
    /// a redelivery or a status check may have money behind it, so it goes to review.
    @Test func onlyAnUnreadableFirstSubmissionIsRejected() throws {
        let json = #"{"v":1,"orderId":"un-1","provider":"viva","operation":"sale","amount":1,"currency":"EUR","params":{}}"#
        for (generation, purpose, status) in [
            (Int64(1), DispatchPurpose.submit, Outcome.Status.rejected), (2, .submit, .unknown), (3, .statusCheck, .unknown),
        ] {
            let frame = DispatchFrame.encode(orderJSON: json, acceptedAt: 1, purpose: purpose, generation: generation, token: 9) + [0]
            let result = try #require(StageResult.unreadableWork(frame, reason: "trailing bytes"))
            #expect(result.outcome.status == status, "generation \(generation), \(purpose)")
            #expect(result.ticket == DispatchTicket(generation: generation, token: 9) && result.answering == .init(purpose))
            if status == .unknown { #expect(result.outcome.error?.code == "NEEDS_REVIEW") }
        }
    }

    /// The store holds every order and outcome: it and its WAL are its owner's alone, also a
    /// store created readable by others before.
    @Test func theStoreIsReadableByItsOwnerOnly() throws {
        let path = TestStores.path()
        #expect(FileManager.default.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o644]))
        var core = LedgerCore(store: try LedgerStore(path: path), registry: LedgerCoreProbe.registry)
        _ = try core.intake([Array(vivaOrder.utf8)], now: 0)
        for file in [path, path + "-wal"] {
            let mode = try #require(try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? Int)
            #expect(mode & 0o077 == 0, "\(file) has mode \(String(mode, radix: 8))")
        }
    }

    /// `paypipe keys generate` writes every secret key file its owner's alone, upstream
    /// clients' too, and never over a key without --force.
    @Test func keysAreWrittenPrivateFromTheStart() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("paypipe-keys-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        func generate(_ extra: [String]) async throws -> (Int32, String) {
            let run = try await runCapturing(
                PipelineHarness.buildDirectory().appendingPathComponent("paypipe").path,
                ["keys", "generate", "--dir", directory.path, "--upstream", "shop-a"] + extra)
            return (run.status, run.output + run.errors)
        }
        let (status, printed) = try await generate([])
        #expect(status == 0, "\(printed)")
        for stem in CurveConfig.Role.allCases.map(\.rawValue) + ["upstream-shop-a"] {
            let mode = try #require(
                try FileManager.default.attributesOfItem(atPath: directory.appendingPathComponent("\(stem).secret").path)[.posixPermissions] as? Int)
            #expect(mode == 0o600, "\(stem).secret has mode \(String(mode, radix: 8))")
        }
        #expect(printed.contains(#""upstream": ["#) && printed.contains(#""name": "shop-a""#))
        #expect(try await generate([]).0 != 0, "keys are not replaced without --force")
        #expect(try await generate(["--force"]).0 == 0)
    }

    /// A client that opens a request and then sends slowly (or never finishes it) is cut off
    /// after the request deadline; one that stays within it is served.
    /// A stage refuses to start on what a production pipeline must not run with (here the demo
    /// secrets and a plaintext link off loopback), exit 1 naming each key and never a secret;
    /// the demo config as shipped, which says `insecureForTesting`, gets past the check.
    @Test func aStageRefusesDemoSecretsAndPlaintextLinksOffLoopbackUnlessTheConfigIsForTesting() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("paypipe-unsafe-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let demo = DemoConfig.text(sandboxURL: "http://127.0.0.1:9")
        let production = demo.replacingOccurrences(of: #""insecureForTesting": true"#, with: #""insecureForTesting": false"#)
        let path = directory.appendingPathComponent("config.json").path
        try production.write(toFile: path, atomically: true, encoding: .utf8)
        let signer = PipelineHarness.buildDirectory().appendingPathComponent("paypipe-signer").path
        let refused = try await runCapturing(
            signer, ["--config", path, "--results", "tcp://0.0.0.0:\(try freeLoopbackPort())"], within: .seconds(30))
        #expect(refused.status == 1)
        #expect(refused.errors.contains("refusing config"))
        #expect(refused.errors.contains("merchants.default.nets.webhookAuthorization: is a demo secret"))
        #expect(refused.errors.contains("endpoints.results: tcp://0.0.0.0:"))
        #expect(!refused.errors.contains("demoWebhookAuth123") && !refused.errors.contains("demo-nets-secret-key"))

        // As shipped (`insecureForTesting`), the same stage starts and runs until stopped.
        try demo.write(toFile: path, atomically: true, encoding: .utf8)
        let log = directory.appendingPathComponent("signer.stderr").path
        let started = try ChildProcess(
            [signer, "--config", path, "--sign-queue", "tcp://127.0.0.1:\(try freeLoopbackPort())", "--metrics", "127.0.0.1:0"],
            stderr: .file(log, append: false))
        let text = { String(decoding: readWholeFile(log) ?? [], as: UTF8.self) }
        // Serving its metrics means it got past the config; a refused one exits before.
        let serving = await eventually(within: .seconds(20)) { text().contains("signer metrics") || started.exitStatus != nil }
        #expect(serving && started.exitStatus == nil, "the demo config was refused: \(text())")
        started.signal(SIGTERM)
        _ = await waitForExit(started, within: .seconds(20))
    }

    @Test func aRequestThatIsNotWholeInTimeClosesItsConnection() async throws {
        var limits = HTTPIngressLimits()
        limits.requestTimeout = .milliseconds(700)
        let metrics = StageMetrics()
        let port = Mutex<Int?>(nil)
        let server = try metrics.server(
            address: "127.0.0.1:0", logger: Logger(label: "test"), limits: limits, onListening: { p in port.withLock { $0 = p } })
        let group = ServiceGroup(services: [server], logger: Logger(label: "test"))
        let running = Task { try await group.run() }
        defer { running.cancel() }
        #expect(await eventually(within: .seconds(10)) { port.withLock { $0 } != nil })
        let bound = try #require(port.withLock { $0 })
        #expect(httpGet("http://127.0.0.1:\(bound)/healthz")?.contains("ok") == true)

        let socket = try LoopbackSocket(port: bound)
        try socket.write("GET /healthz HTTP/1.1\r\nHost: x\r\n")
        let started = ContinuousClock.now
        var closed = false
        // A header line every 200 ms, never the blank line that ends the head.
        for _ in 0..<20 where !closed {
            try await Task.sleep(for: .milliseconds(200))
            closed = (try? socket.write("X-Slow: 1\r\n")) == nil || socket.isClosedByPeer
        }
        #expect(closed, "the slow request was still open after \(ContinuousClock.now - started)")
        #expect(ContinuousClock.now - started < .seconds(3))
        socket.close()
        await group.triggerGracefulShutdown()
    }
}

enum LedgerCoreProbe {
    static var registry: ConnectorRegistry { ConnectorRegistry(connectors: []) }
}

/// A plain TCP client for feeding a server bytes at a pace of the test's choosing.
final class LoopbackSocket {
    let fd: Int32

    init(port: Int) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw EnvelopeTestError("connect: \(errno)") }
        var ignore: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &ignore, socklen_t(MemoryLayout<Int32>.size))
    }

    func write(_ text: String) throws {
        let bytes = Array(text.utf8)
        let sent = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        guard sent == bytes.count else { throw EnvelopeTestError("send: \(errno)") }
    }

    /// Whether the peer has closed (a read would return end of file or an error now).
    var isClosedByPeer: Bool {
        var buffer = [UInt8](repeating: 0, count: 512)
        let n = recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
        return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
    }

    func close() { Glibc.close(fd) }
}

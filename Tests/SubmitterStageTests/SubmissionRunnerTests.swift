import Connectors
import Foundation
import HTTPTransport
import PaypipeCore
import Sandbox
import SignerStage
import StageRuntime
import StageWire
import Synchronization
import TestSupport
import Testing

@testable import PhonePeEmulation
@testable import SubmitterStage

@Suite("Submission runner: submissions driven on the event loops, against a real loopback server")
struct SubmissionRunnerTests {
    /// The PhonePe sandbox behind a loopback server whose every answer takes 20 ms, so that
    /// submissions overlap; it records the most requests it was answering at once.
    final class SlowPhonePe: Sendable {
        final class Answering: Sendable {
            private let state = Mutex((now: 0, most: 0))
            func begin() {
                state.withLock {
                    $0.now += 1
                    $0.most = max($0.most, $0.now)
                }
            }
            func end() { state.withLock { $0.now -= 1 } }
            var most: Int { state.withLock { $0.most } }
        }

        let server: ScriptedHTTPServer
        let config: PaypipeConfig
        private let answering = Answering()

        init() throws {
            let answering = self.answering
            let sandbox = PhonePeSandbox(config: try demoConfig().merchants["default"]!.phonepe!)
            server = try ScriptedHTTPServer { received in
                answering.begin()
                defer { answering.end() }
                usleep(20_000)
                // The demo config puts every provider under its own prefix of the sandbox's URL.
                let target = received.requestLine.split(separator: " ").dropFirst().first.map(String.init) ?? "/"
                let path = target.hasPrefix("/phonepe/") ? String(target.dropFirst("/phonepe".count)) : target
                let reply = sandbox.handleAuthInit(path: path, headers: received.headers.map { HTTPHeader($0.0, $0.1) }, body: received.body).response
                return .bytes(
                    ScriptedHTTPServer.response(
                        reply.status, body: String(decoding: reply.body, as: UTF8.self), headers: reply.headers.map { "\($0.name): \($0.value)" }),
                    thenClose: false)
            }
            config = try PaypipeConfig.parse(Array(DemoConfig.text(sandboxURL: "http://127.0.0.1:\(server.port)").utf8))
        }

        var most: Int { answering.most }

        func works(_ count: Int) async throws -> [SubmitWork] {
            let signer = SignerCore(registry: await testRegistry(config))
            return try (0..<count).map { n in
                let json = phonePeOrder.replacingOccurrences(of: "pp-1", with: "pp-\(n)")
                guard case .submit(let work) = signer.sign(try order(json), acceptedAt: 1, nowSeconds: 1_795_237_200) else {
                    throw EnvelopeTestError("no work for \(json)")
                }
                return work
            }
        }
    }

    /// What a runner finished, as its `onFinish` hands it over.
    final class Collected: Sendable {
        private let all = Mutex<[SubmissionRunner.Finished]>([])

        func append(_ done: SubmissionRunner.Finished) { all.withLock { $0.append(done) } }

        /// Everything finished once `count` pieces have, and 200 ms more have brought no
        /// other; throws if `count` are not in within `limit`.
        func wait(for count: Int, within limit: Duration = .seconds(30)) async throws -> [SubmissionRunner.Finished] {
            let clock = ContinuousClock(), deadline = clock.now + limit
            while all.withLock({ $0.count }) < count {
                guard clock.now < deadline else { throw EnvelopeTestError("\(all.withLock { $0.count }) of \(count) finished within \(limit)") }
                try await Task.sleep(for: .milliseconds(10))
            }
            try await Task.sleep(for: .milliseconds(200))
            return all.withLock { $0 }
        }
    }

    @Test func noMoreThanTheLimitRunAtOnceAndEachPieceOfWorkEndsOnceWithItsOwnOutcome() async throws {
        let provider = try SlowPhonePe()
        defer { provider.server.stop() }
        let http = ProviderHTTPClient(connectTimeoutMilliseconds: 30_000, requestTimeoutMilliseconds: 60_000)
        let collected = Collected()
        let runner = SubmissionRunner(
            concurrency: 2, registry: await testRegistry(provider.config), policy: SubmissionPolicy(), http: http, onFinish: collected.append)
        runner.start(try await provider.works(10))
        #expect(runner.running == 2)
        let finished = try await collected.wait(for: 10)
        #expect(finished.count == 10)
        #expect(Set(finished.map(\.outcome?.orderId)) == Set((0..<10).map { "pp-\($0)" }))
        #expect(finished.allSatisfy { $0.outcome?.orderId == $0.work.order.orderId })
        #expect(finished.allSatisfy { $0.outcome?.status == .pending && $0.outcome?.attempts == 1 })
        #expect(provider.server.requests.count == 10)
        #expect(provider.most == 2)
        #expect(runner.running == 0)
        await http.shutdown()
    }

    /// The running count is reported in the order it changed, and every piece of work comes
    /// out once.
    @Test func theRunningCountIsReportedInTheOrderItChanged() async throws {
        let provider = try SlowPhonePe()
        defer { provider.server.stop() }
        let http = ProviderHTTPClient(connectTimeoutMilliseconds: 30_000, requestTimeoutMilliseconds: 60_000)
        let counts = Mutex<[Int]>([])
        let collected = Collected()
        let runner = SubmissionRunner(
            concurrency: 3, registry: await testRegistry(provider.config), policy: SubmissionPolicy(), http: http,
            runningChanged: { count in counts.withLock { $0.append(count) } }, onFinish: collected.append)
        runner.start(try await provider.works(10))
        let finished = try await collected.wait(for: 10).map(\.outcome?.orderId)
        #expect(finished.count == 10)
        #expect(Set(finished) == Set((0..<10).map { "pp-\($0)" }))
        // The limit once the ten start, then down to 0 as the last three end (a finished one's
        // slot goes to waiting work unreported).
        #expect(counts.withLock { $0 } == [3, 2, 1, 0])
        await http.shutdown()
    }

    /// Work whose provider this submitter has no connector for ends rejected without a request,
    /// and the work waiting behind it still runs, without any request of its own.
    @Test func workWithoutAConnectorIsRejectedUnsentAndTheWorkBehindItStillRuns() async throws {
        let provider = try SlowPhonePe()
        defer { provider.server.stop() }
        let http = ProviderHTTPClient(connectTimeoutMilliseconds: 30_000, requestTimeoutMilliseconds: 60_000)
        let withPhonePe = try await provider.works(3)
        let standard = await testRegistry(provider.config)
        let registry = ConnectorRegistry(connectors: [standard.connector(for: Provider("trustpayments"))!])
        let collected = Collected()
        let runner = SubmissionRunner(concurrency: 1, registry: registry, policy: SubmissionPolicy(), http: http, onFinish: collected.append)
        runner.start(withPhonePe)
        #expect(runner.running == 0)
        let ended = try await collected.wait(for: 3)
        #expect(ended.map(\.outcome?.orderId) == ["pp-0", "pp-1", "pp-2"])
        #expect(ended.allSatisfy { $0.outcome?.status == .rejected && $0.outcome?.error?.code == Rejection.Code.unknownProvider.rawValue })
        #expect(provider.server.requests.isEmpty)
        #expect(runner.running == 0)

        let phonePe = ConnectorRegistry(connectors: [standard.connector(for: withPhonePe[0].order.provider)!])
        let secondCollected = Collected()
        let second = SubmissionRunner(concurrency: 1, registry: phonePe, policy: SubmissionPolicy(), http: http, onFinish: secondCollected.append)
        second.start(withPhonePe)
        #expect(try await secondCollected.wait(for: 3).map(\.outcome?.status) == [.pending, .pending, .pending])
        #expect(provider.server.requests.count == 3)
        await http.shutdown()
    }

    /// Retries spread over the whole backoff window: every jitter lies in 0..<1, and draws from
    /// two event loops at once are spread evenly, not repeated.
    @Test func jitterIsSpreadOverZeroToOne() async {
        let jitter = Jitter()
        let draws = await withTaskGroup(of: [Double].self) { group in
            for _ in 0..<2 { group.addTask { (0..<20_000).map { _ in jitter.next() } } }
            return await group.reduce(into: []) { $0 += $1 }
        }
        #expect(draws.allSatisfy { (0..<1).contains($0) })
        #expect(Set(draws).count == draws.count)
        var tenths = [Int](repeating: 0, count: 10)
        for draw in draws { tenths[Int(draw * 10)] += 1 }
        #expect(tenths.allSatisfy { (3_600...4_400).contains($0) }, "\(tenths)")
    }
}

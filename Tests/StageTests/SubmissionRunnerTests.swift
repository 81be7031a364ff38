import Foundation
import HTTPTransport
import PaypipeCore
import Sandbox
import StageRuntime
import StageWire
import SignerStage
@testable import SubmitterStage
import Synchronization
import Testing

@Suite("Submission runner: submissions driven on the event loops, against a real loopback server")
struct SubmissionRunnerTests {
    /// The PhonePe sandbox behind a loopback server whose every answer takes 20 ms, so that
    /// submissions overlap; it records the most requests it was answering at once.
    final class SlowPhonePe: Sendable {
        final class Answering: Sendable {
            private let state = Mutex((now: 0, most: 0))
            func begin() { state.withLock { $0.now += 1; $0.most = max($0.most, $0.now) } }
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

    /// Everything the runner finished, once its stream ends; throws if it does not end in time.
    func collect(_ runner: SubmissionRunner, within limit: Duration = .seconds(30)) async throws -> [SubmissionRunner.Finished] {
        try await withThrowingTaskGroup(of: [SubmissionRunner.Finished]?.self) { group in
            group.addTask { await runner.finished.reduce(into: []) { $0.append($1) } }
            group.addTask {
                try await Task.sleep(for: limit)
                return nil
            }
            defer { group.cancelAll() }
            guard case let all?? = try await group.next() else { throw EnvelopeTestError("the runner's stream did not end within \(limit)") }
            return all
        }
    }

    @Test func noMoreThanTheLimitRunAtOnceAndEachPieceOfWorkEndsOnceWithItsOwnOutcome() async throws {
        let provider = try SlowPhonePe()
        defer { provider.server.stop() }
        let http = ProviderHTTPClient(connectTimeoutMilliseconds: 30_000, requestTimeoutMilliseconds: 60_000)
        let runner = SubmissionRunner(concurrency: 2, registry: await testRegistry(provider.config), policy: SubmissionPolicy(), http: http)
        runner.start(try await provider.works(10))
        #expect(runner.running == 2)
        runner.close()
        let finished = try await collect(runner)
        #expect(finished.count == 10)
        #expect(Set(finished.map(\.outcome.orderId)) == Set((0..<10).map { "pp-\($0)" }))
        #expect(finished.allSatisfy { $0.outcome.orderId == $0.work.order.orderId })
        #expect(finished.allSatisfy { $0.outcome.status == .pending && $0.outcome.attempts == 1 })
        #expect(provider.server.requests.count == 10)
        #expect(provider.most == 2)
        #expect(runner.running == 0)
        await http.shutdown()
    }

    /// What `handOff` takes never comes out of `finished`; what it refuses does, and nothing is
    /// lost or doubled between the two.
    @Test func workTheHandOffTakesIsNotStreamedAndWorkItRefusesIs() async throws {
        let provider = try SlowPhonePe()
        defer { provider.server.stop() }
        let http = ProviderHTTPClient(connectTimeoutMilliseconds: 30_000, requestTimeoutMilliseconds: 60_000)
        let handed = Mutex<[String]>([])
        let counts = Mutex<[Int]>([])
        let runner = SubmissionRunner(
            concurrency: 3, registry: await testRegistry(provider.config), policy: SubmissionPolicy(), http: http,
            runningChanged: { count in counts.withLock { $0.append(count) } }
        ) { done in
            guard let digit = done.outcome.orderId.last?.wholeNumberValue, digit.isMultiple(of: 2) else { return false }
            handed.withLock { $0.append(done.outcome.orderId) }
            return true
        }
        runner.start(try await provider.works(10))
        runner.close()
        let streamed = try await collect(runner).map(\.outcome.orderId)
        #expect(Set(handed.withLock { $0 }) == ["pp-0", "pp-2", "pp-4", "pp-6", "pp-8"])
        #expect(Set(streamed) == ["pp-1", "pp-3", "pp-5", "pp-7", "pp-9"])
        #expect(handed.withLock { $0.count } + streamed.count == 10)
        // Each count is reported in the order it happened: the limit once the ten start, then
        // down to 0 as the last three end (a finished one's slot goes to waiting work unreported).
        #expect(counts.withLock { $0 } == [3, 2, 1, 0])
        await http.shutdown()
    }

    /// The stream ends only after the last outcome is in it. One outcome is held up in
    /// `handOff` (which refuses it, so it goes to the stream afterwards) while the other ends
    /// on another event loop and finds nothing running: the stream must wait for the first.
    @Test func theStreamDoesNotEndUnderAnOutcomeStillOnItsWay() async throws {
        let provider = try SlowPhonePe()
        defer { provider.server.stop() }
        let http = ProviderHTTPClient(connectTimeoutMilliseconds: 30_000, requestTimeoutMilliseconds: 60_000)
        let runner = SubmissionRunner(
            concurrency: 2, registry: await testRegistry(provider.config), policy: SubmissionPolicy(), http: http,
            handOff: { done in
                if done.outcome.orderId == "pp-0" { usleep(500_000) }
                return false
            })
        runner.start(try await provider.works(2))
        runner.close()
        let finished = try await collect(runner)
        #expect(Set(finished.map(\.outcome.orderId)) == ["pp-0", "pp-1"])
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
        let runner = SubmissionRunner(concurrency: 1, registry: registry, policy: SubmissionPolicy(), http: http)
        runner.start(withPhonePe)
        #expect(runner.running == 0)
        runner.close()
        let ended = try await collect(runner)
        #expect(ended.map(\.outcome.orderId) == ["pp-0", "pp-1", "pp-2"])
        #expect(ended.allSatisfy { $0.outcome.status == .rejected && $0.outcome.error?.code == Rejection.Code.unknownProvider.rawValue })
        #expect(provider.server.requests.isEmpty)
        #expect(runner.running == 0)

        let phonePe = ConnectorRegistry(connectors: [standard.connector(for: withPhonePe[0].order.provider)!])
        let second = SubmissionRunner(concurrency: 1, registry: phonePe, policy: SubmissionPolicy(), http: http)
        second.start(withPhonePe)
        second.close()
        #expect(try await collect(second).map(\.outcome.status) == [.pending, .pending, .pending])
        #expect(provider.server.requests.count == 3)
        await http.shutdown()
    }
}

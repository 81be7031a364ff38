import AsyncHTTPClient
import Emulators
import NetsEasy
import PaypipeCore
import Testing
import Viva

@testable import NetsEasyEmulation
@testable import Sandbox

@Suite struct SandboxServerTests {
    @Test func healthAndUnknownRoutes() async throws {
        try await withSandbox { sandbox in
            let health = try await sandbox.get("/healthz")
            #expect(health.status == 200)
            #expect(try JSONValue.parse(health.body)["status"] == "ok")
            #expect(try await sandbox.get("/nowhere").status == 404)
            // Nets checks the key before the route, as Nets does.
            #expect(try await sandbox.get("/nets/v2/unknown").status == 401)
            // Only the Nets request reached a provider emulation.
            #expect(sandbox.ledger.total == 1)
        }
    }

    @Test func latencyDelaysProviderAnswersByAtLeastTheConfiguredTime() async throws {
        try await withSandbox(SandboxConfiguration(latencyMilliseconds: 150)) { sandbox in
            let config = try #require(try Fixtures.merchant(sandbox.config).nets)
            let request = try NetsPayments.sign(NetsSandboxTests.createOrder("latency"), config: config, now: NetsSandboxTests.now)
            let clock = ContinuousClock()
            let started = clock.now
            let response = try await sandbox.send(request)
            #expect(clock.now - started >= .milliseconds(150))
            #expect(response.status == 201)
        }
    }

    @Test func delayedRequestsAreServedConcurrently() async throws {
        // A client of its own: the shared one opens at most 8 connections per host.
        let client = HTTPClient(
            eventLoopGroup: HTTPClient.defaultEventLoopGroup,
            configuration: HTTPClient.Configuration(
                connectionPool: .init(idleTimeout: .seconds(30), concurrentHTTP1ConnectionsPerHostSoftLimit: 200)))
        defer { _ = client.shutdown() }
        try await withSandbox(SandboxConfiguration(latencyMilliseconds: 200)) { sandbox in
            let config = try #require(try Fixtures.merchant(sandbox.config).nets)
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for index in 0..<100 {
                    let request = try NetsPayments.sign(NetsSandboxTests.createOrder("parallel-\(index)"), config: config, now: NetsSandboxTests.now)
                    group.addTask { try await sandbox.send(request, client: client).status }
                }
                var statuses: [Int] = []
                for try await status in group { statuses.append(status) }
                return statuses
            }
            #expect(statuses.count == 100)
            #expect(statuses.allSatisfy { $0 == 201 })
            // Counted where the server waits, not by the clock, which a loaded machine stretches:
            // served one or two at a time, at most two requests would wait at once.
            #expect(sandbox.ledger.mostDelayingAtOnce >= 10)
            #expect(try await sandbox.ledgerDocument()["distinctEffects"] == .integer(100))
        }
    }

    @Test func errorRateOneAnswers500AndTakesNoEffect() async throws {
        try await withSandbox(SandboxConfiguration(errorRate: 1.0)) { sandbox in
            let config = try #require(try Fixtures.merchant(sandbox.config).nets)
            let order = NetsSandboxTests.createOrder("injected")
            let request = try NetsPayments.sign(order, config: config, now: NetsSandboxTests.now)
            let response = try await sandbox.send(request)
            #expect(response.status == 500)
            #expect(NetsPayments.classifyCreate(response).kind == "unknown")
            let key = "nets:" + NetsPayments.idempotencyKey(for: order.key)
            let document = try await sandbox.ledgerDocument()
            #expect(document["requests"]?[key] == .integer(1))
            #expect(document["effects"]?[key] == nil)
            #expect(document["injectedErrors"] == .integer(1))
            // Health is not a provider request and is never failed.
            #expect(try await sandbox.get("/healthz").status == 200)
        }
    }

    @Test func errorInjectionIsDeterministicForASeedAndNearTheRate() {
        let draws = { (seed: UInt64) -> [Bool] in
            let injector = SandboxErrorInjector(rate: 0.3, seed: seed)
            return (0..<2000).map { _ in injector.shouldFail() }
        }
        let first = draws(42)
        #expect(first == draws(42))
        #expect(first != draws(43))
        let failures = first.filter { $0 }.count
        #expect((500...700).contains(failures))
        #expect(!SandboxErrorInjector(rate: 0, seed: 1).shouldFail())
    }

    @Test func theLedgerCanBeNarrowedToOneKeyOrSummarised() async throws {
        try await withSandbox(SandboxConfiguration().with { $0.nets.completeCheckoutAfterMilliseconds = nil }) { sandbox in
            let config = try #require(try Fixtures.merchant(sandbox.config).nets)
            for id in ["ledger-a", "ledger-b"] {
                _ = try await sandbox.send(try NetsPayments.sign(NetsSandboxTests.createOrder(id), config: config, now: NetsSandboxTests.now))
            }
            let key = "nets:" + NetsPayments.idempotencyKey(for: OrderKey(merchant: "default", orderId: "ledger-a"))
            let narrowed = try JSONValue.parse(try await sandbox.get("/_sandbox/ledger?key=\(key)").body)
            #expect(narrowed["requests"] == .object([key: .integer(1)]))
            #expect(narrowed["effects"] == .object([key: .integer(1)]))
            #expect(narrowed["total"] == .integer(2))
            let summary = try JSONValue.parse(try await sandbox.get("/_sandbox/ledger?summary=1").body)
            #expect(summary["requests"] == nil)
            #expect(summary["distinctEffects"] == .integer(2))
        }
    }

    @Test func theLedgerStopsTrackingKeysBeyondItsLimit() {
        let ledger = SandboxLedger(keyLimit: 2)
        for key in ["a", "b", "c"] { ledger.received(key) }
        ledger.received("a")
        #expect(ledger.requests("a") == 2)
        #expect(ledger.requests("c") == 0)
        #expect(ledger.total == 4)
        #expect(ledger.document(summary: true)["untrackedKeys"] == .integer(1))
    }

    @Test func vivaSaleURLsAreAnsweredWithTheAppCallback() async throws {
        try await withSandbox { sandbox in
            let viva = try #require(try Fixtures.merchant(sandbox.config).viva)
            let order = Order(orderId: "viva-1", operation: .sale, amount: 1200, currency: "EUR", params: [:])
            let url = try VivaSale.url(order: order, config: viva)
            let response = try await sandbox.send(
                HTTPRequestSpec(
                    method: .POST, url: "http://127.0.0.1:\(sandbox.port)/viva/sale",
                    body: Array(JSONValue.object(["uri": .string(url)]).serialized.utf8)))
            #expect(response.status == 200)
            let callback = try VivaSaleCallback(uri: try #require(try JSONValue.parse(response.body)["callback"]?.stringValue))
            #expect(callback.status == .success)
            #expect(callback.amount == 1200)
            let bad = try await sandbox.send(
                HTTPRequestSpec(
                    method: .POST, url: "http://127.0.0.1:\(sandbox.port)/viva/sale", body: Array(#"{"uri":"https://example.com"}"#.utf8)))
            #expect(bad.status == 400)
        }
    }

    @Test(arguments: [
        SandboxConfiguration(errorRate: 1.5), SandboxConfiguration(latencyMilliseconds: -1), SandboxConfiguration(port: 70000),
    ])
    func unusableSettingsAreRefused(settings: SandboxConfiguration) {
        #expect(throws: SandboxConfigurationError.self) {
            try SandboxServer(configuration: settings, config: Fixtures.config(port: 0), logger: Fixtures.quiet)
        }
    }

    @Test func shutdownBeforeRunStillLetsRunReturn() async throws {
        let server = try SandboxServer(configuration: SandboxConfiguration(port: 0), config: Fixtures.config(port: 0), logger: Fixtures.quiet)
        await server.shutdown()
        try await server.run()
    }
}

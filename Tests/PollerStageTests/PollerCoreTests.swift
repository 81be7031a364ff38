import Cleeng
import Connectors
import HTTPTransport
import PaypipeCore
import SignerStage
import StageRuntime
import StageWire
import SubmitterStage
import Synchronization
import TestSupport
import Testing

@testable import LedgerStage
@testable import PollerStage

/// The dispatch a poller was sent a receipt as (the poller core passes it on untouched).
let testTicket = DispatchTicket(generation: 1, token: 0)

/// Cleeng's getAccessStatus answers, as the poller core reads them through Cleeng's connector.
enum AccessAnswer {
    static func rpc(_ id: Int, _ body: String) -> Result<HTTPResponseSpec, TransportFailure> {
        .success(HTTPResponseSpec(status: 200, body: Array(#"{"jsonrpc":"2.0","id":\#(id),\#(body)}"#.utf8)))
    }
    static func granted(_ id: Int) -> Result<HTTPResponseSpec, TransportFailure> {
        rpc(id, #""result":{"accessGranted":true,"grantType":"purchase"}"#)
    }
    static func notGranted(_ id: Int) -> Result<HTTPResponseSpec, TransportFailure> { rpc(id, #""result":{"accessGranted":false}"#) }
    static func offerNotFound(_ id: Int) -> Result<HTTPResponseSpec, TransportFailure> {
        rpc(id, #""error":{"code":4,"message":"offer not found"}"#)
    }
    static let unavailable: Result<HTTPResponseSpec, TransportFailure> = .success(HTTPResponseSpec(status: 503))
}

@Suite("Poller core: one scheduler for every polled order")
struct PollerCoreTests {
    func makeCore() async -> PollerCore { PollerCore(registry: await testRegistry(), timers: PaypipeConfig.Timers()) }

    func polls(_ actions: [PollerCore.Action]) -> [(ReceiptID, Int, Int64)] {
        actions.compactMap { if case .poll(let receipt, let id, _, let slot) = $0 { (receipt, id, slot) } else { nil } }
    }

    @Test func onlyConnectorsWithPendingPollingArePolled() async throws {
        let core = await makeCore()
        #expect(core.providers == [.cleeng])
        var copy = core
        let nets = try order(#"{"v":1,"orderId":"n-1","provider":"nets","operation":"createSubscription","amount":100,"currency":"EUR","params":{}}"#)
        guard case .emit(let result)? = copy.add(nets, pendingSince: 0, ticket: testTicket, now: 0).first else {
            Issue.record("an order of a provider that is not polled ends at once")
            return
        }
        #expect(result.outcome.status == .failed && result.outcome.error?.code == "NOT_POLLED")
    }

    @Test func pollsFollowTheCadenceFromAcceptanceAndGrantEndsTheReceipt() async throws {
        var core = await makeCore()
        let o = try order(cleengOrderJSON)
        #expect(core.add(o, pendingSince: 1_000, ticket: testTicket, now: 1_010).isEmpty)
        #expect(core.nextWakeUp == 6_000)
        #expect(core.due(now: 5_999).isEmpty)
        let first = polls(core.due(now: 6_003))
        #expect(first.count == 1 && first[0].1 == 1 && first[0].2 == 6_000)
        let receipt = first[0].0
        #expect(core.receive(receipt, requestId: 1, answer: AccessAnswer.notGranted(1), now: 6_050).isEmpty)
        #expect(core.nextWakeUp == 11_000)
        let second = polls(core.due(now: 11_000))
        #expect(second.count == 1 && second[0].1 == 2)
        // A stale answer (an earlier request id) changes nothing.
        #expect(core.receive(receipt, requestId: 1, answer: AccessAnswer.granted(1), now: 11_010).isEmpty)
        let end = core.receive(receipt, requestId: 2, answer: AccessAnswer.granted(2), now: 11_020)
        guard case .emit(let result)? = end.first else {
            Issue.record("expected an outcome")
            return
        }
        #expect(result.outcome.status == .succeeded && result.answering == .poll && result.ticket == testTicket)
        #expect(core.count == 0)
    }

    @Test func neverGrantedFailsAfterTheDeadlineAndFatalErrorsStopAtOnce() async throws {
        var core = await makeCore()
        let o = try order(cleengOrderJSON)
        _ = core.add(o, pendingSince: 0, ticket: testTicket, now: 0)
        var now: Int64 = 0
        var sent = 0
        var outcome: Outcome?
        for _ in 0..<100 where outcome == nil {
            now = core.nextWakeUp ?? now
            for action in core.due(now: now) {
                if case .poll(let receipt, let id, _, _) = action {
                    sent += 1
                    for next in core.receive(receipt, requestId: id, answer: AccessAnswer.unavailable, now: now + 10) {
                        if case .emit(let o) = next { outcome = o.outcome }
                    }
                }
                if case .emit(let o) = action { outcome = o.outcome }
            }
        }
        #expect(sent == 12)  // 5 s, 10 s, ... 60 s: transport errors never shorten the schedule
        #expect(outcome?.error?.code == "ACCESS_NOT_GRANTED")
        #expect(now >= 60_000)

        var fatal = await makeCore()
        _ = fatal.add(o, pendingSince: 0, ticket: testTicket, now: 0)
        let poll = polls(fatal.due(now: 5_000))
        let end = fatal.receive(poll[0].0, requestId: poll[0].1, answer: AccessAnswer.offerNotFound(poll[0].1), now: 5_010)
        if case .emit(let o)? = end.first { #expect(o.outcome.status == .failed) } else { Issue.record("fatal error must end the receipt") }
    }

    @Test func aReceiptPastItsDeadlineGetsOneLastCheckAndADuplicateIsIgnored() async throws {
        var core = await makeCore()
        let o = try order(cleengOrderJSON)
        let check = polls(core.add(o, pendingSince: 0, ticket: testTicket, now: 70_000))
        #expect(check.count == 1)
        #expect(core.add(o, pendingSince: 0, ticket: testTicket, now: 70_001).isEmpty)
        let end = core.receive(check[0].0, requestId: check[0].1, answer: AccessAnswer.granted(check[0].1), now: 70_050)
        if case .emit(let o)? = end.first { #expect(o.outcome.status == .succeeded) } else { Issue.record("the last check decides") }
    }

    /// A late answer for a receipt that has ended must not reach the receipt that took its row.
    @Test func anAnswerForAnEndedReceiptNeverReachesTheNextOneInItsRow() async throws {
        var core = await makeCore()
        let first = try order(cleengOrderJSON)
        _ = core.add(first, pendingSince: 0, ticket: testTicket, now: 0)
        let poll = polls(core.due(now: 5_000))
        let end = core.receive(poll[0].0, requestId: poll[0].1, answer: AccessAnswer.offerNotFound(poll[0].1), now: 5_010)
        #expect(end.count == 1 && core.count == 0)

        let second = try order(cleengOrderJSON.replacingOccurrences(of: "cl-1", with: "cl-2"))
        _ = core.add(second, pendingSince: 6_000, ticket: testTicket, now: 6_000)
        let next = polls(core.due(now: 11_000))
        #expect(next.count == 1 && next[0].0 != poll[0].0)
        // The stale id, with the request id the new receipt's first poll also uses.
        #expect(core.receive(poll[0].0, requestId: next[0].1, answer: AccessAnswer.granted(next[0].1), now: 11_005).isEmpty)
        #expect(core.receive(poll[0].0, requestId: poll[0].1, answer: AccessAnswer.granted(poll[0].1), now: 11_006).isEmpty)
        #expect(core.count == 1)
        let granted = core.receive(next[0].0, requestId: next[0].1, answer: AccessAnswer.granted(next[0].1), now: 11_010)
        guard case .emit(let result)? = granted.first else {
            Issue.record("the new receipt's own answer ends it")
            return
        }
        #expect(result.outcome.orderId == "cl-2" && result.outcome.status == .succeeded)
        // Its key is free again: added past its deadline, it gets its one last check at once.
        #expect(polls(core.add(second, pendingSince: 70_000, ticket: testTicket, now: 200_000)).count == 1)
    }

    @Test func theHeapWakesReceiptsInTimeOrder() async {
        var heap = MinHeap()
        for time in [50, 10, 40, 30, 20, 10] as [Int64] { heap.push(time: time, id: ReceiptID(row: Int32(time), generation: 0)) }
        var popped: [Int64] = []
        while let entry = heap.pop() { popped.append(entry.time) }
        #expect(popped == [10, 10, 20, 30, 40, 50])
    }
}

@Suite("Poll driver: the polls in flight, against a real loopback server")
struct PollDriverTests {
    /// Ten receipts past their deadline each need their last check at once; with a limit of two
    /// the rest wait for answers, so the server never sees more than two connections, and every
    /// receipt still ends with its own answer.
    @Test func pollsOverTheLimitWaitForAnswersAndEveryReceiptEnds() async throws {
        let grant = ScriptedHTTPServer.response(body: #"{"jsonrpc":"2.0","id":1,"result":{"accessGranted":true}}"#)
        let server = try ScriptedHTTPServer { _ in .bytes(grant, thenClose: false) }
        defer { server.stop() }
        let config = try PaypipeConfig.parse(Array(DemoConfig.text(sandboxURL: "http://127.0.0.1:\(server.port)").utf8))
        let http = ProviderHTTPClient(connectTimeoutMilliseconds: 30_000, requestTimeoutMilliseconds: 60_000)
        let ended = Mutex<[Outcome]>([])
        let sent = Atomic<Int>(0)
        let driver = PollDriver(
            core: PollerCore(registry: await testRegistry(config), timers: config.timers), http: http, limit: 2,
            emit: { result in ended.withLock { $0.append(result.outcome) } },
            sent: { _ in sent.add(1, ordering: .relaxed) })
        for n in 0..<10 {
            driver.add(
                try order(cleengOrderJSON.replacingOccurrences(of: "cl-1", with: "cl-\(n)")), pendingSince: milliseconds() - 120_000,
                ticket: testTicket)
        }
        let giveUp = ContinuousClock.now + .seconds(30)
        while ended.withLock({ $0.count }) < 10, ContinuousClock.now < giveUp { try await Task.sleep(for: .milliseconds(10)) }
        let outcomes = ended.withLock { $0 }
        #expect(outcomes.count == 10)
        #expect(outcomes.allSatisfy { $0.status == .succeeded })
        #expect(Set(outcomes.map(\.orderId)) == Set((0..<10).map { "cl-\($0)" }))
        #expect(sent.load(ordering: .relaxed) == 10 && server.requests.count == 10)
        #expect(server.connections <= 2)
        #expect(driver.count == 0)
        await driver.stop(waitingAtMost: .seconds(1))
        await http.shutdown()
    }
}

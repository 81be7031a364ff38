import Foundation
import PaypipeCore
import StageRuntime
import StageWire
import TestSupport
import Testing
import ZeroMQ

/// The outcome log through real processes: a ledger with no outcome consumer, a ledger killed
/// with outcomes in flight, REQ and DEALER replay clients.
@Suite("Outcome replay through real processes", .serialized)
struct OutcomeReplayFlowTests {
    /// Every logged outcome with a seq above `since`, by DEALER requests of `limit`.
    static func replayAll(_ h: PipelineHarness, since: Int64 = 0, limit: Int = 1000) async throws -> [[UInt8]] {
        let client = try OutcomeReplayClient(context: h.context, endpoint: h.ledgerEndpoints["outcomesReplay"]!)
        var since = since
        var outcomes: [[UInt8]] = []
        while true {
            let answer = try await client.fetch(since: since, limit: limit)
            outcomes += answer.outcomes
            since = answer.trailer.next
            if !answer.trailer.more { break }
        }
        await client.close()
        return outcomes
    }

    /// Replays until `count` outcomes are logged or `timeout` passes.
    static func waitForLogged(_ h: PipelineHarness, count: Int, timeout: Duration = .seconds(60)) async throws -> [[UInt8]] {
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        var outcomes: [[UInt8]] = []
        while clock.now < deadline {
            outcomes = try await replayAll(h)
            if outcomes.count >= count { break }
            try await Task.sleep(for: .milliseconds(200))
        }
        return outcomes
    }

    static func orderId(of bytes: [UInt8]) -> String? { try? Outcome.parse(bytes).orderId }

    @Test func withNoConsumerOutcomesWaitInTheStoreWhileIntakeAndRPCsGoOn() async throws {
        let h = try await PipelineHarness(connectOutcomes: false)
        defer { Task { await h.shutdown() } }
        let total = 10_000
        for i in 0..<total { try await h.send(rejectedOrder("nc-\(i)")) }
        // An order after them is still taken in, and the ledger RPC (what callbacks use) answers about it.
        try await h.send(vivaOrder)
        let rpc = try LedgerClient(context: h.context, endpoint: h.ledgerEndpoints["ledgerRPC"]!)
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(90)
        var found: StoredOrder?
        while found == nil, clock.now < deadline {
            if case .order(let stored?) = try await rpc.call(.lookup(OrderKey(merchant: "default", orderId: "viva-1"))) {
                found = stored
            } else {
                try await Task.sleep(for: .milliseconds(100))
            }
        }
        #expect(found?.state == .open)
        if case .order(let stored?) = try await rpc.call(.lookup(OrderKey(merchant: "default", orderId: "nc-9999"))) {
            #expect(stored.state == .terminal)
        }
        await rpc.close()
        let outcomes = try await Self.replayAll(h)
        #expect(outcomes.count == total)
        #expect(outcomes.map { seq(of: $0) ?? 0 } == (1...Int64(total)).map { $0 })
        #expect(outcomes.map { Self.orderId(of: $0) ?? "" } == (0..<total).map { "nc-\($0)" })
        await h.shutdown()
    }

    @Test func outcomesSurviveAKilledLedgerAndAreReplayedBySeq() async throws {
        let h = try await PipelineHarness(connectOutcomes: false)
        defer { Task { await h.shutdown() } }
        let total = 50
        for i in 0..<total { try await h.send(rejectedOrder("k9-\(i)")) }
        let before = try await Self.waitForLogged(h, count: total)
        #expect(before.count == total)

        let ledger = h.ledgerProcess
        ledger.signal(SIGKILL)
        while ledger.isRunning { try await Task.sleep(for: .milliseconds(20)) }
        try await h.restartLedger()

        // A REQ client gets exactly one message: one frame per outcome, then the trailer.
        // (Polled without blocking: ZMQDuplex's eager reads do not fit REQ's strict send/receive turns.)
        let req = try h.context.socket(.req)
        _ = try req.connect(h.ledgerEndpoints["outcomesReplay"]!)
        var reply: ZMQMessage?
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(20)
        var sent = false
        while reply == nil, clock.now < deadline {
            if !sent { sent = try req.send(ZMQMessage(OutcomeReplay.Request(since: 0, limit: 1000).bytes), dontWait: true) }
            if sent { reply = try req.receive(dontWait: true) }
            if reply == nil { try await Task.sleep(for: .milliseconds(20)) }
        }
        req.close()
        let frames = reply?.frames ?? []
        #expect(frames.count == total + 1)
        #expect(Array(frames.dropLast()) == before)
        let trailer = frames.last.flatMap(OutcomeReplay.Trailer.parse)
        #expect(trailer?.next == Int64(total) && trailer?.more == false)
        // The restarted ledger opened a new epoch, after the seqs of the one before.
        let epochs = Set(before.compactMap { (try? JSONValue.parse($0))?["epoch"]?.stringValue })
        #expect(epochs.count == 1 && trailer?.epoch != nil && !epochs.contains(trailer?.epoch ?? ""))

        // The restarted ledger goes on from the last seq; a repeated order logs nothing new.
        try await h.send(rejectedOrder("k9-0"))
        try await h.send(rejectedOrder("k9-new"))
        let after = try await Self.waitForLogged(h, count: total + 1)
        #expect(after.count == total + 1)
        #expect(after.last.flatMap { seq(of: $0) } == Int64(total + 1))
        #expect(after.last.flatMap(Self.orderId) == "k9-new")
        await h.shutdown()
    }
}

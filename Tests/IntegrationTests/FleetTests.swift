import Foundation
import PaypipeCore
import Sandbox
import StageRuntime
import Synchronization
import TestSupport
import Testing
import ZeroMQ

/// Several ledgers over one PostgreSQL store, none special, with the streamer in a process of its
/// own: orders go in at either ledger, one ledger is killed with -9 while orders flow, and every
/// order still ends once, with one effect at the provider, on an outcome log without a gap that
/// each ledger pushes live in seq order.
@Suite("A fleet of ledgers over one PostgreSQL store", .serialized, .enabled(if: TestStores.postgres != nil))
struct FleetTests {
    /// What one live outcomes stream delivered: seqs in arrival order and the bytes by seq.
    final class Stream: @unchecked Sendable {
        var seqs: [Int64] = []
        var bytes: [Int64: [UInt8]] = [:]
        func take(_ message: [UInt8]) {
            // A repeated order's answer is its stored outcome again: not a new one.
            guard let seq = seq(of: message), bytes[seq] == nil else { return }
            seqs.append(seq)
            bytes[seq] = message
        }
    }

    @Test func twoLedgersAndAStreamerLoseNothingWhenOneLedgerDies() async throws {
        let (h, counting, frontTask) = try await EffectCountingFront.pipeline(
            timers: ["phonepeCallbackWaitMs": 3000, "httpRequestTimeoutMs": 2000, "leaseMs": 4000], redeliverAfterMilliseconds: 4000)
        let result: Result<Void, any Error>
        do {
            try await run(h, counting: counting)
            result = .success(())
        } catch {
            result = .failure(error)
        }
        await h.shutdown()
        frontTask.cancel()
        await counting.http.shutdown()
        try result.get()
    }

    func run(_ h: PipelineHarness, counting: EffectCountingFront) async throws {
        let a = h.ledgerEndpoints
        var b: [String: String] = [:]
        for name in ["intake", "outcomes", "signQueue", "results", "ledgerRPC", "pollQueue", "outcomesReplay", "admin"] {
            b[name] = "tcp://127.0.0.1:\(try freeLoopbackPort())"
        }
        let (_, bReady) = try await h.spawnOffCooperativeThreads(
            "paypipe-ledger",
            PipelineHarness.ledgerArguments(configPath: h.configPath, store: h.storeArgument, redeliverAfterMilliseconds: 4000) + [
                "--no-streamer", "--intake", b["intake"]!, "--outcomes", b["outcomes"]!, "--sign-queue", b["signQueue"]!,
                "--results", b["results"]!, "--ledger-rpc", b["ledgerRPC"]!, "--poll-queue", b["pollQueue"]!,
                "--outcomes-replay", b["outcomesReplay"]!, "--admin", b["admin"]!, "--metrics", "127.0.0.1:0",
            ], waitForLine: LedgerAddresses.readyMarker)
        #expect(bReady?.contains("signedIn=none") == true)
        let (_, streamerReady) = try h.spawn(
            "paypipe-streamer",
            [
                "--config", h.configPath, "--signed-in", "tcp://127.0.0.1:\(try freeLoopbackPort())",
                "--signed-out", "tcp://127.0.0.1:\(try freeLoopbackPort())",
            ], waitForLine: "paypipe-streamer ready")
        let streamer = LedgerAddresses.printed(in: streamerReady ?? "")
        let both = { (name: String) in "\(a[name]!),\(b[name]!)" }
        let signedIn = "\(a["signedIn"]!),\(streamer["signedIn"]!)", signedOut = "\(a["signedOut"]!),\(streamer["signedOut"]!)"
        for _ in 0..<2 {
            _ = try h.spawn(
                "paypipe-signer",
                ["--config", h.configPath, "--sign-queue", both("signQueue"), "--signed-in", signedIn, "--results", both("results")],
                waitForLine: nil)
            _ = try h.spawn(
                "paypipe-submitter",
                ["--config", h.configPath, "--signed-out", signedOut, "--results", both("results"), "--ledger-rpc", both("ledgerRPC")],
                waitForLine: nil)
        }
        _ = try h.spawn(
            "paypipe-callbacks", ["--config", h.configPath, "--ledger-rpc", both("ledgerRPC")], waitForLine: "paypipe-callbacks listening")

        // Upstream: a PUSH to each ledger's intake, and a live consumer on each ledger's outcomes.
        let toB = try ZMQSender(
            socket: try {
                let s = try h.context.socket(.push)
                try s.connect(b["intake"]!)
                return s
            }())
        let fromB = try ZMQReceiver(
            socket: try {
                let s = try h.context.socket(.pull)
                try s.connect(b["outcomes"]!)
                return s
            }())
        let streamA = Stream(), streamB = Stream()

        try await h.send(
            #"{"v":1,"orderId":"chaos-sub","provider":"nets","operation":"createSubscription","amount":9900,"currency":"SEK","params":{"endDate":"2030-12-31T23:59:59+01:00","interval":30,"reference":"chaos-sub"}}"#
        )
        let created = try await h.collect { $0.contains { $0.orderId == "chaos-sub" } }
        let paymentId = try #require(created.first { $0.orderId == "chaos-sub" }?.result?["paymentId"]?.stringValue)
        try await Task.sleep(for: .milliseconds(300))
        try await toB.send(
            Array(#"{"v":1,"orderId":"chaos-sub-get","provider":"nets","operation":"getSubscription","params":{"paymentId":"\#(paymentId)"}}"#.utf8))
        var subscriptionId: String?
        let clock = ContinuousClock()
        let setupDeadline = clock.now + .seconds(30)
        while subscriptionId == nil, clock.now < setupDeadline {
            for message in try await fromB.nextBatch(timeoutMilliseconds: 200) ?? [] {
                streamB.take(message.body)
                if let outcome = try? Outcome.parse(message.body), outcome.orderId == "chaos-sub-get" {
                    subscriptionId = outcome.result?["subscriptionId"]?.stringValue
                }
            }
        }
        let subscription = try #require(subscriptionId)

        let total = 300
        let upstream = ChaosTests.Upstream()
        var lastSent: [Int: ContinuousClock.Instant] = [:]
        var aAlive = true
        let started = clock.now
        let deadline = started + .seconds(150)
        var sent = 0
        while clock.now < deadline, upstream.ended.count < total {
            let now = clock.now
            // Orders at either ledger in turn, then at B alone once A is gone.
            let due = min(total, Int(100 * ChaosTests.seconds(now - started)) + 1)
            while sent < due {
                let order = ChaosTests.order(sent, subscriptionId: subscription)
                if aAlive && sent % 2 == 0 { try await h.send(order) } else { try await toB.send(Array(order.utf8)) }
                lastSent[sent] = now
                sent += 1
            }
            if aAlive, sent >= total / 2 {
                h.ledgerProcess.signal(SIGKILL)
                aAlive = false
            }
            // At-least-once: what has not ended after a while goes again, to a live ledger.
            for (i, at) in lastSent where now - at > .seconds(8) && upstream.ended["chaos-\(i)"] == nil {
                try await toB.send(Array(ChaosTests.order(i, subscriptionId: subscription).utf8))
                lastSent[i] = now
            }
            if aAlive || !(streamA.seqs.isEmpty) {
                for message in try await h.receiver.nextBatch(timeoutMilliseconds: 20) ?? [] {
                    streamA.take(message.body)
                    upstream.take(message.body, now: clock.now)
                }
            }
            for message in try await fromB.nextBatch(timeoutMilliseconds: 20) ?? [] {
                streamB.take(message.body)
                upstream.take(message.body, now: clock.now)
            }
        }

        // The log, replayed from the surviving ledger: every seq from 1 on, none missing.
        let log = try await replayWholeLog(context: h.context, endpoint: b["outcomesReplay"]!, pageTimeoutMilliseconds: 5000)
        for entry in log { upstream.take(entry.bytes, now: clock.now) }
        // B's live push may still trail the log it was just replayed from (its push lag on a
        // busy machine): it is read on until it has caught up, within a bound.
        let catchUp = clock.now + .seconds(20)
        while streamB.seqs.count < log.count - 10, clock.now < catchUp {
            for message in try await fromB.nextBatch(timeoutMilliseconds: 200) ?? [] { streamB.take(message.body) }
        }

        let ids = (0..<total).map { "chaos-\($0)" }
        let unended = ids.filter { upstream.ended[$0] == nil }
        let differing = ids.filter { Set(upstream.ended[$0] ?? []).count > 1 }
        let arrivals = counting.arrivals.withLock { $0 }
        let repeatedEffects = arrivals.filter { !$0.key.hasPrefix("nets:") && $0.value > 1 }
        let netsEffectsTwice = arrivals.keys.filter { $0.hasPrefix("nets:") && h.sandbox.ledger.effects($0) > 1 }
        print(
            "fleet: orders=\(total) unended=\(unended.count) differing=\(differing.count) effectsTwice=\(repeatedEffects.count) "
                + "netsEffectsTwice=\(netsEffectsTwice.count) log=\(log.count) liveA=\(streamA.seqs.count) liveB=\(streamB.seqs.count)")
        #expect(unended.isEmpty, "orders without an end: \(unended.prefix(10))")
        #expect(differing.isEmpty, "orders whose copies differ: \(differing.prefix(10))")
        #expect(repeatedEffects.isEmpty, "effects requested twice: \(repeatedEffects.prefix(10))")
        #expect(netsEffectsTwice.isEmpty)
        #expect(log.map(\.seq) == Array(1...Int64(max(log.count, 1))).prefix(log.count).map { $0 }, "the log has a gap")
        // Each live stream follows the log: seqs only rise, and each is the log's entry.
        let byLogSeq = Dictionary(log.map { ($0.seq, $0.bytes) }, uniquingKeysWith: { first, _ in first })
        for (name, stream) in [("A", streamA), ("B", streamB)] {
            #expect(zip(stream.seqs, stream.seqs.dropFirst()).allSatisfy { $0 < $1 }, "ledger \(name)'s live outcomes went back in seq")
            #expect(stream.bytes.allSatisfy { byLogSeq[$0.key] == $0.value }, "ledger \(name) pushed an outcome unlike the log's")
        }
        // Seqs are handed out one transaction at a time: no ledger ever tried to log a seq
        // another had taken (which the log's key would refuse, and the ledger retry).
        let ledgerLogs = (try FileManager.default.contentsOfDirectory(atPath: h.directory.path)).filter {
            $0.hasPrefix("paypipe-ledger") && $0.hasSuffix(".stderr")
        }
        for name in ledgerLogs {
            let text = (try? String(contentsOfFile: h.directory.appendingPathComponent(name).path, encoding: .utf8)) ?? ""
            #expect(!text.contains("outcome_log_pkey"), "\(name) tried to log a seq another ledger had taken")
        }
        // B pushed, live, what A decided too: the whole log from when it started.
        #expect(streamB.seqs.count >= log.count - 10, "ledger B's live stream missed outcomes: \(streamB.seqs.count) of \(log.count)")
        _ = await toB.finish(drainTimeoutMilliseconds: 100)
        fromB.stop()
    }
}

import Foundation
import NetsEasy
import PaypipeCore
import Sandbox
import StageRuntime
import StageWire
import TestSupport
import Testing

@testable import NetsEasyEmulation
@testable import PhonePeEmulation

/// Real processes, real sockets, the real sandbox server on loopback. Serialized: each test
/// starts its own pipeline and they share two cores.
@Suite("End to end through real processes", .serialized)
struct EndToEndTests {
    @Test func everyProviderAndOperationEndsInTheRightOutcome() async throws {
        let h = try await PipelineHarness()
        defer { Task { await h.shutdown() } }
        try h.startSigner()
        try h.startSubmitter()
        let lines = try String(contentsOfFile: examplesPath(), encoding: .utf8).split(separator: "\n").map(String.init)
        for line in lines { try await h.send(line) }
        let outcomes = try await h.collect { $0.count >= lines.count }
        let byId = Dictionary(outcomes.map { ($0.orderId, $0) }, uniquingKeysWith: { first, _ in first })
        let expected: [String: Outcome.Status] = [
            "demo-tp-jwt-1": .pending, "demo-tp-query-1": .succeeded, "demo-tp-update-1": .succeeded,
            "demo-nets-create-1": .pending, "demo-nets-get-1": .failed, "demo-phonepe-1": .pending,
            "demo-cleeng-1": .pending, "demo-viva-1": .pending, "demo-rejected-1": .rejected,
            "demo-nets-charge-1": .failed,  // the sandbox knows no such subscription
        ]
        for (id, status) in expected {
            #expect(byId[id]?.status == status, "\(id): \(byId[id].map { "\($0.status) \($0.error?.code ?? "")" } ?? "no outcome")")
        }
        #expect(byId["demo-tp-jwt-1"]?.result?["jwt"]?.stringValue?.split(separator: ".").count == 3)
        #expect(byId["demo-viva-1"]?.result?["url"]?.stringValue?.hasPrefix("vivapayclient://pay/v1?") == true)
        #expect(byId["demo-phonepe-1"]?.result?["redirectURL"]?.stringValue?.hasPrefix("ppe://") == true)
        #expect(byId["demo-nets-create-1"]?.result?["paymentId"] != nil)
        #expect(byId["demo-nets-get-1"]?.error?.code == "NETS_NOT_FOUND")
        #expect(byId["demo-rejected-1"]?.error?.code == "AMOUNT_NOT_INTEGER")
        // Ledger metrics are served and count what went through.
        await h.shutdown()
    }

    @Test func theSameOrderSentTwiceReachesTheProviderOnce() async throws {
        let h = try await PipelineHarness()
        defer { Task { await h.shutdown() } }
        try h.startSigner()
        try h.startSubmitter()
        let order =
            #"{"v":1,"orderId":"twice-1","provider":"phonepe","operation":"authInit","amount":39900,"currency":"INR","params":{"merchantUserId":"U1","subscriptionId":"SUB1"}}"#
        try await h.send(order)
        let first = try await h.collect { $0.contains { $0.orderId == "twice-1" } }
        try await h.send(order)
        try await h.send(order)
        let again = try await h.collect(timeout: .seconds(10)) { $0.filter { $0.orderId == "twice-1" }.count >= 2 }
        #expect(first.count == 1)
        #expect(again.count == 2)
        #expect(again.allSatisfy { $0 == first[0] })  // identical copies
        let authRequestId = try #require(first.first?.result?["authRequestId"]?.stringValue)
        #expect(h.sandbox.ledger.requests("phonepe:\(authRequestId)") == 1)
        #expect(h.sandbox.ledger.effects("phonepe:\(authRequestId)") == 1)
        await h.shutdown()
    }

    @Test func netsSubscriptionIsCreatedFetchedAndChargedExactlyOnce() async throws {
        let h = try await PipelineHarness(
            sandboxConfiguration: SandboxConfiguration(port: 0).with {
                $0.phonePe.callbackDelayMilliseconds = 3_600_000
                $0.nets.completeCheckoutAfterMilliseconds = 50
            })
        defer { Task { await h.shutdown() } }
        try h.startSigner()
        try h.startSubmitter()
        try await h.send(
            #"{"v":1,"orderId":"nets-c","provider":"nets","operation":"createSubscription","amount":9900,"currency":"SEK","params":{"endDate":"2030-12-31T23:59:59-03:30","interval":30,"reference":"sub-c"}}"#
        )
        let created = try await h.collect { $0.contains { $0.orderId == "nets-c" } }
        let paymentId = try #require(created.first?.result?["paymentId"]?.stringValue)
        #expect(created.first?.status == .pending)
        // The customer completes the hosted page a moment later (the sandbox, on its own timer,
        // which a busy machine can delay): read until the payment has its subscription.
        var fetched: [Outcome] = []
        for attempt in 1...20 {
            try await Task.sleep(for: .milliseconds(300))
            let id = "nets-g-\(attempt)"
            try await h.send(#"{"v":1,"orderId":"\#(id)","provider":"nets","operation":"getSubscription","params":{"paymentId":"\#(paymentId)"}}"#)
            fetched = try await h.collect { $0.contains { $0.orderId == id } }.filter { $0.orderId == id }
            if fetched.first?.error?.code != "NETS_SUBSCRIPTION_NOT_FOUND" { break }
        }
        #expect(fetched.first?.status == .succeeded, "\(fetched)")
        let subscriptionId = try #require(fetched.first?.result?["subscriptionId"]?.stringValue)
        let charge =
            #"{"v":1,"orderId":"nets-charge","provider":"nets","operation":"chargeSubscription","amount":9900,"currency":"SEK","params":{"subscriptionId":"\#(subscriptionId)","reference":"charge-1"}}"#
        try await h.send(charge)
        let charged = try await h.collect { $0.contains { $0.orderId == "nets-charge" } }
        #expect(charged.first?.status == .succeeded, "\(charged)")
        #expect(charged.first?.result?["chargeId"] != nil)
        try await h.send(charge)
        let again = try await h.collect(timeout: .seconds(10)) { $0.contains { $0.orderId == "nets-charge" } }
        #expect(again.first == charged.first)
        let key = NetsPayments.idempotencyKey(for: OrderKey(merchant: "default", orderId: "nets-charge"))
        #expect(h.sandbox.ledger.requests("nets:\(key)") == 1)
        #expect(h.sandbox.ledger.effects("nets:\(key)") == 1)
        await h.shutdown()
    }

    @Test func malformedFramesAndBadInputLeaveThePipelineServing() async throws {
        let h = try await PipelineHarness()
        defer { Task { await h.shutdown() } }
        try h.startSigner()
        try h.startSubmitter()
        let bad: [[UInt8]] = [
            Array("not json".utf8), [0xFF, 0xFE, 0x00], Array(repeating: UInt8(ascii: " "), count: 70_000), Array("[1,2,3]".utf8),
            Array(#"{"v":2,"orderId":"b-v","provider":"viva","operation":"sale","amount":1,"currency":"EUR","params":{}}"#.utf8),
            Array(#"{"v":1,"orderId":"b id","provider":"viva","operation":"sale","amount":1,"currency":"EUR","params":{}}"#.utf8),
            Array(#"{"v":1,"orderId":"b-prov","provider":"paypal","operation":"sale","amount":1,"currency":"EUR","params":{}}"#.utf8),
            Array(#"{"v":1,"orderId":"b-op","provider":"viva","operation":"capture","amount":1,"currency":"EUR","params":{}}"#.utf8),
            Array(#"{"v":1,"orderId":"b-neg","provider":"viva","operation":"sale","amount":-1,"currency":"EUR","params":{}}"#.utf8),
            Array(#"{"v":1,"orderId":"b-frac","provider":"viva","operation":"sale","amount":1.5,"currency":"EUR","params":{}}"#.utf8),
            Array(#"{"v":1,"orderId":"b-cur","provider":"viva","operation":"sale","amount":1,"currency":"euro","params":{}}"#.utf8),
            Array(#"{"v":1,"orderId":"b-param","provider":"phonepe","operation":"authInit","amount":1,"currency":"INR","params":{}}"#.utf8),
            Array(
                #"{"v":1,"orderId":"b-merch","merchant":"ghost","provider":"viva","operation":"sale","amount":1,"currency":"EUR","params":{}}"#.utf8),
            Array(
                #"{"v":1,"orderId":"b-inject","provider":"nets","operation":"getSubscription","params":{"paymentId":"../../v1/payments?x=1"}}"#.utf8),
        ]
        for frame in bad { try await h.send(bytes: frame) }
        let good = #"{"v":1,"orderId":"good-after-bad","provider":"viva","operation":"sale","amount":1050,"currency":"EUR","params":{}}"#
        try await h.send(good)
        let outcomes = try await h.collect { $0.contains { $0.orderId == "good-after-bad" } && $0.count >= 11 }
        let codes = Dictionary(outcomes.map { ($0.orderId, $0.error?.code ?? $0.status.rawValue) }, uniquingKeysWith: { a, _ in a })
        #expect(codes["good-after-bad"] == "pending")
        #expect(codes["b-v"] == "UNSUPPORTED_VERSION")
        #expect(codes["b id"] == "INVALID_ORDER_ID")
        #expect(codes["b-prov"] == "UNKNOWN_PROVIDER")
        #expect(codes["b-op"] == "UNKNOWN_OPERATION")
        #expect(codes["b-neg"] == "AMOUNT_NOT_POSITIVE")
        #expect(codes["b-frac"] == "AMOUNT_NOT_INTEGER")
        #expect(codes["b-cur"] == "INVALID_CURRENCY")
        #expect(codes["b-param"] == "MISSING_PARAM")
        #expect(codes["b-merch"] == "UNKNOWN_MERCHANT")
        #expect(codes["b-inject"] == "INVALID_PARAM")
        #expect(outcomes.filter { $0.orderId == "good-after-bad" }.count == 1)
        // The four unparseable frames were counted, not answered.
        let metrics = try #require(ledgerMetrics(h))
        #expect(metrics.contains("paypipe_frames_dropped_total"))
        await h.shutdown()
    }

    @Test func aSecondSubmitterStartedMidRunTakesAShare() async throws {
        let h = try await PipelineHarness(
            sandboxConfiguration: SandboxConfiguration(port: 0, latencyMilliseconds: 100).with { $0.phonePe.callbackDelayMilliseconds = 3_600_000 })
        defer { Task { await h.shutdown() } }
        try h.startSigner()
        let first = try h.startSubmitter(concurrency: 4)
        // Enough orders that the buffers between the ledger and the first copy (HWMs, kernel
        // socket buffers, its receive buffer) cannot hold them all.
        let total = 600
        for i in 0..<total {
            try await h.send(
                #"{"v":1,"orderId":"share-\#(i)","provider":"phonepe","operation":"authInit","amount":39900,"currency":"INR","params":{"merchantUserId":"U1","subscriptionId":"SUB1"}}"#
            )
        }
        // With 4 in flight and 100 ms per request the first copy alone would need ~15 s.
        // The first read takes whole batches: at least 8, maybe more.
        let early = try await h.collect(timeout: .seconds(10)) { $0.count >= 8 }
        let second = try h.startSubmitter(concurrency: 4)
        let rest = try await h.collect(timeout: .seconds(60)) { $0.count >= total - early.count }
        #expect(rest.count >= total - early.count)
        let firstCount = submitted(h, first)
        let secondCount = submitted(h, second)
        #expect(secondCount > 50, "second submitter handled \(secondCount), first \(firstCount)")
        #expect(firstCount + secondCount == total)
        await h.shutdown()
    }
}

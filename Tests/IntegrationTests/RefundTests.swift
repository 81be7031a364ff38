import Foundation
import Glibc
import PaypipeCore
import PhonePe
import Sandbox
import StageRuntime
import Supervision
import TestSupport
import Testing
import TrustPayments

@testable import VivaEmulation

/// Refunds of Trust Payments, PhonePe and Viva payments through real processes: the original
/// paid at the sandbox, a part of it refunded, one refund too many rejected by the ledger before
/// anything reaches the sandbox, and a refund order sent twice refunded once. The sandbox's
/// ledger (what it received, under each refund's own key) is the measure.
@Suite("Refunds through real processes", .serialized)
struct RefundTests {
    typealias Stream = NetsMoneyTests.Stream

    /// Every refund request the sandbox received whose ledger key starts with `prefix`.
    static func refundRequests(_ h: PipelineHarness, prefix: String) -> Int64 {
        let requests = h.sandbox.ledger.document()["requests"]?.objectValue ?? [:]
        return requests.filter { $0.key.hasPrefix(prefix) }.values.reduce(0) { $0 + ($1.integerValue ?? 0) }
    }

    static func refundOrder(_ id: String, provider: String, amount: Int64, currency: String, params: String) -> String {
        #"{"v":1,"orderId":"\#(id)","provider":"\#(provider)","operation":"refund","amount":\#(amount),"currency":"\#(currency)","params":{\#(params)}}"#
    }

    /// Signer, submitter and callback validator started; the live stream read from here on.
    static func startStages(_ h: PipelineHarness) throws -> Stream {
        try h.startSigner()
        try h.startSubmitter()
        try h.startCallbacks()
        return Stream(h)
    }

    // MARK: - Trust Payments

    static func trustPaymentsRefund(_ id: String, of original: String, reference: String, amount: Int64) -> String {
        refundOrder(
            id, provider: "trustpayments", amount: amount, currency: "GBP",
            params: #""refundOf":"\#(original)","transactionReference":"\#(reference)""#)
    }

    /// How many REFUND requests the sandbox got from the refund order `orderId`.
    static func trustPaymentsRequests(_ h: PipelineHarness, orderId: String) -> Int {
        h.sandbox.ledger.requests("trustpayments:" + TPWebServices.requestReference(for: OrderKey(merchant: "default", orderId: orderId)))
    }

    /// A `subscriptionJwt` of 1050 paid in the sandbox and its first AUTH settled: the AUTH's
    /// transactionReference.
    static func paidTrustPayments(_ h: PipelineHarness, _ stream: Stream, orderId: String) async throws -> String {
        try await h.send(
            #"{"v":1,"orderId":"\#(orderId)","provider":"trustpayments","operation":"subscriptionJwt","amount":1050,"currency":"GBP","params":{"subscriptionType":"RECURRING","unit":"MONTH","frequency":1,"finalNumber":12}}"#
        )
        let messages = try await stream.until("\(orderId) pending with its JWT") { messages in
            messages.contains { $0["orderId"]?.stringValue == orderId && $0["status"] == "pending" }
        }
        let jwt = try #require(messages.first { $0["orderId"]?.stringValue == orderId && $0["status"] == "pending" }?["result"]?["jwt"]?.stringValue)
        let paid = try #require(await h.sandboxPost("/trustpayments/sdk/payment", ["jwt": .string(jwt)]))
        let form = try #require(try JSONValue.parse(Array(paid.1.utf8))["notification"]?.stringValue)
        let notified = await h.postCallback(
            "/callbacks/trustpayments/notification", headers: [("Content-Type", "application/x-www-form-urlencoded")], body: Array(form.utf8))
        #expect(notified?.0 == 200)
        let succeeded = try await stream.final(orderId)
        #expect(succeeded["status"] == "succeeded", "\(succeeded.serialized)")
        // Trust Payments refunds only a settled AUTH; the sandbox's engine settles it as its clock moves.
        #expect(await h.sandboxPost("/_sandbox/clock", ["advanceMs": 1000])?.0 == 200)
        return try #require(succeeded["result"]?["transactionReference"]?.stringValue)
    }

    @Test func trustPaymentsRefundsStayWithinTheAUTHAndAreSentOnce() async throws {
        let h = try await PipelineHarness()
        defer { Task { await h.shutdown() } }
        let stream = try Self.startStages(h)
        let reference = try await Self.paidTrustPayments(h, stream, orderId: "tp-paid")

        try await h.send(Self.trustPaymentsRefund("tp-refund-1", of: "tp-paid", reference: reference, amount: 400))
        let first = try await stream.final("tp-refund-1")
        #expect(first["status"] == "succeeded" && first["result"]?["parentTransactionReference"]?.stringValue == reference, "\(first.serialized)")

        let made = h.sandbox.ledger.document()["effects"]?.objectValue?.keys.filter { $0.hasPrefix("trustpayments:refund:") }.count
        try await h.send(Self.trustPaymentsRefund("tp-refund-2", of: "tp-paid", reference: reference, amount: 651))
        let over = try await stream.final("tp-refund-2")
        #expect(over["status"] == "rejected" && over["error"]?["code"] == "REFUND_EXCEEDS_CAPTURED", "\(over.serialized)")
        #expect(Self.trustPaymentsRequests(h, orderId: "tp-refund-2") == 0, "a rejected refund is never sent")

        try await h.send(Self.trustPaymentsRefund("tp-refund-1", of: "tp-paid", reference: reference, amount: 400))
        try await stream.until("tp-refund-1 answered again") { $0.filter { Stream.isFinal($0, "tp-refund-1") }.count >= 2 }
        // The rest of the AUTH is still refundable, and a refund order ends after the repeat.
        try await h.send(Self.trustPaymentsRefund("tp-refund-3", of: "tp-paid", reference: reference, amount: 650))
        #expect(try await stream.final("tp-refund-3")["status"] == "succeeded")
        #expect(Self.trustPaymentsRequests(h, orderId: "tp-refund-1") == 1, "the repeated refund order was not sent again")
        let refunds = h.sandbox.ledger.document()["effects"]?.objectValue?.keys.filter { $0.hasPrefix("trustpayments:refund:") }.count
        #expect(made == 1 && refunds == 2, "refunds made at the sandbox: \(String(describing: made)), then \(String(describing: refunds))")
        await h.shutdown()
    }

    /// A payment Trust Payments' engine took by itself (a renewal, reported only by its
    /// notification) is refunded through the order that opened the subscription, within what
    /// the renewal took, and reported on the subscription.
    @Test func trustPaymentsEngineRenewalIsRefundedThroughTheFirstOrderWithinItsAmount() async throws {
        let h = try await PipelineHarness()
        defer { Task { await h.shutdown() } }
        let stream = try Self.startStages(h)
        let first = try await Self.paidTrustPayments(h, stream, orderId: "tp-renewed")
        // A month on, the engine takes payment 2.
        #expect(await h.sandboxPost("/_sandbox/clock", ["advanceDays": 31])?.0 == 200)
        let renewed = try await stream.until("payment 2 reported") { messages in
            messages.contains { $0["kind"] == "event" && $0["type"] == "renewal.succeeded" }
        }
        let renewal = try #require(renewed.first { $0["kind"] == "event" && $0["type"] == "renewal.succeeded" }?["providerReference"]?.stringValue)
        #expect(renewal != first)

        try await h.send(Self.trustPaymentsRefund("tp-renewal-refund-1", of: "tp-renewed", reference: renewal, amount: 1000))
        let refunded = try await stream.final("tp-renewal-refund-1")
        #expect(
            refunded["status"] == "succeeded" && refunded["result"]?["parentTransactionReference"]?.stringValue == renewal, "\(refunded.serialized)")
        try await stream.until("refund.succeeded on the subscription") { messages in
            messages.contains { $0["kind"] == "event" && $0["type"] == "refund.succeeded" && $0["providerReference"] == "tp-renewal-refund-1" }
        }
        // What is left of the renewal is 50; the first AUTH's own 1050 is counted apart.
        try await h.send(Self.trustPaymentsRefund("tp-renewal-refund-2", of: "tp-renewed", reference: renewal, amount: 51))
        let over = try await stream.final("tp-renewal-refund-2")
        #expect(over["status"] == "rejected" && over["error"]?["code"] == "REFUND_EXCEEDS_CAPTURED", "\(over.serialized)")
        #expect(Self.trustPaymentsRequests(h, orderId: "tp-renewal-refund-2") == 0, "a rejected refund is never sent")
        try await h.send(Self.trustPaymentsRefund("tp-first-refund", of: "tp-renewed", reference: first, amount: 1050))
        #expect(try await stream.final("tp-first-refund")["status"] == "succeeded")
        // A reference that is neither the first AUTH nor a renewal is no capture of the order.
        try await h.send(Self.trustPaymentsRefund("tp-stranger-refund", of: "tp-renewed", reference: "57-9-12345678", amount: 1))
        let stranger = try await stream.final("tp-stranger-refund")
        #expect(stranger["status"] == "rejected" && stranger["error"]?["code"] == "REFUND_CAPTURE_UNKNOWN", "\(stranger.serialized)")
        await h.shutdown()
    }

    // MARK: - PhonePe

    static func phonePeRefund(_ id: String, of original: String, transactionId: String, amount: Int64) -> String {
        refundOrder(
            id, provider: "phonepe", amount: amount, currency: "INR",
            params: #""refundOf":"\#(original)","originalTransactionId":"\#(transactionId)""#)
    }

    @Test func phonePeRefundsOfAScheduledDebitStayWithinItAndAreSentOnce() async throws {
        let h = try await ScheduleTests.harness()
        defer { Task { await h.shutdown() } }
        try h.startSigner()
        try h.startSubmitter()
        try h.startCallbacks()
        var year = ScheduleTests.Year(h, nets: 0, phonePe: 1, months: 1)
        try await year.create()
        let cycle1 = year.attempt(0, cycle: 1, attempt: 1)
        try await year.advance(to: PhonePeMandateTests.due(year, 1) - PhonePeMandateTests.day + PhonePeMandateTests.hour)
        try await year.waitFor([cycle1.orderId(step: 0)])
        try await year.advance(to: PhonePeMandateTests.due(year, 1) + PhonePeMandateTests.hour)
        let debit = cycle1.orderId(step: 1)
        try await year.waitFor([debit])
        #expect(year.finals[debit] == "succeeded", "\(year.finals)")
        let log = try await replayWholeLog(context: h.context, endpoint: h.ledgerEndpoints["outcomesReplay"]!).compactMap {
            try? JSONValue.parse($0.bytes)
        }
        let debited = try #require(log.last { $0["orderId"]?.stringValue == debit && $0["status"] == "succeeded" })
        let transactionId = debited["result"]?["transactionId"]?.stringValue ?? cycle1.attemptReference
        let stream = Stream(h)

        try await h.send(Self.phonePeRefund("pp-refund-1", of: debit, transactionId: transactionId, amount: 10000))
        let first = try await stream.final("pp-refund-1")
        #expect(first["status"] == "succeeded" && first["result"]?["originalTransactionId"]?.stringValue == transactionId, "\(first.serialized)")

        let before = Self.refundRequests(h, prefix: "phonepe:refund:")
        try await h.send(Self.phonePeRefund("pp-refund-2", of: debit, transactionId: transactionId, amount: 29901))
        let over = try await stream.final("pp-refund-2")
        #expect(over["status"] == "rejected" && over["error"]?["code"] == "REFUND_EXCEEDS_CAPTURED", "\(over.serialized)")
        #expect(Self.refundRequests(h, prefix: "phonepe:refund:") == before, "a rejected refund is never sent")

        try await h.send(Self.phonePeRefund("pp-refund-1", of: debit, transactionId: transactionId, amount: 10000))
        try await stream.until("pp-refund-1 answered again") { $0.filter { Stream.isFinal($0, "pp-refund-1") }.count >= 2 }
        try await h.send(Self.phonePeRefund("pp-refund-3", of: debit, transactionId: transactionId, amount: 29900))
        #expect(try await stream.final("pp-refund-3")["status"] == "succeeded")
        let refundId = PhonePeRefund.transactionId(for: OrderKey(merchant: "default", orderId: "pp-refund-1"))
        #expect(h.sandbox.ledger.requests("phonepe:refund:" + refundId) == 1, "the repeated refund order was not sent again")
        #expect(Self.refundRequests(h, prefix: "phonepe:refund:") == 2)
        await h.shutdown()
    }

    // MARK: - Viva

    static func vivaRefund(_ id: String, of original: String, transactionId: String, amount: Int64) -> String {
        refundOrder(id, provider: "viva", amount: amount, currency: "EUR", params: #""refundOf":"\#(original)","transactionId":"\#(transactionId)""#)
    }

    @Test func vivaRefundsOfAForwardedSaleStayWithinItAndAreSentOnce() async throws {
        let h = try await PipelineHarness()
        defer { Task { await h.shutdown() } }
        let stream = try Self.startStages(h)
        try await h.send(AsyncFlowTests.vivaOrder("viva-paid"))
        let messages = try await stream.until("viva-paid pending with its URL") { messages in
            messages.contains { $0["orderId"]?.stringValue == "viva-paid" && $0["status"] == "pending" }
        }
        let url = try #require(
            messages.first { $0["orderId"]?.stringValue == "viva-paid" && $0["status"] == "pending" }?["result"]?["url"]?.stringValue)
        let paid = try #require(await AsyncFlowTests.pay(h, try VivaSandbox.readSale(url)))
        #expect(await h.postCallback("/callbacks/viva", body: AsyncFlowTests.forwardBody("viva-paid", uri: paid))?.0 == 200)
        let sale = try await stream.final("viva-paid")
        #expect(sale["status"] == "succeeded", "\(sale.serialized)")
        let transactionId = try #require(sale["result"]?["transactionId"]?.stringValue, "\(sale.serialized)")
        let captured = sale["result"]?["amount"]?.integerValue ?? 1050

        try await h.send(Self.vivaRefund("viva-refund-1", of: "viva-paid", transactionId: transactionId, amount: 300))
        let first = try await stream.final("viva-refund-1")
        #expect(first["status"] == "succeeded" && first["result"]?["parentTransactionId"]?.stringValue == transactionId, "\(first.serialized)")
        // Every refund of the sale is counted under the sale's transactionId.
        let key = "viva:refund:" + transactionId
        #expect(h.sandbox.ledger.requests(key) == 1)

        try await h.send(Self.vivaRefund("viva-refund-2", of: "viva-paid", transactionId: transactionId, amount: captured - 299))
        let over = try await stream.final("viva-refund-2")
        #expect(over["status"] == "rejected" && over["error"]?["code"] == "REFUND_EXCEEDS_CAPTURED", "\(over.serialized)")
        #expect(h.sandbox.ledger.requests(key) == 1, "a rejected refund is never sent")

        try await h.send(Self.vivaRefund("viva-refund-1", of: "viva-paid", transactionId: transactionId, amount: 300))
        try await stream.until("viva-refund-1 answered again") { $0.filter { Stream.isFinal($0, "viva-refund-1") }.count >= 2 }
        try await h.send(Self.vivaRefund("viva-refund-3", of: "viva-paid", transactionId: transactionId, amount: captured - 300))
        #expect(try await stream.final("viva-refund-3")["status"] == "succeeded")
        #expect(h.sandbox.ledger.requests(key) == 2, "the repeated refund order was not sent again")
        await h.shutdown()
    }

    // MARK: - kill -9

    /// A Trust Payments REFUND in flight at the sandbox (its answer held back) when the submitter
    /// is killed with -9 and started again: the order ends succeeded and the sandbox made one
    /// refund, whatever was sent again.
    @Test func killingTheSubmitterMidRefundRefundsOnce() async throws {
        let h = try await PipelineHarness(
            sandboxConfiguration: SandboxConfiguration(port: 0, latencyMilliseconds: 1500).with { $0.phonePe.callbackDelayMilliseconds = 3_600_000 },
            timers: ["httpRequestTimeoutMs": 2500, "leaseMs": 4000], redeliverAfterMilliseconds: 3000)
        defer { Task { await h.shutdown() } }
        try h.startSigner()
        var submitter = try h.startSubmitter()
        try h.startCallbacks()
        let stream = Stream(h)
        let reference = try await Self.paidTrustPayments(h, stream, orderId: "tp-kill-paid")

        try await h.send(Self.trustPaymentsRefund("tp-kill-refund", of: "tp-kill-paid", reference: reference, amount: 500))
        let sent = await eventually(within: .seconds(60)) { Self.trustPaymentsRequests(h, orderId: "tp-kill-refund") >= 1 }
        try #require(sent, "the refund reached the sandbox")
        submitter.signal(SIGKILL)
        _ = await eventually(within: .seconds(10)) { !submitter.isRunning }
        submitter = try h.startSubmitter()

        let refund = try await stream.final("tp-kill-refund", timeout: .seconds(120))
        #expect(refund["status"] == "succeeded", "\(refund.serialized)")
        let made = h.sandbox.ledger.document()["effects"]?.objectValue?.keys.filter { $0.hasPrefix("trustpayments:refund:") } ?? []
        #expect(made.count == 1, "one refund at the sandbox: \(made)")
        print("refund kill test: REFUND requests \(Self.trustPaymentsRequests(h, orderId: "tp-kill-refund")), refunds made \(made.count)")
        await h.shutdown()
    }
}

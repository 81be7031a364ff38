import Foundation
import Glibc
import NetsEasy
import PaypipeCore
import Sandbox
import StageRuntime
import Supervision
import TestSupport
import Testing

/// A Nets subscription's money through real processes: its first payment charged (by paypipe,
/// or by Nets at checkout), refunds of it checked by the ledger and served by the sandbox, and
/// both made exactly once across kill -9 of the submitter and of the ledger. The sandbox's own
/// record of each subscription (`totals`) is the measure.
@Suite("Nets first payments and refunds through real processes", .serialized)
struct NetsMoneyTests {
    /// Everything the live stream sent so far, read on until a condition holds.
    final class Stream {
        let h: PipelineHarness
        var messages: [JSONValue] = []

        init(_ h: PipelineHarness) { self.h = h }

        /// The messages so far once `done` holds of them; fails after `timeout`.
        @discardableResult
        func until(timeout: Duration = .seconds(60), _ what: String, _ done: ([JSONValue]) -> Bool) async throws -> [JSONValue] {
            if !done(messages) {
                let seen = messages
                let more = try await h.collectMessages(timeout: timeout) { done(seen + $0) }
                messages += more
            }
            try #require(done(messages), "\(what): \(messages.suffix(8).map { $0.serialized.prefix(400) })")
            return messages
        }

        /// The final outcome (`succeeded`, `failed`, `rejected`) of `orderId`, once it came.
        func final(_ orderId: String, timeout: Duration = .seconds(60)) async throws -> JSONValue {
            let all = try await until(timeout: timeout, "a final outcome of \(orderId)") { messages in
                messages.contains { Self.isFinal($0, orderId) }
            }
            return try #require(all.last { Self.isFinal($0, orderId) })
        }

        static func isFinal(_ message: JSONValue, _ orderId: String) -> Bool {
            message["orderId"]?.stringValue == orderId && ["succeeded", "failed", "rejected"].contains(message["status"]?.stringValue)
        }

        /// The outcomes of `orderId` so far.
        func outcomes(_ orderId: String) -> [JSONValue] { messages.filter { $0["orderId"]?.stringValue == orderId } }
    }

    /// A merchant that lets Nets charge the first payment at checkout; its own webhook secret,
    /// so that its webhooks are told from the demo merchant's.
    static let checkoutMerchant: JSONValue = [
        "nets": [
            "baseURL": .string(PipelineHarness.sandboxPlaceholder + "/nets"), "secretKey": "demo-nets-secret-key",
            "webhookAuthorization": "checkoutWebhookAuth1",
            "firstPayment": "checkout",
        ]
    ]

    static func harness(latency: Int = 0, checkoutMerchant: Bool = false) async throws -> PipelineHarness {
        var extra: [String: JSONValue] = [:]
        if checkoutMerchant { extra["zcheckout"] = Self.checkoutMerchant }
        return try await PipelineHarness(
            sandboxConfiguration: SandboxConfiguration(port: 0, latencyMilliseconds: latency, outboundAttempts: 12).with {
                $0.nets.completeCheckoutAfterMilliseconds = 50
            },
            // A pending refund is read again this long after; each read must have ended by then.
            timers: ["pendingResolveAfterMs": 300 + 3 * Int64(latency), "httpRequestTimeoutMs": 2500, "leaseMs": 4000], extraMerchants: extra,
            redeliverAfterMilliseconds: 3000)
    }

    static func createOrder(_ id: String, merchant: String = "default", amount: Int64 = 9900) -> String {
        #"{"v":1,"orderId":"\#(id)","merchant":"\#(merchant)","provider":"nets","operation":"createSubscription","amount":\#(amount),"currency":"SEK","params":{"endDate":"2099-01-01T00:00:00Z","interval":0,"reference":"r-\#(id)"}}"#
    }

    static func refundOrder(_ id: String, of original: String, charge: String, payment: String, amount: Int64, currency: String = "SEK") -> String {
        #"{"v":1,"orderId":"\#(id)","provider":"nets","operation":"refund","amount":\#(amount),"currency":"\#(currency)","params":{"refundOf":"\#(original)","chargeId":"\#(charge)","paymentId":"\#(payment)"}}"#
    }

    /// The id of the order that charges what `orderId`'s checkout reserved.
    static func chargeOrderId(of orderId: String, merchant: String = "default") -> String {
        ScheduledAttempt.followingOrderId(of: OrderKey(merchant: merchant, orderId: orderId), purpose: "first")
    }

    /// What the sandbox recorded of the subscription's money.
    static func totals(_ h: PipelineHarness, _ subscription: String) async throws -> JSONValue {
        let answer = await h.sandboxPost("/_sandbox/subscriptions/nets/totals", ["subscription": .string(subscription)])
        try #require(answer?.0 == 200, "the sandbox's totals")
        return try JSONValue.parse(Array((answer?.1 ?? "").utf8))
    }

    /// How many requests the sandbox got under the Idempotency-Key of `orderId`.
    static func requests(_ h: PipelineHarness, orderId: String) async throws -> Int64 {
        let answer = await h.sandboxGet("/_sandbox/ledger", receiveTimeoutSeconds: 30)
        let ledger = try JSONValue.parse(Array((answer?.1 ?? "{}").utf8))
        let key = "nets:" + NetsPayments.idempotencyKey(for: OrderKey(merchant: "default", orderId: orderId))
        return ledger["requests"]?[key]?.integerValue ?? 0
    }

    @Test func theFirstPaymentIsChargedOnceInEitherModeAndRefundsStayWithinIt() async throws {
        let h = try await Self.harness(checkoutMerchant: true)
        defer { Task { await h.shutdown() } }
        try h.startSigner()
        try h.startSubmitter()
        try h.startCallbacks()
        let stream = Stream(h)

        // Charged by paypipe (the default): the checkout succeeds, then its charge order.
        try await h.send(Self.createOrder("first-charge"))
        let created = try await stream.final("first-charge")
        #expect(created["status"] == "succeeded")
        let subscription = try #require(created["result"]?["subscriptionId"]?.stringValue)
        let paymentId = try #require(created["result"]?["paymentId"]?.stringValue)
        let charged = try await stream.final(Self.chargeOrderId(of: "first-charge"))
        #expect(charged["status"] == "succeeded" && charged["result"]?["chargedAmount"] == 9900, "\(charged.serialized)")
        #expect(charged["result"]?["firstPaymentOf"] == "first-charge" && charged["operation"] == "chargePayment")
        let chargeId = try #require(charged["result"]?["chargeId"]?.stringValue)
        var totals = try await Self.totals(h, subscription)
        #expect(totals["charged"] == 9900 && totals["charges"] == 1, "\(totals.serialized)")

        // Charged by Nets at checkout: no charge order; the outcome says what was charged.
        try await h.send(Self.createOrder("first-checkout", merchant: "zcheckout", amount: 4900))
        let atCheckout = try await stream.final("first-checkout")
        #expect(atCheckout["status"] == "succeeded" && atCheckout["result"]?["chargedAmount"] == 4900, "\(atCheckout.serialized)")
        #expect(atCheckout["result"]?["chargeId"]?.stringValue != nil)
        let checkoutSubscription = try #require(atCheckout["result"]?["subscriptionId"]?.stringValue)
        totals = try await Self.totals(h, checkoutSubscription)
        #expect(totals["charged"] == 4900 && totals["charges"] == 1, "\(totals.serialized)")

        // Refunds of the paypipe-charged payment: a part, one too many (rejected naming the
        // amounts, nothing sent), the part again (deduplicated), then the rest.
        let chargeOrder = Self.chargeOrderId(of: "first-charge")
        try await h.send(Self.refundOrder("refund-1", of: chargeOrder, charge: chargeId, payment: paymentId, amount: 3000))
        let first = try await stream.final("refund-1")
        #expect(first["status"] == "succeeded" && first["result"]?["refundId"]?.stringValue != nil, "\(first.serialized)")
        try await h.send(Self.refundOrder("refund-2", of: chargeOrder, charge: chargeId, payment: paymentId, amount: 7000))
        let over = try await stream.final("refund-2")
        #expect(over["status"] == "rejected" && over["error"]?["code"] == "REFUND_EXCEEDS_CAPTURED", "\(over.serialized)")
        let message = over["error"]?["message"]?.stringValue ?? ""
        #expect(message.contains("7000") && message.contains("6900 left") && message.contains("captured 9900"), "\(message)")
        #expect(try await Self.requests(h, orderId: "refund-2") == 0, "a rejected refund is never sent")
        try await h.send(Self.refundOrder("refund-1", of: chargeOrder, charge: chargeId, payment: paymentId, amount: 3000))
        try await stream.until("refund-1 answered again") { $0.filter { Self.Stream.isFinal($0, "refund-1") }.count >= 2 }
        try await h.send(Self.refundOrder("refund-3", of: chargeOrder, charge: chargeId, payment: paymentId, amount: 6900))
        #expect(try await stream.final("refund-3")["status"] == "succeeded")
        #expect(try await Self.requests(h, orderId: "refund-1") == 1, "the repeated refund order was not sent again")

        // What the ledger refuses before anything is sent.
        try await h.send(Self.refundOrder("refund-unknown", of: "no-such-order", charge: chargeId, payment: paymentId, amount: 100))
        #expect(try await stream.final("refund-unknown")["error"]?["code"] == "REFUND_ORIGINAL_UNKNOWN")
        try await h.send(Self.refundOrder("refund-currency", of: chargeOrder, charge: chargeId, payment: paymentId, amount: 1, currency: "EUR"))
        #expect(try await stream.final("refund-currency")["error"]?["code"] == "REFUND_CURRENCY_MISMATCH")
        try await h.send(Self.refundOrder("refund-capture", of: chargeOrder, charge: "not-its-charge", payment: paymentId, amount: 1))
        #expect(try await stream.final("refund-capture")["error"]?["code"] == "REFUND_CAPTURE_UNKNOWN")

        totals = try await Self.totals(h, subscription)
        #expect(totals["charged"] == 9900 && totals["refunded"] == 9900 && totals["refunds"] == 2, "\(totals.serialized)")
        // The subscription hears of each refund that ended.
        try await stream.until("two refund.succeeded events") { messages in
            messages.filter { $0["type"] == "refund.succeeded" && $0["subscription"]?["reference"]?.stringValue == subscription }.count == 2
        }
        await h.shutdown()
    }

    enum Victim: String, CaseIterable {
        case submitter, ledger, signer, callbacks
    }

    /// A first charge and a refund each in flight at the sandbox (answers held back) when one
    /// role (the submitter, the ledger, the signer or the callback validator) is killed with -9
    /// and started again: each ends succeeded, and the sandbox shows one charge and one refund,
    /// whatever was sent again.
    @Test(arguments: Victim.allCases)
    func killingMidChargeAndMidRefundMovesTheMoneyOnce(victim: Victim) async throws {
        let h = try await Self.harness(latency: 1500)
        defer { Task { await h.shutdown() } }
        var signer = try h.startSigner()
        var submitter = try h.startSubmitter()
        var callbacks = try h.startCallbacks()
        let stream = Stream(h)

        func restart(_ process: ChildProcess, _ start: () throws -> ChildProcess) async throws -> ChildProcess {
            process.signal(SIGKILL)
            _ = await eventually(within: .seconds(10)) { !process.isRunning }
            return try start()
        }

        func kill(whenSent orderId: String) async throws {
            let sent = await eventually(within: .seconds(60)) { ((try? await Self.requests(h, orderId: orderId)) ?? 0) >= 1 }
            try #require(sent, "\(orderId) reached the sandbox")
            switch victim {
            case .submitter: submitter = try await restart(submitter) { try h.startSubmitter() }
            case .signer: signer = try await restart(signer) { try h.startSigner() }
            case .callbacks: callbacks = try await restart(callbacks) { try h.startCallbacks() }
            case .ledger:
                let process = h.ledgerProcess
                process.signal(SIGKILL)
                _ = await eventually(within: .seconds(10)) { !process.isRunning }
                try await h.restartLedger()
            }
        }

        try await h.send(Self.createOrder("kill-\(victim)"))
        let chargeOrder = Self.chargeOrderId(of: "kill-\(victim)")
        try await kill(whenSent: chargeOrder)
        let created = try await stream.final("kill-\(victim)", timeout: .seconds(120))
        let subscription = try #require(created["result"]?["subscriptionId"]?.stringValue)
        let paymentId = try #require(created["result"]?["paymentId"]?.stringValue)
        let charged = try await stream.final(chargeOrder, timeout: .seconds(120))
        #expect(charged["status"] == "succeeded" && charged["result"]?["chargedAmount"] == 9900, "\(charged.serialized)")
        let chargeId = try #require(charged["result"]?["chargeId"]?.stringValue)

        let refund = "kill-refund-\(victim)"
        try await h.send(Self.refundOrder(refund, of: chargeOrder, charge: chargeId, payment: paymentId, amount: 2500))
        try await kill(whenSent: refund)
        #expect(try await stream.final(refund, timeout: .seconds(120))["status"] == "succeeded")

        let totals = try await Self.totals(h, subscription)
        #expect(totals["charges"] == 1 && totals["charged"] == 9900, "one charge: \(totals.serialized)")
        #expect(totals["refunds"] == 1 && totals["refunded"] == 2500, "one refund: \(totals.serialized)")
        print("nets money kill test (\(victim)): sandbox totals \(totals.serialized)")
        await h.shutdown()
    }
}

extension NetsMoneyTests {
    /// A year of one Nets subscription on the schedule test's clock: its first payment charged
    /// once, twelve monthly cycles, one of them refunded in part. What the sandbox recorded of
    /// the subscription equals what the outcomes in the log say was charged and refunded.
    @Test func aYearOfANetsSubscriptionAddsUpAtTheSandbox() async throws {
        let h = try await PipelineHarness(
            sandboxConfiguration: SandboxConfiguration(port: 0, outboundAttempts: 12).with { $0.nets.completeCheckoutAfterMilliseconds = 50 },
            timers: ["pendingResolveAfterMs": 300, "httpRequestTimeoutMs": 2000, "leaseMs": 4000], redeliverAfterMilliseconds: 3000,
            schedules: ["retryAfterDays": [1, 3]])
        defer { Task { await h.shutdown() } }
        try h.startSigner()
        try h.startSubmitter()
        try h.startCallbacks()
        var year = ScheduleTests.Year(h, nets: 1, phonePe: 0, months: 12)
        try await year.create()
        try await year.run()
        let subscription = year.references[0].reference

        // Cycle 5 refunded in part, named by its scheduled order and its charge.
        let cycle5 = year.attempt(0, cycle: 5, attempt: 1).orderId(step: 0)
        let log = try await replayWholeLog(context: h.context, endpoint: h.ledgerEndpoints["outcomesReplay"]!).compactMap {
            try? JSONValue.parse($0.bytes)
        }
        let charged5 = try #require(log.last { $0["orderId"]?.stringValue == cycle5 && $0["status"] == "succeeded" })
        let stream = Stream(h)
        try await h.send(
            Self.refundOrder(
                "year-refund", of: cycle5, charge: try #require(charged5["result"]?["chargeId"]?.stringValue),
                payment: try #require(charged5["result"]?["paymentId"]?.stringValue), amount: 4000))
        #expect(try await stream.final("year-refund")["status"] == "succeeded")
        try await stream.until("the subscription hears of the refund") { messages in
            messages.contains { $0["type"] == "refund.succeeded" && $0["subscription"]?["reference"]?.stringValue == subscription }
        }

        // The outcomes' totals: each succeeded charge (first payment, cycles) and refund once.
        let outcomes = try await replayWholeLog(context: h.context, endpoint: h.ledgerEndpoints["outcomesReplay"]!).compactMap {
            try? JSONValue.parse($0.bytes)
        }.filter { $0["status"] == "succeeded" && $0["kind"] == nil }
        var byOrder: [String: JSONValue] = [:]
        for outcome in outcomes { byOrder[outcome["orderId"]?.stringValue ?? ""] = outcome }
        let first = byOrder.values.filter { $0["operation"] == "chargePayment" }
        let cycles = byOrder.values.filter { $0["operation"] == "chargeSubscription" }
        let refunds = byOrder.values.filter { $0["operation"] == "refund" }
        #expect(first.count == 1 && cycles.count == 12 && refunds.count == 1)
        let outcomeCharged = first.reduce(Int64(0)) { $0 + ($1["result"]?["chargedAmount"]?.integerValue ?? 0) } + Int64(cycles.count) * 9900
        let outcomeRefunded = refunds.reduce(Int64(0)) { $0 + ($1["result"]?["refundedAmount"]?.integerValue ?? 0) }
        let totals = try await Self.totals(h, subscription)
        #expect(totals["charged"]?.integerValue == outcomeCharged && outcomeCharged == 13 * 9900, "\(totals.serialized)")
        #expect(totals["charges"] == 13 && totals["refunds"] == 1)
        #expect(totals["refunded"]?.integerValue == outcomeRefunded && outcomeRefunded == 4000, "\(totals.serialized)")
        await h.shutdown()
    }
}

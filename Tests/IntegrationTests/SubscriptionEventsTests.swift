import Connectors
import Foundation
import PaypipeCore
import PhonePe
import Sandbox
import StageRuntime
import StageWire
import TestSupport
import Testing
import TrustPayments

@testable import CleengEmulation
@testable import NetsEasyEmulation
@testable import PhonePeEmulation

/// After the first payment (docs/protocol.md, "Subscription events"): for each provider a
/// subscription is created through the real ledger, signer, submitter, callback validator and
/// poller processes, then the sandbox (on its own clock, with its own signing code) sends what
/// the provider sends later. Upstream must get exactly one event per fact, in seq order and
/// replayable; a re-sent provider event makes no second one; a forged one changes nothing.
@Suite("Subscription events through real processes", .serialized)
struct SubscriptionEventsTests {
    static func events(in messages: [JSONValue]) -> [JSONValue] { messages.filter { $0["kind"] == "event" } }

    /// Waits until `count` events have arrived (or `timeout`), then a little longer, so that a
    /// second copy of one would be seen too.
    static func events(_ h: PipelineHarness, count: Int, timeout: Duration = .seconds(30)) async throws -> [JSONValue] {
        var messages = try await h.collectMessages(timeout: timeout) { events(in: $0).count >= count }
        messages += try await h.collectMessages(timeout: .milliseconds(800)) { _ in false }
        return events(in: messages)
    }

    /// The events as upstream gets them: each once, in seq order, all of one subscription and
    /// its first order; replay gives the same bytes under the same seqs.
    static func checkStream(_ events: [JSONValue], _ h: PipelineHarness, orderId: String, reference: String) async throws {
        let seqs = events.compactMap { $0["seq"]?.integerValue }
        #expect(seqs.count == events.count && seqs == seqs.sorted() && Set(seqs).count == seqs.count, "seqs \(seqs)")
        #expect(Set(events.compactMap { $0["eventId"]?.stringValue }).count == events.count, "every event id once")
        for event in events {
            #expect(event["subscription"]?["orderId"]?.stringValue == orderId)
            #expect(event["subscription"]?["reference"]?.stringValue == reference)
            #expect(event["epoch"]?.stringValue?.isEmpty == false)
        }
        let replayed = try await OutcomeReplayFlowTests.replayAll(h).compactMap { try? JSONValue.parse($0) }.filter { $0["kind"] == "event" }
        #expect(replayed == events, "replay gives the live events, in order")
    }

    /// One subscription's record through the replay socket.
    static func subscriptionRecord(_ h: PipelineHarness, provider: String, reference: String) async throws -> JSONValue? {
        let client = try OutcomeReplayClient(context: h.context, endpoint: h.ledgerEndpoints["outcomesReplay"]!)
        let record = try await client.subscription(
            OutcomeReplay.SubscriptionQuery(merchant: "default", provider: Provider(provider), reference: reference))
        await client.close()
        return record
    }

    // MARK: - Trust Payments

    /// Starts the signer, submitter and callback validator, and opens a monthly subscription of
    /// four payments (`orderId`): the customer pays in the app (the sandbox stands in for the
    /// SDK) and its backend forwards the notification. Returns the subscription's reference.
    static func trustPaymentsSubscription(_ h: PipelineHarness, orderId: String) async throws -> String {
        try h.startSigner()
        try h.startSubmitter()
        try h.startCallbacks()
        try await h.send(
            #"{"v":1,"orderId":"\#(orderId)","provider":"trustpayments","operation":"subscriptionJwt","amount":1050,"currency":"GBP","params":{"subscriptionType":"RECURRING","unit":"MONTH","frequency":1,"finalNumber":4}}"#
        )
        let pending = try await h.collect { $0.contains { $0.orderId == orderId && $0.status == .pending } }
        let jwt = try #require(pending.first?.result?["jwt"]?.stringValue)
        let paid = try #require(await h.sandboxPost("/trustpayments/sdk/payment", ["jwt": .string(jwt)]))
        let form = try #require(try JSONValue.parse(Array(paid.1.utf8))["notification"]?.stringValue)
        let settled = try #require(
            await h.postCallback(
                "/callbacks/trustpayments/notification", headers: [("Content-Type", "application/x-www-form-urlencoded")], body: Array(form.utf8)))
        #expect(settled.0 == 200, "\(settled)")
        let succeeded = try await h.collect { $0.contains { $0.orderId == orderId && $0.status == .succeeded } }
        return try #require(succeeded.first { $0.status == .succeeded }?.result?["transactionReference"]?.stringValue)
    }

    @Test func trustPaymentsEnginePaymentsReachUpstreamOnceEachAlsoAfterTheFirstOrderIsGone() async throws {
        let h = try await PipelineHarness()
        defer { Task { await h.shutdown() } }
        let reference = try await Self.trustPaymentsSubscription(h, orderId: "tp-sub-1")

        // A month: the first AUTH settles (active) and payment 2 is taken and settled.
        #expect(await h.sandboxPost("/_sandbox/clock", ["advanceDays": 31])?.0 == 200)
        // Payment 3 is declined.
        #expect(await h.sandboxPost("/_sandbox/subscriptions/trustpayments/declineNext", ["subscription": .string(reference)])?.0 == 200)
        #expect(await h.sandboxPost("/_sandbox/clock", ["advanceDays": 31])?.0 == 200)

        // The first order is compacted and then forgotten altogether: its subscription still takes events.
        let database = try TestStores.database(directory: h.directory)
        try database.query("DELETE FROM refs WHERE merchant='default' AND order_id='tp-sub-1'", [])
        try database.query("DELETE FROM callback_events WHERE merchant='default' AND order_id='tp-sub-1'", [])
        try database.query("UPDATE orders SET order_json=NULL WHERE merchant='default' AND order_id='tp-sub-1'", [])
        try database.query("DELETE FROM orders WHERE merchant='default' AND order_id='tp-sub-1'", [])

        // Payment 4 is the series' last: taken, the subscription ended, then settled.
        #expect(await h.sandboxPost("/_sandbox/clock", ["advanceDays": 31])?.0 == 200)
        // Trust Payments retries a notification: no second event.
        #expect(await h.sandboxPost("/_sandbox/subscriptions/trustpayments/resendLast", ["subscription": .string(reference)])?.0 == 200)
        // A forged automated-payment notification changes nothing.
        let forgedFields: [TPNotification.Field] = [
            ("accounttypedescription", "RECUR"), ("baseamount", "1050"), ("currencyiso3a", "GBP"), ("errorcode", "0"),
            ("parenttransactionreference", reference), ("requesttypedescription", "AUTH"), ("settlestatus", "0"),
            ("sitereference", "test_site12345"), ("subscriptionnumber", "5"), ("transactionreference", "57-9-99999999"),
        ]
        let forged = TPNotification.formBody(fields: forgedFields, password: Secret("not-the-notification-password"))
        #expect(
            await h.postCallback(
                "/callbacks/trustpayments/notification", headers: [("Content-Type", "application/x-www-form-urlencoded")], body: forged)?
                .0 == 401)

        let events = try await Self.events(h, count: 7)
        #expect(
            events.compactMap { $0["type"]?.stringValue } == [
                "subscription.activated", "renewal.succeeded", "renewal.settled", "renewal.failed", "renewal.succeeded", "subscription.ended",
                "renewal.settled",
            ], "\(events.map(\.serialized))")
        #expect(events.filter { $0["type"]?.stringValue?.hasPrefix("renewal.") == true }.compactMap { $0["cycle"]?.integerValue } == [2, 2, 3, 4, 4])
        #expect(events.first { $0["type"] == "renewal.failed" }?["reason"] == "70000")
        #expect(events.first { $0["type"] == "renewal.succeeded" }?["amount"] == .integer(1050))
        try await Self.checkStream(events, h, orderId: "tp-sub-1", reference: reference)
        let record = try #require(try await Self.subscriptionRecord(h, provider: "trustpayments", reference: reference))
        #expect(record["state"] == "ended")
        #expect(record["events"]?.arrayValue?.count == 7)
        await h.shutdown()
    }

    /// The engine takes payment 2 but its notifications never come: once the payment is late
    /// by `tpReconcileAfterMs`, the ledger asks Trust Payments (TRANSACTIONQUERY) and reports it
    /// as the notifications would have, once; the notification arriving late records nothing.
    @Test func trustPaymentsEnginePaymentWithoutANotificationIsFoundByQueryOnce() async throws {
        let h = try await PipelineHarness(
            timers: ["tpReconcileAfterMs": 1000, "tpReconcileRetryMs": 3_600_000], redeliverAfterMilliseconds: 500, schedules: [:])
        defer { Task { await h.shutdown() } }
        let reference = try await Self.trustPaymentsSubscription(h, orderId: "tp-rcn-1")

        // A month on, payment 2 is taken and nothing reports it.
        #expect(await h.sandboxPost("/_sandbox/subscriptions/trustpayments/dropNext", ["subscription": .string(reference)])?.0 == 200)
        #expect(await h.sandboxPost("/_sandbox/clock", ["advanceDays": 31])?.0 == 200)
        let events = try await Self.events(h, count: 3)
        #expect(
            events.compactMap { $0["type"]?.stringValue } == ["subscription.activated", "renewal.succeeded", "renewal.settled"],
            "\(events.map(\.serialized))")
        #expect(events.dropFirst().allSatisfy { $0["cycle"] == 2 && $0["amount"] == 1050 && $0["currency"] == "GBP" })
        // The notification comes after all: the same payment, nothing new.
        #expect(await h.sandboxPost("/_sandbox/subscriptions/trustpayments/resendLast", ["subscription": .string(reference)])?.0 == 200)
        let late = try await h.collectMessages(timeout: .seconds(3)) { _ in false }
        #expect(Self.events(in: late).isEmpty, "\(late.map(\.serialized))")
        try await Self.checkStream(events, h, orderId: "tp-rcn-1", reference: reference)
        let record = try #require(try await Self.subscriptionRecord(h, provider: "trustpayments", reference: reference))
        #expect(record["state"] == "active" && record["events"]?.arrayValue?.count == 3)
        let replayed = try await OutcomeReplayFlowTests.replayAll(h).compactMap { try? JSONValue.parse($0) }
        let asks = replayed.filter { $0["orderId"]?.stringValue?.hasPrefix("rcn-") == true }
        #expect(asks.count == 1 && asks.first?["status"] == "succeeded", "one TRANSACTIONQUERY: \(asks.map(\.serialized))")
        await h.shutdown()
    }

    // MARK: - PhonePe

    @Test func phonePeDebitsAndARevokeReachUpstreamOnceEach() async throws {
        let h = try await PipelineHarness(sandboxConfiguration: SandboxConfiguration(port: 0).with { $0.phonePe.callbackDelayMilliseconds = 100 })
        defer { Task { await h.shutdown() } }
        try h.startSigner()
        try h.startSubmitter()
        try h.startCallbacks()
        try await h.send(AsyncFlowTests.phonePeOrder("pp-sub-1"))
        // The sandbox's AUTH callback authorises the mandate: the subscription opens.
        _ = try await AsyncFlowTests.outcome(h, "pp-sub-1", .succeeded)
        let subscription: JSONValue = ["subscription": "SUB-pp-sub-1"]
        #expect(await h.sandboxPost("/_sandbox/subscriptions/phonepe/debit", ["subscription": "SUB-pp-sub-1", "amount": 39900])?.0 == 200)
        #expect(
            await h.sandboxPost("/_sandbox/subscriptions/phonepe/debit", ["subscription": "SUB-pp-sub-1", "amount": 39900, "decline": true])?.0
                == 200)
        #expect(await h.sandboxPost("/_sandbox/subscriptions/phonepe/resendLast", subscription)?.0 == 200)
        #expect(await h.sandboxPost("/_sandbox/subscriptions/phonepe/revoke", subscription)?.0 == 200)
        // A forged DEBIT callback (a checksum under another salt) changes nothing.
        let json =
            #"{"success":true,"code":"SUCCESS","data":{"callbackType":"DEBIT","merchantId":"MERCHANTUAT","transactionId":"TXFORGED","subscriptionDetails":{"subscriptionId":"SUB-pp-sub-1","state":"ACTIVE"},"transactionDetails":{"amount":39900,"state":"COMPLETED"}}}"#
        let response = Data(json.utf8).base64EncodedString()
        let forgedVerify = PhonePeChecksum(saltKey: Secret("another-salt"), saltIndex: "1").xVerify(callbackResponse: response)
        #expect(
            await h.postCallback("/callbacks/phonepe", headers: [("X-VERIFY", forgedVerify)], body: Array(#"{"response":"\#(response)"}"#.utf8))?.0
                == 401)

        let events = try await Self.events(h, count: 5)
        #expect(
            events.compactMap { $0["type"]?.stringValue } == [
                "renewal.scheduled", "renewal.succeeded", "renewal.scheduled", "renewal.failed", "mandate.revoked",
            ], "\(events.map(\.serialized))")
        #expect(events[1]["amount"] == .integer(39900) && events[1]["currency"] == "INR")
        #expect(events[3]["reason"] == "AUTHORIZATION_FAILED")
        #expect(events.last?["subscription"]?["state"] == "revoked")
        try await Self.checkStream(events, h, orderId: "pp-sub-1", reference: "SUB-pp-sub-1")
        await h.shutdown()
    }

    // MARK: - Nets

    @Test func netsChargesAndTheEndDateReachUpstreamOnceEach() async throws {
        let h = try await PipelineHarness(
            sandboxConfiguration: SandboxConfiguration(port: 0).with {
                $0.phonePe.callbackDelayMilliseconds = 3_600_000
                $0.nets.completeCheckoutAfterMilliseconds = 50
            })
        defer { Task { await h.shutdown() } }
        try h.startSigner()
        try h.startSubmitter()
        try h.startCallbacks()
        // Ends in 20 s: Nets reports nothing when it does, so the ledger does.
        let endDate = Timestamp.iso8601(milliseconds: (Timestamp.nowMilliseconds() / 1000 + 20) * 1000).replacingOccurrences(of: ".000Z", with: "Z")
        try await h.send(
            #"{"v":1,"orderId":"nets-sub-1","provider":"nets","operation":"createSubscription","amount":9900,"currency":"SEK","params":{"endDate":"\#(endDate)","interval":0,"reference":"sub-1"}}"#
        )
        // The customer completes the hosted page; the checkout.completed webhook ends the order.
        let created = try #require(try await AsyncFlowTests.outcome(h, "nets-sub-1", .succeeded))
        let subscriptionId = try #require(created.result?["subscriptionId"]?.stringValue)
        func charge(_ id: String) -> String {
            #"{"v":1,"orderId":"\#(id)","provider":"nets","operation":"chargeSubscription","amount":9900,"currency":"SEK","params":{"subscriptionId":"\#(subscriptionId)","reference":"\#(id)"}}"#
        }
        // Outcomes and events share the live stream: everything read is kept.
        func ended(_ orderId: String) -> ([JSONValue]) -> Bool {
            { messages in messages.contains { $0["orderId"]?.stringValue == orderId && ["succeeded", "failed"].contains($0["status"]?.stringValue) } }
        }
        try await h.send(charge("nets-charge-1"))
        var live = try await h.collectMessages(until: ended("nets-charge-1"))
        #expect(await h.sandboxPost("/_sandbox/subscriptions/nets/declineNext", ["subscription": .string(subscriptionId)])?.0 == 200)
        try await h.send(charge("nets-charge-2"))
        live += try await h.collectMessages(until: ended("nets-charge-2"))
        #expect(live.first { $0["orderId"] == "nets-charge-2" }?["status"] == "failed")
        let seen = live
        live += try await h.collectMessages(timeout: .seconds(5)) { Self.events(in: seen + $0).count >= 2 }
        #expect(await h.sandboxPost("/_sandbox/subscriptions/nets/resendLast", ["subscription": .string(subscriptionId)])?.0 == 200)
        // A forged charge webhook (another Authorization) changes nothing.
        let forged: JSONValue = [
            "id": "forged-event-1", "event": "payment.charge.created.v2", "timestamp": "2026-11-28T00:00:00Z", "merchantId": 1,
            "data": ["paymentId": "p1", "chargeId": "c1", "subscriptionId": .string(subscriptionId), "amount": ["amount": 9900, "currency": "SEK"]],
        ]
        #expect(await h.postCallback("/callbacks/nets", headers: [("Authorization", "notTheWebhookSecret1")], body: forged.bytes)?.0 == 401)
        // With the webhook's own Authorization, which travels in every payment creation: a
        // payment Nets does not know (409), a charge Nets never made (503: not shown), and the
        // genuine charge replayed under a new id (200, the same event) record nothing new.
        let authorization = try #require(
            try PaypipeConfig.parse(Array(DemoConfig.text(sandboxURL: "http://127.0.0.1:9", callbacks: "127.0.0.1:9").utf8))
                .merchants["default"]?.nets?.webhookAuthorization.reveal())
        let charged = try #require(live.first { $0["orderId"] == "nets-charge-1" }?["result"])
        let realPayment = try #require(charged["paymentId"]), realCharge = try #require(charged["chargeId"])
        func claimed(_ id: String, paymentId: JSONValue, chargeId: JSONValue) -> [UInt8] {
            let body: JSONValue = [
                "id": .string(id), "event": "payment.charge.created.v2", "timestamp": "2026-11-28T00:00:00Z", "merchantId": 1,
                "data": [
                    "paymentId": paymentId, "chargeId": chargeId, "subscriptionId": .string(subscriptionId),
                    "amount": ["amount": 9900, "currency": "SEK"],
                ],
            ]
            return body.bytes
        }
        let headers = [("Authorization", authorization), ("Content-Type", "application/json")]
        #expect(await h.postCallback("/callbacks/nets", headers: headers, body: claimed("invented-1", paymentId: "p1", chargeId: "c1"))?.0 == 409)
        #expect(
            await h.postCallback("/callbacks/nets", headers: headers, body: claimed("invented-2", paymentId: realPayment, chargeId: "c-never"))?.0
                == 503)
        #expect(
            await h.postCallback("/callbacks/nets", headers: headers, body: claimed("replayed-1", paymentId: realPayment, chargeId: realCharge))?.0
                == 200)

        let before = live
        live += try await h.collectMessages(timeout: .seconds(40)) { Self.events(in: before + $0).count >= 3 }
        live += try await h.collectMessages(timeout: .milliseconds(800)) { _ in false }
        let events = Self.events(in: live)
        #expect(
            events.compactMap { $0["type"]?.stringValue } == ["renewal.succeeded", "renewal.failed", "subscription.ended"],
            "\(events.map(\.serialized))")
        #expect(events.first?["amount"] == .integer(9900) && events.first?["currency"] == "SEK")
        try await Self.checkStream(events, h, orderId: "nets-sub-1", reference: subscriptionId)
        await h.shutdown()
    }

    // MARK: - Cleeng

    /// The pipeline with a poller, Cleeng granting access on the first poll and rechecked often.
    static func cleengPipeline() async throws -> PipelineHarness {
        let h = try await PipelineHarness(
            sandboxConfiguration: SandboxConfiguration(port: 0).with {
                $0.phonePe.callbackDelayMilliseconds = 3_600_000
                $0.cleeng.grantOnPoll = 1
            },
            timers: ["cleengPollIntervalMs": 200, "cleengGiveUpMs": 5000, "entitlementRecheckMs": 400])
        try h.startSigner()
        try h.startSubmitter()
        try h.startPoller()
        return h
    }

    @Test func cleengRenewalAndLapseAreFoundByCheckingAccess() async throws {
        let h = try await Self.cleengPipeline()
        defer { Task { await h.shutdown() } }
        try await h.send(AsyncFlowTests.cleengOrder("cl-sub-1"))
        let granted = try #require(try await AsyncFlowTests.outcome(h, "cl-sub-1", .succeeded))
        #expect(granted.result?["expiresAt"]?.integerValue != nil)
        // Checked again and again (three rechecks): nothing changed, nothing reported.
        let polls = h.sandbox.ledger.cleengPollTimes(customerToken: "tok-cl-sub-1").count
        #expect(await eventually(within: .seconds(20)) { h.sandbox.ledger.cleengPollTimes(customerToken: "tok-cl-sub-1").count >= polls + 3 })
        // A month on, the App Store renewed it: the next check sees the later expiry.
        #expect(await h.sandboxPost("/_sandbox/clock", ["advanceDays": 31])?.0 == 200)
        var live = try await h.collectMessages(timeout: .seconds(10)) { Self.events(in: $0).count >= 1 }
        // The customer cancels; at the end of the period access lapses.
        #expect(
            await h.sandboxPost("/_sandbox/subscriptions/cleeng/cancel", ["customerToken": "tok-cl-sub-1", "offerId": "S123456789_US"])?.0 == 200)
        #expect(await h.sandboxPost("/_sandbox/clock", ["advanceDays": 31])?.0 == 200)
        live += try await Self.events(h, count: 1, timeout: .seconds(10))
        let events = Self.events(in: live)
        #expect(events.compactMap { $0["type"]?.stringValue } == ["renewal.succeeded", "entitlement.expired"], "\(events.map(\.serialized))")
        #expect(events.first?["expiresAt"] != nil)
        try await Self.checkStream(events, h, orderId: "cl-sub-1", reference: "S123456789_US@cl-sub-1")
        let record = try #require(try await Self.subscriptionRecord(h, provider: "cleeng", reference: "S123456789_US@cl-sub-1"))
        #expect(record["state"] == "expired")
        await h.shutdown()
    }

    /// Access lapses, the customer buys the offer again, and it lapses again: each is its own
    /// event, although both lapses read the same (no access, no expiry), and the subscription
    /// ends `expired`.
    @Test func cleengLapseReGrantAndLapseAgainAreThreeEvents() async throws {
        let h = try await Self.cleengPipeline()
        defer { Task { await h.shutdown() } }
        try await h.send(AsyncFlowTests.cleengOrder("cl-sub-2"))
        _ = try #require(try await AsyncFlowTests.outcome(h, "cl-sub-2", .succeeded))
        let offer: JSONValue = ["customerToken": "tok-cl-sub-2", "offerId": "S123456789_US"]
        func lapse() async {
            #expect(await h.sandboxPost("/_sandbox/subscriptions/cleeng/cancel", offer)?.0 == 200)
            #expect(await h.sandboxPost("/_sandbox/clock", ["advanceDays": 31])?.0 == 200)
        }
        await lapse()
        var live = try await h.collectMessages(timeout: .seconds(10)) { Self.events(in: $0).count >= 1 }
        #expect(await h.sandboxPost("/_sandbox/subscriptions/cleeng/resubscribe", offer)?.0 == 200)
        live += try await h.collectMessages(timeout: .seconds(10)) { Self.events(in: $0).count >= 1 }
        await lapse()
        live += try await Self.events(h, count: 1, timeout: .seconds(10))
        let events = Self.events(in: live)
        #expect(
            events.compactMap { $0["type"]?.stringValue } == ["entitlement.expired", "entitlement.granted", "entitlement.expired"],
            "\(events.map(\.serialized))")
        try await Self.checkStream(events, h, orderId: "cl-sub-2", reference: "S123456789_US@cl-sub-2")
        let record = try #require(try await Self.subscriptionRecord(h, provider: "cleeng", reference: "S123456789_US@cl-sub-2"))
        #expect(record["state"] == "expired")
        await h.shutdown()
    }
}

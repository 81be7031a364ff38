import Connectors
import Foundation
import NetsEasy
import PaypipeCore
import PhonePe
import Sandbox
import StageRuntime
import StageWire
import TestSupport
import Testing
import TrustPayments
import Viva

@testable import CleengEmulation
@testable import NetsEasyEmulation
@testable import PhonePeEmulation
@testable import VivaEmulation

/// The asynchronous flows end to end: real ledger, signer, submitter, callback
/// validator and Cleeng poller processes, the real sandbox, callbacks over loopback HTTP.
@Suite("Asynchronous flows through real processes", .serialized)
struct AsyncFlowTests {
    static let demo = try! PaypipeConfig.parse(Array(DemoConfig.text(sandboxURL: "http://127.0.0.1:9").utf8))
    static var merchant: MerchantConfig { demo.merchants["default"]! }

    static func phonePeOrder(_ id: String, amount: Int64 = 39900) -> String {
        #"{"v":1,"orderId":"\#(id)","provider":"phonepe","operation":"authInit","amount":\#(amount),"currency":"INR","params":{"merchantUserId":"U-\#(id)","subscriptionId":"SUB-\#(id)"}}"#
    }

    /// PhonePe's genuine callback that the mandate of `phonePeOrder(orderId)` completed, for its
    /// pending outcome (which names the authRequestId).
    static func completedMandate(_ orderId: String, pending: Outcome, amount: Int64 = 39900) throws -> PhonePeSandboxCallback {
        let authRequestId = try #require(pending.result?["authRequestId"]?.stringValue)
        let mandate = PhonePeSandboxMandate(
            merchantId: "MERCHANTUAT", merchantUserId: "U-\(orderId)", subscriptionId: "SUB-\(orderId)", authRequestId: authRequestId,
            amount: amount, callbackURL: "")
        return PhonePeSandbox(config: merchant.phonepe!).callback(for: mandate, outcome: .completed)
    }

    /// Waits for the outcome of `orderId` with `status`.
    static func outcome(_ h: PipelineHarness, _ orderId: String, _ status: Outcome.Status, timeout: Duration = .seconds(20)) async throws -> Outcome?
    {
        try await h.collect(timeout: timeout) { $0.contains { $0.orderId == orderId && $0.status == status } }
            .first { $0.orderId == orderId && $0.status == status }
    }

    /// Outcomes for `orderId` arriving within `window` (to show that nothing changed).
    static func outcomes(_ h: PipelineHarness, _ orderId: String, within window: Duration) async throws -> [Outcome] {
        try await h.collect(timeout: window) { _ in false }.filter { $0.orderId == orderId }
    }

    // MARK: - PhonePe

    @Test func phonePeCallbacksAreAuthenticatedCheckedAndDeduplicated() async throws {
        let h = try await PipelineHarness()
        defer { Task { await h.shutdown() } }
        try h.startSigner()
        try h.startSubmitter()
        try h.startCallbacks()
        try await h.send(Self.phonePeOrder("pp-cb-1"))
        try await h.send(Self.phonePeOrder("pp-cb-2"))
        let pending = try await h.collect { outcomes in outcomes.filter { $0.status == .pending }.count >= 2 }
        let ids = Dictionary(pending.map { ($0.orderId, $0.result?["authRequestId"]?.stringValue ?? "") }, uniquingKeysWith: { a, _ in a })
        let phonepe = PhonePeSandbox(config: Self.merchant.phonepe!)
        func callback(_ orderId: String, amount: Int64, variant: PhonePeSandboxCallbackVariant = .genuine) -> PhonePeSandboxCallback {
            let mandate = PhonePeSandboxMandate(
                merchantId: "MERCHANTUAT", merchantUserId: "U-\(orderId)", subscriptionId: "SUB-\(orderId)", authRequestId: ids[orderId] ?? "",
                amount: amount, callbackURL: "")
            return phonepe.callback(for: mandate, outcome: .completed, variant: variant)
        }

        // Forged: a wrong checksum is refused and changes nothing.
        let forged = callback("pp-cb-1", amount: 39900, variant: .wrongChecksum)
        let refused = try #require(await h.postCallback("/callbacks/phonepe", headers: [("X-VERIFY", forged.xVerify)], body: forged.body))
        #expect(refused.0 == 401)
        #expect(refused.1.contains("BAD_CHECKSUM"))
        #expect(!refused.1.contains("demo-salt"))
        let noChecksum = try #require(await h.postCallback("/callbacks/phonepe", body: forged.body))
        #expect(noChecksum.0 == 401)
        let malformed = try #require(
            await h.postCallback("/callbacks/phonepe", headers: [("X-VERIFY", "x###1")], body: Array("{\"response\":42}".utf8)))
        #expect(malformed.0 == 400)
        #expect(try await Self.outcomes(h, "pp-cb-1", within: .milliseconds(500)).isEmpty)

        // Genuine: the order succeeds; its redelivery is acknowledged and changes nothing.
        let genuine = callback("pp-cb-1", amount: 39900)
        let accepted = try #require(await h.postCallback("/callbacks/phonepe", headers: [("X-VERIFY", genuine.xVerify)], body: genuine.body))
        #expect(accepted.0 == 200)
        #expect(accepted.1.contains("applied"))
        let succeeded = try await Self.outcome(h, "pp-cb-1", .succeeded)
        #expect(succeeded != nil)
        let replay = try #require(await h.postCallback("/callbacks/phonepe", headers: [("X-VERIFY", genuine.xVerify)], body: genuine.body))
        #expect(replay.0 == 200)
        #expect(replay.1.contains("duplicate"))
        #expect(try await Self.outcomes(h, "pp-cb-1", within: .milliseconds(500)).isEmpty)

        // NOTIFY (a later debit's pre-debit notification) is the subscription's event, not the
        // order's: recorded against the mandate the order opened; its redelivery is a duplicate.
        let notifyJSON =
            #"{"success":true,"code":"SUCCESS","data":{"callbackType":"NOTIFY","merchantId":"MERCHANTUAT","transactionId":"TXN-1","subscriptionDetails":{"subscriptionId":"SUB-pp-cb-1","state":"ACTIVE"},"notificationDetails":{"notificationId":"NOTE-1","amount":39900,"state":"NOTIFIED"}}}"#
        let notifyResponse = Data(notifyJSON.utf8).base64EncodedString()
        let notifyBody = Array(#"{"response":"\#(notifyResponse)"}"#.utf8)
        let notifyVerify = PhonePeChecksum(config: Self.merchant.phonepe!).xVerify(callbackResponse: notifyResponse)
        let notified = try #require(await h.postCallback("/callbacks/phonepe", headers: [("X-VERIFY", notifyVerify)], body: notifyBody))
        #expect(notified.0 == 200)
        #expect(notified.1.contains("event"))
        #expect(await h.postCallback("/callbacks/phonepe", headers: [("X-VERIFY", notifyVerify)], body: notifyBody)?.1.contains("duplicate") == true)

        // Authentic but for another amount: acknowledged, and the order ends failed for review.
        let wrongAmount = callback("pp-cb-2", amount: 100)
        let mismatch = try #require(await h.postCallback("/callbacks/phonepe", headers: [("X-VERIFY", wrongAmount.xVerify)], body: wrongAmount.body))
        #expect(mismatch.0 == 200)
        let failed = try await Self.outcome(h, "pp-cb-2", .failed)
        #expect(failed?.error?.code == "AMOUNT_MISMATCH")

        // An authentic callback for an order the pipeline does not have.
        var unknownOrder = PhonePeSandboxMandate(
            merchantId: "MERCHANTUAT", merchantUserId: "U", subscriptionId: "S", authRequestId: "NOSUCHAUTHREQUEST", amount: 1, callbackURL: "")
        unknownOrder.amount = 1
        let stray = phonepe.callback(for: unknownOrder, outcome: .completed)
        #expect(await h.postCallback("/callbacks/phonepe", headers: [("X-VERIFY", stray.xVerify)], body: stray.body)?.0 == 404)

        // Every refusal is counted by reason.
        let metrics = httpGet("http://127.0.0.1:\(h.callbacksMetricsPort)/metrics") ?? ""
        #expect(metrics.contains(#"paypipe_callbacks_total{route="phonepe",result="BAD_CHECKSUM"} 1"#))
        #expect(metrics.contains(#"paypipe_callbacks_total{route="phonepe",result="duplicate"} 2"#))
        #expect(metrics.contains(#"paypipe_callbacks_total{route="phonepe",result="event"} 1"#))
        await h.shutdown()
    }

    @Test func theSandboxsGenuineCallbackEndsTheOrderAndAMissedOneIsResolvedByTheStatusCall() async throws {
        // The sandbox sends genuine callbacks after 300 ms.
        let genuine = try await PipelineHarness(
            sandboxConfiguration: SandboxConfiguration(port: 0).with { $0.phonePe.callbackDelayMilliseconds = 300 })
        do {
            try genuine.startSigner()
            try genuine.startSubmitter()
            try genuine.startCallbacks()
            try await genuine.send(Self.phonePeOrder("pp-live-1"))
            let outcome = try await Self.outcome(genuine, "pp-live-1", .succeeded)
            #expect(outcome != nil)
        }
        await genuine.shutdown()

        // Its callbacks are forged (wrong checksum), so none is accepted: after the wait the
        // ledger has the order's status checked, and the status call ends it.
        let missed = try await PipelineHarness(
            sandboxConfiguration: SandboxConfiguration(port: 0, outboundAttempts: 1).with {
                $0.phonePe.callbackDelayMilliseconds = 300
                $0.phonePe.callbackVariant = .wrongChecksum
            },
            timers: ["phonepeCallbackWaitMs": 1500])
        try missed.startSigner()
        try missed.startSubmitter()
        try missed.startCallbacks()
        try await missed.send(Self.phonePeOrder("pp-missed-1"))
        let resolved = try await Self.outcome(missed, "pp-missed-1", .succeeded, timeout: .seconds(20))
        #expect(resolved != nil)
        let metrics = httpGet("http://127.0.0.1:\(missed.callbacksMetricsPort)/metrics") ?? ""
        #expect(metrics.contains(#"route="phonepe",result="BAD_CHECKSUM""#))
        await missed.shutdown()
    }

    // MARK: - Trust Payments

    static func tpEntries(orderId: String, amount: String = "1050", site: String = "test_site12345") -> [[String: JSONValue]] {
        [
            ["requesttypedescription": "THREEDQUERY", "errorcode": "0", "sitereference": .string(site), "orderreference": .string(orderId)],
            [
                "requesttypedescription": "AUTH", "errorcode": "0", "sitereference": .string(site), "orderreference": .string(orderId),
                "baseamount": .string(amount), "currencyiso3a": "GBP", "transactionreference": .string("1-2-\(orderId)"), "settlestatus": "0",
            ],
            [
                "requesttypedescription": "SUBSCRIPTION", "errorcode": "0", "sitereference": .string(site), "orderreference": .string(orderId),
                "transactionreference": .string("1-3-\(orderId)"), "baseamount": .string(amount), "currencyiso3a": "GBP",
                "subscriptiontype": "RECURRING", "subscriptionunit": "MONTH", "subscriptionfrequency": "1", "subscriptionnumber": "1",
                "subscriptionfinalnumber": "12", "transactionactive": "2",
            ],
        ]
    }

    /// `tpEntries` with fields of the AUTH (index 1) or SUBSCRIPTION (index 2) entry replaced; nil removes one.
    static func tpEntries(orderId: String, changing index: Int, _ changes: [String: JSONValue?]) -> [[String: JSONValue]] {
        var entries = tpEntries(orderId: orderId)
        for (key, value) in changes { entries[index][key] = value }
        return entries
    }

    static func tpOrder(_ id: String) -> String {
        #"{"v":1,"orderId":"\#(id)","provider":"trustpayments","operation":"subscriptionJwt","amount":1050,"currency":"GBP","params":{"subscriptionType":"RECURRING","unit":"MONTH","frequency":1,"finalNumber":12}}"#
    }

    /// A response JWT is bound to its order (orderreference required and equal), its
    /// SUBSCRIPTION entry must be what was requested and scheduled, and an uncertain AUTH leaves
    /// the order for the notification that carries the final result.
    @Test func trustPaymentsCallbacksAreBoundToTheirOrderAndSubscription() async throws {
        let h = try await PipelineHarness()
        defer { Task { await h.shutdown() } }
        try h.startSigner()
        try h.startCallbacks()
        let tp = Self.merchant.trustpayments!
        let ids = ["tp-bind-a", "tp-bind-b", "tp-sub-mismatch", "tp-sub-unscheduled", "tp-uncertain"]
        for id in ids { try await h.send(Self.tpOrder(id)) }
        _ = try await h.collect { $0.filter { $0.status == .pending }.count >= ids.count }
        let now = Int64(Date().timeIntervalSince1970)
        func post(_ entries: [[String: JSONValue]], as orderId: String) async -> (Int, String)? {
            let jwt = TPResponseJWT.build(entries: entries, requestReference: "W-\(orderId)", issuedAt: now, secret: tp.jwtSecret)
            return await h.postCallback("/callbacks/trustpayments/jwt", body: Array(#"{"orderId":"\#(orderId)","jwt":"\#(jwt)"}"#.utf8))
        }

        // No orderreference in the AUTH entry: refused, nothing changes.
        let unbound = try #require(await post(Self.tpEntries(orderId: "tp-bind-a", changing: 1, ["orderreference": nil]), as: "tp-bind-a"))
        #expect(unbound.0 == 400)
        #expect(unbound.1.contains("MISSING_ORDERREFERENCE"))
        // Another order's authentic JWT (same amount) forwarded for this one: refused.
        let foreign = try #require(await post(Self.tpEntries(orderId: "tp-bind-b"), as: "tp-bind-a"))
        #expect(foreign.0 == 409)
        #expect(foreign.1.contains("ORDERREFERENCE_MISMATCH"))
        #expect(try await Self.outcomes(h, "tp-bind-a", within: .milliseconds(400)).isEmpty)
        #expect(try await Self.outcomes(h, "tp-bind-b", within: .milliseconds(100)).isEmpty)

        // A SUBSCRIPTION entry unlike the request fails the order; the payment stays in result.
        #expect(await post(Self.tpEntries(orderId: "tp-sub-mismatch", changing: 2, ["subscriptionfrequency": "3"]), as: "tp-sub-mismatch")?.0 == 200)
        let mismatch = try #require(try await Self.outcome(h, "tp-sub-mismatch", .failed))
        #expect(mismatch.error?.code == "SUBSCRIPTION_MISMATCH")
        #expect(mismatch.result?["transactionReference"]?.stringValue == "1-2-tp-sub-mismatch")

        // An unscheduled subscription fails the order with the AUTH reference and amount.
        #expect(await post(Self.tpEntries(orderId: "tp-sub-unscheduled", changing: 2, ["errorcode": "20018"]), as: "tp-sub-unscheduled")?.0 == 200)
        let unscheduled = try #require(try await Self.outcome(h, "tp-sub-unscheduled", .failed))
        #expect(unscheduled.error?.code == "SUBSCRIPTION_NOT_SCHEDULED")
        #expect(unscheduled.result?["transactionReference"]?.stringValue == "1-2-tp-sub-unscheduled")
        #expect(unscheduled.result?["amount"]?.integerValue == 1050)

        // 70001: nothing is decided and the event key stays free for the final notification.
        let uncertain = try #require(await post(Self.tpEntries(orderId: "tp-uncertain", changing: 1, ["errorcode": "70001"]), as: "tp-uncertain"))
        #expect(uncertain.0 == 200)
        #expect(!uncertain.1.contains("duplicate"))
        #expect(try await Self.outcomes(h, "tp-uncertain", within: .milliseconds(400)).isEmpty)
        let fields: [TPNotification.Field] = [
            ("errorcode", "0"), ("orderreference", "tp-uncertain"), ("requesttypedescription", "AUTH"), ("sitereference", "test_site12345"),
            ("transactionreference", "1-2-701"), ("baseamount", "1050"), ("currencyiso3a", "GBP"),
        ]
        let final = try #require(
            await h.postCallback(
                "/callbacks/trustpayments/notification", body: TPNotification.formBody(fields: fields, password: tp.notificationPassword)))
        #expect(final.0 == 200)
        #expect(final.1.contains("applied"))
        #expect(try await Self.outcome(h, "tp-uncertain", .succeeded)?.result?["transactionReference"]?.stringValue == "1-2-701")
        await h.shutdown()
    }

    static func base64URL(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    @Test func trustPaymentsResponseJWTsAndNotificationsAreVerified() async throws {
        let h = try await PipelineHarness()
        defer { Task { await h.shutdown() } }
        try h.startSigner()
        try h.startCallbacks()
        let tp = Self.merchant.trustpayments!
        for id in ["tp-jwt-1", "tp-note-1"] {
            try await h.send(
                #"{"v":1,"orderId":"\#(id)","provider":"trustpayments","operation":"subscriptionJwt","amount":1050,"currency":"GBP","params":{"subscriptionType":"RECURRING","unit":"MONTH","frequency":1,"finalNumber":12}}"#
            )
        }
        _ = try await h.collect { $0.filter { $0.status == .pending }.count >= 2 }
        let now = Int64(Date().timeIntervalSince1970)
        func post(_ jwt: String, orderId: String = "tp-jwt-1") async -> (Int, String)? {
            await h.postCallback("/callbacks/trustpayments/jwt", body: Array(#"{"orderId":"\#(orderId)","jwt":"\#(jwt)"}"#.utf8))
        }

        let wrongSecret = TPResponseJWT.build(
            entries: Self.tpEntries(orderId: "tp-jwt-1"), requestReference: "W1", issuedAt: now,
            secret: Secret("not-the-merchant-secret-0123456789abcdef"))
        #expect(await post(wrongSecret)?.0 == 401)
        let claims = Array(#"{"iat":\#(now),"payload":{"response":[]}}"#.utf8)
        let algNone = Self.base64URL(Array(#"{"alg":"none","typ":"JWT"}"#.utf8)) + "." + Self.base64URL(claims) + "."
        #expect(await post(algNone).map { $0.0 / 100 } == 4)
        let hs512Input = Self.base64URL(Array(#"{"alg":"HS512","typ":"JWT"}"#.utf8)) + "." + Self.base64URL(claims)
        let algSwitch = hs512Input + "." + Self.base64URL(Array(Digest.sha256Hex(hs512Input).utf8))
        #expect(await post(algSwitch).map { $0.0 / 100 } == 4)
        let stale = TPResponseJWT.build(
            entries: Self.tpEntries(orderId: "tp-jwt-1"), requestReference: "W1", issuedAt: now - 7200, secret: tp.jwtSecret)
        #expect(await post(stale)?.0 == 400)
        #expect(try await Self.outcomes(h, "tp-jwt-1", within: .milliseconds(400)).isEmpty)

        let genuine = TPResponseJWT.build(entries: Self.tpEntries(orderId: "tp-jwt-1"), requestReference: "W1", issuedAt: now, secret: tp.jwtSecret)
        #expect(await post(genuine)?.0 == 200)
        let succeeded = try await Self.outcome(h, "tp-jwt-1", .succeeded)
        #expect(succeeded?.result?["transactionReference"]?.stringValue == "1-2-tp-jwt-1")
        #expect(await post(genuine)?.1.contains("duplicate") == true)

        // URL notification: the signature over the fields with the notification password.
        var fields: [TPNotification.Field] = [
            ("errorcode", "0"), ("orderreference", "tp-note-1"), ("requesttypedescription", "AUTH"), ("sitereference", "test_site12345"),
            ("transactionreference", "1-2-702"), ("baseamount", "1050"), ("currencyiso3a", "GBP"),
        ]
        let form = TPNotification.formBody(fields: fields, password: tp.notificationPassword)
        var tampered = String(decoding: form, as: UTF8.self)
        tampered = tampered.replacingOccurrences(of: "baseamount=1050", with: "baseamount=1")
        let refused = try #require(
            await h.postCallback(
                "/callbacks/trustpayments/notification", headers: [("Content-Type", "application/x-www-form-urlencoded")], body: Array(tampered.utf8))
        )
        #expect(refused.0 == 401)
        #expect(try await Self.outcomes(h, "tp-note-1", within: .milliseconds(400)).isEmpty)
        #expect(await h.postCallback("/callbacks/trustpayments/notification", body: form)?.0 == 200)
        #expect(try await Self.outcome(h, "tp-note-1", .succeeded) != nil)
        fields[0] = ("errorcode", "70000")
        await h.shutdown()
    }

    // MARK: - Nets

    @Test func netsWebhooksNeedTheRightAuthorizationAndADuplicateEventIsIgnored() async throws {
        let h = try await PipelineHarness(
            sandboxConfiguration: SandboxConfiguration(port: 0).with {
                $0.phonePe.callbackDelayMilliseconds = 3_600_000
                $0.nets.completeCheckoutAfterMilliseconds = 300
            })
        defer { Task { await h.shutdown() } }
        try h.startSigner()
        try h.startSubmitter()
        try h.startCallbacks()
        func create(_ id: String) -> String {
            #"{"v":1,"orderId":"\#(id)","provider":"nets","operation":"createSubscription","amount":9900,"currency":"SEK","params":{"endDate":"2030-12-31T23:59:59+01:00","interval":30,"reference":"ref-\#(id)"}}"#
        }
        // The sandbox completes the checkout and sends its genuine webhook.
        try await h.send(create("nets-live-1"))
        #expect(try await Self.outcome(h, "nets-live-1", .succeeded) != nil)

        // Hand-made deliveries for a second payment, whose checkout the sandbox completes too:
        // send ours first, before the sandbox's.
        let h2Order = "nets-hand-1"
        try await h.send(create(h2Order))
        let pending = try #require(try await Self.outcome(h, h2Order, .pending))
        let paymentId = try #require(pending.result?["paymentId"]?.stringValue)
        let content = NetsWebhookContent(
            kind: .reservationCreated, eventId: "evt-\(h2Order)", paymentId: paymentId, amount: 9900, currency: "SEK",
            timestampMilliseconds: Timestamp.nowMilliseconds())
        let forged = NetsSandbox.webhookDelivery(content, config: Self.merchant.nets!, tampering: .authorization("guess"))
        let refused = try #require(await h.postCallback("/callbacks/nets", headers: forged.headers.map { ($0.name, $0.value) }, body: forged.body))
        #expect(refused.0 == 401)
        #expect(!refused.1.contains("demoWebhookAuth123"))
        let genuine = NetsSandbox.webhookDelivery(content, config: Self.merchant.nets!)
        let first = try #require(await h.postCallback("/callbacks/nets", headers: genuine.headers.map { ($0.name, $0.value) }, body: genuine.body))
        #expect(first.0 == 200)
        #expect(first.1.contains("no_change"))
        let again = try #require(await h.postCallback("/callbacks/nets", headers: genuine.headers.map { ($0.name, $0.value) }, body: genuine.body))
        #expect(again.0 == 200)
        #expect(again.1.contains("duplicate"))
        #expect(try await Self.outcome(h, h2Order, .succeeded) != nil)
        await h.shutdown()
    }

    @Test func theSandboxsForgedAndMismatchedNetsWebhooksAreRefusedOrFailTheOrder() async throws {
        func run(_ variant: NetsWebhookVariant, _ id: String) async throws -> (PipelineHarness, [Outcome]) {
            let h = try await PipelineHarness(
                sandboxConfiguration: SandboxConfiguration(port: 0, outboundAttempts: 1).with {
                    $0.phonePe.callbackDelayMilliseconds = 3_600_000
                    $0.nets.webhookVariant = variant
                    $0.nets.completeCheckoutAfterMilliseconds = 200
                })
            try h.startSigner()
            try h.startSubmitter()
            try h.startCallbacks()
            try await h.send(
                #"{"v":1,"orderId":"\#(id)","provider":"nets","operation":"createSubscription","amount":9900,"currency":"SEK","params":{"endDate":"2030-12-31T23:59:59+01:00","interval":30,"reference":"ref-\#(id)"}}"#
            )
            return (h, try await h.collect(timeout: .seconds(4)) { $0.contains { $0.status.isTerminal } })
        }
        let (forged, forgedOutcomes) = try await run(.wrongAuthorization, "nets-forged-1")
        #expect(forgedOutcomes.map(\.status) == [.pending])
        let metrics = httpGet("http://127.0.0.1:\(forged.callbacksMetricsPort)/metrics") ?? ""
        #expect(metrics.contains(#"paypipe_callbacks_total{route="nets",result="BAD_AUTHORIZATION"} 1"#))
        await forged.shutdown()
        let (mismatched, mismatchedOutcomes) = try await run(.wrongAmount, "nets-mismatch-1")
        #expect(mismatchedOutcomes.last?.status == .failed)
        #expect(mismatchedOutcomes.last?.error?.code == "AMOUNT_MISMATCH")
        await mismatched.shutdown()
    }

    // MARK: - Viva

    static func vivaOrder(_ id: String, merchant: String = "default") -> String {
        #"{"v":1,"orderId":"\#(id)","merchant":"\#(merchant)","provider":"viva","operation":"sale","amount":1050,"currency":"EUR","params":{"tipAmount":100}}"#
    }

    static func forwardBody(_ id: String, uri: String, merchant: String = "default") -> [UInt8] {
        let body: JSONValue = ["orderId": .string(id), "uri": .string(uri), "merchant": .string(merchant)]
        return Array(body.serialized.utf8)
    }

    /// The customer pays in the (emulated) Viva app: the sandbox records the sale, as Viva
    /// would, and answers the callback URI the app opens.
    static func pay(_ h: PipelineHarness, _ sale: VivaSale, decline: Bool = false) async -> String? {
        let body: JSONValue = ["uri": .string(sale.url), "decline": .bool(decline)]
        let port = h.sandboxPort
        guard
            let (status, text) = await offCooperativeThreads({
                httpPost(port: port, path: "/viva/sale", headers: [], body: Array(body.serialized.utf8))
            }),
            status == 200
        else {
            return nil
        }
        return (try? JSONValue.parse(Array(text.utf8)))?["callback"]?.stringValue
    }

    @Test func vivaResultsSettleOnlyWhenVivaConfirmsThem() async throws {
        let h = try await PipelineHarness()
        defer { Task { await h.shutdown() } }
        try h.startSigner()
        try h.startCallbacks()
        let ids = ["viva-ok", "viva-amount", "viva-ref", "viva-forged", "viva-declined"]
        for id in ids { try await h.send(Self.vivaOrder(id)) }
        let pending = try await h.collect { $0.filter { $0.status == .pending }.count >= ids.count }
        func sale(_ id: String) throws -> VivaSale {
            let url = try #require(pending.first { $0.orderId == id }?.result?["url"]?.stringValue)
            return try VivaSandbox.readSale(url)
        }

        // Forged: a made-up success URI (Viva never saw its transactionId) is refused, order unchanged.
        let forged = try #require(
            await h.postCallback("/callbacks/viva", body: Self.forwardBody("viva-forged", uri: VivaSandbox.approved(try sale("viva-forged")).uri)))
        #expect(forged.0 == 404)
        #expect(forged.1.contains("TRANSACTION_NOT_FOUND"))
        #expect(!forged.1.contains("demo-viva-client-secret"))

        // Confirmed: paid in the app, so Viva knows the transaction; the order succeeds.
        let paid = try #require(await Self.pay(h, try sale("viva-ok")))
        let applied = try #require(await h.postCallback("/callbacks/viva", body: Self.forwardBody("viva-ok", uri: paid)))
        #expect(applied.0 == 200 && applied.1.contains("applied"))
        #expect(await h.postCallback("/callbacks/viva", body: Self.forwardBody("viva-ok", uri: paid))?.1.contains("duplicate") == true)

        // The customer edited the sale URL to pay 1 cent: Viva's amount differs → failed for review.
        var cheap = try sale("viva-amount")
        cheap.amount = 1
        cheap.tipAmount = nil
        let cheapResult = try #require(await Self.pay(h, cheap))
        #expect(await h.postCallback("/callbacks/viva", body: Self.forwardBody("viva-amount", uri: cheapResult))?.0 == 200)

        // A transaction of another sale says nothing about this order: refused, order unchanged.
        var elsewhere = try sale("viva-ref")
        elsewhere.clientTransactionId = "someone-else"
        let otherResult = try #require(await Self.pay(h, elsewhere))
        let mismatch = try #require(await h.postCallback("/callbacks/viva", body: Self.forwardBody("viva-ref", uri: otherResult)))
        #expect(mismatch.0 == 409 && mismatch.1.contains("REFERENCE_MISMATCH"))

        let declined = try #require(await Self.pay(h, try sale("viva-declined"), decline: true))
        #expect(await h.postCallback("/callbacks/viva", body: Self.forwardBody("viva-declined", uri: declined))?.0 == 200)

        // Shape first: nothing here reaches the order store.
        #expect(await h.postCallback("/callbacks/viva", body: Array(#"{"orderId":"viva-ok"}"#.utf8))?.0 == 400)
        #expect(await h.postCallback("/callbacks/viva", body: Array(#"{"orderId":"no-such-order","uri":"x://result"}"#.utf8))?.0 == 400)
        // A genuine transaction named with an orderId that does not exist.
        #expect(await h.postCallback("/callbacks/viva", body: Self.forwardBody("no-such-order", uri: paid))?.0 == 404)

        let ends = try await h.collect { o in Set(o.filter { $0.status.isTerminal }.map(\.orderId)).count >= 3 }
        let byId = Dictionary(ends.filter { $0.status.isTerminal }.map { ($0.orderId, $0) }, uniquingKeysWith: { a, _ in a })
        #expect(byId["viva-ok"]?.status == .succeeded)
        #expect(byId["viva-ok"]?.result?["confirmed"] == .bool(true))
        #expect(byId["viva-ok"]?.result?["statusId"] == "F")
        #expect(byId["viva-amount"]?.error?.code == "AMOUNT_MISMATCH")
        #expect(byId["viva-declined"]?.error?.code == "VIVA_SALE_FAILED")
        let unchanged = try await h.collect(timeout: .milliseconds(500)) { _ in false }
        for id in ["viva-forged", "viva-ref"] {
            #expect(!(ends + unchanged).contains { $0.orderId == id && $0.status.isTerminal }, "\(id) must stay pending")
        }
        await h.shutdown()
    }

    @Test func vivaWithoutAPICredentialsNeedsTheOptInAndTheRouteIsRateLimited() async throws {
        let section: JSONValue = ["merchantKey": "SG23323424EXS3", "appId": "com.example.app", "callback": "interapp-callback"]
        var optIn = section
        if case .object(var fields) = optIn {
            fields["acceptUnconfirmedCallbacks"] = true
            optIn = .object(fields)
        }
        let h = try await PipelineHarness(extraMerchants: ["viva-optin": ["viva": optIn], "viva-strict": ["viva": section]])
        defer { Task { await h.shutdown() } }
        try h.startSigner()
        try h.startCallbacks()
        try await h.send(Self.vivaOrder("viva-unconfirmed", merchant: "viva-optin"))
        try await h.send(Self.vivaOrder("viva-refused", merchant: "viva-strict"))
        let pending = try await h.collect { $0.filter { $0.status == .pending }.count >= 2 }
        func approvedURI(_ id: String) throws -> String {
            let url = try #require(pending.first { $0.orderId == id }?.result?["url"]?.stringValue)
            return VivaSandbox.approved(try VivaSandbox.readSale(url)).uri
        }

        let refused = try #require(
            await h.postCallback(
                "/callbacks/viva", body: Self.forwardBody("viva-refused", uri: try approvedURI("viva-refused"), merchant: "viva-strict")))
        #expect(refused.0 == 403 && refused.1.contains("CONFIRMATION_UNAVAILABLE"))
        let accepted = try #require(
            await h.postCallback(
                "/callbacks/viva", body: Self.forwardBody("viva-unconfirmed", uri: try approvedURI("viva-unconfirmed"), merchant: "viva-optin")))
        #expect(accepted.0 == 200)
        let succeeded = try await Self.outcome(h, "viva-unconfirmed", .succeeded)
        #expect(succeeded?.result?["confirmed"] == .bool(false))

        // One app backend forwards every customer's result from one address: many orders pass.
        // One order hammered is cut off: 429 before Viva or the ledger is asked anything.
        // Blocking sockets: off the cooperative pool, which other suites share.
        let port = h.callbacksPort
        let statuses: [Int] = await withCheckedContinuation { done in
            DispatchQueue.global().async {
                done.resume(
                    returning: (0..<120).map { index in
                        httpPost(
                            port: port, path: "/callbacks/viva", headers: [],
                            body: Self.forwardBody("probe-\(index)", uri: "x://result", merchant: "viva-optin"))?.0 ?? 0
                    })
            }
        }
        #expect(statuses.allSatisfy { $0 == 400 }, "many orders from one address: \(Set(statuses))")
        let hammered: [(Int, String)] = await withCheckedContinuation { done in
            DispatchQueue.global().async {
                done.resume(
                    returning: (0..<20).compactMap { _ in
                        httpPost(
                            port: port, path: "/callbacks/viva", headers: [],
                            body: Self.forwardBody("viva-refused", uri: "x://result", merchant: "viva-strict"))
                    })
            }
        }
        #expect(hammered.filter { $0.0 == 429 && $0.1.contains("RATE_LIMITED") }.count >= 10)
        #expect(Set(hammered.map(\.0)).isSubset(of: [400, 429]))
        #expect(try await Self.outcomes(h, "viva-refused", within: .milliseconds(300)).isEmpty)
        await h.shutdown()
    }

    // MARK: - Cleeng

    static func cleengOrder(_ id: String) -> String {
        #"{"v":1,"orderId":"\#(id)","provider":"cleeng","operation":"appleReceipt","params":{"customerToken":"tok-\#(id)","offerId":"S123456789_US","receiptData":"ZGVtbw==","transactionId":"tx-\#(id)"}}"#
    }

    @Test func cleengAccessGrantedOnTheThirdPollSucceedsOnCadence() async throws {
        let h = try await PipelineHarness(
            sandboxConfiguration: SandboxConfiguration(port: 0).with {
                $0.phonePe.callbackDelayMilliseconds = 3_600_000
                $0.cleeng.grantOnPoll = 3
            },
            timers: ["cleengPollIntervalMs": 400, "cleengGiveUpMs": 3000])
        defer { Task { await h.shutdown() } }
        try h.startSigner()
        try h.startSubmitter()
        try h.startPoller()
        try await h.send(Self.cleengOrder("cl-grant-1"))
        let succeeded = try await Self.outcome(h, "cl-grant-1", .succeeded)
        #expect(succeeded?.result?["accessGranted"] == .bool(true))
        let times = h.sandbox.ledger.cleengPollTimes(customerToken: "tok-cl-grant-1")
        #expect(times.count == 3)
        for (index, time) in times.enumerated() {
            // Measured from the sandbox's receipt acceptance; the schedule starts at the ledger's.
            // Never early; late only by what a loaded machine delays a timer (a schedule counted
            // from each previous poll instead would drift further with every poll).
            #expect(time >= Int64(index + 1) * 400 - 100 && time <= Int64(index + 1) * 400 + 600, "poll \(index + 1) at \(time) ms")
        }
        await h.shutdown()
    }

    @Test func cleengAccessNeverGrantedFailsAtTheDeadlineAndARestartedPollerKeepsTheDeadline() async throws {
        let h = try await PipelineHarness(
            sandboxConfiguration: SandboxConfiguration(port: 0).with {
                $0.phonePe.callbackDelayMilliseconds = 3_600_000
                $0.cleeng.grantAfterMilliseconds = nil
            },
            timers: ["cleengPollIntervalMs": 300, "cleengGiveUpMs": 2400])
        defer { Task { await h.shutdown() } }
        try h.startSigner()
        try h.startSubmitter()
        let poller = try h.startPoller()
        try await h.send(Self.cleengOrder("cl-never-1"))
        let clock = ContinuousClock(), start = clock.now
        _ = try await Self.outcome(h, "cl-never-1", .pending)
        // The poller dies mid-schedule (once it has polled twice); a new one asks the ledger for
        // the pending receipts.
        #expect(await eventually(within: .seconds(20)) { h.sandbox.ledger.cleengPollTimes(customerToken: "tok-cl-never-1").count >= 2 })
        poller.signal(SIGKILL)
        try h.startPoller()
        let failed = try await Self.outcome(h, "cl-never-1", .failed)
        let elapsed = clock.now - start
        #expect(failed?.error?.code == "ACCESS_NOT_GRANTED")
        #expect(elapsed >= .milliseconds(2300))
        #expect(elapsed < .milliseconds(5000))
        let polls = h.sandbox.ledger.cleengPollTimes(customerToken: "tok-cl-never-1")
        #expect(polls.count >= 6)
        #expect(polls.allSatisfy { $0 <= 2500 })
        await h.shutdown()
    }
}

import NetsEasy
import NetsEasyTesting
import PaypipeCore
import Testing

@testable import NetsEasyEmulation
@testable import Sandbox

@Suite struct NetsSandboxTests {
    static func createOrder(_ orderId: String) -> Order {
        Order(
            orderId: orderId, operation: .createSubscription, amount: 1050, currency: "SEK",
            params: ["endDate": "2049-07-18T00:00:00+01:00", "interval": 30, "reference": "sub-42"])
    }

    static var now: Int64 { Timestamp.nowMilliseconds() / 1000 }

    @Test func anIdempotencyKeyReplayGetsTheFirstAnswerAndTakesEffectOnce() async throws {
        try await withSandbox(SandboxConfiguration().with { $0.nets.completeCheckoutAfterMilliseconds = nil }) { sandbox in
            let config = try #require(try Fixtures.merchant(sandbox.config).nets)
            let order = Self.createOrder("nets-replay")
            let request = try NetsPayments.sign(order, config: config, now: Self.now)
            #expect(request.url == "http://127.0.0.1:\(sandbox.port)/nets/v1/payments")
            let first = try await sandbox.send(request)
            let second = try await sandbox.send(request)
            #expect(first.status == 201)
            #expect(second.status == 201)
            #expect(first.body == second.body)
            #expect(NetsPayments.classifyCreate(first).kind == "pending")

            let key = "nets:" + NetsPayments.idempotencyKey(for: order.key)
            #expect(sandbox.ledger.requests(key) == 2)
            #expect(sandbox.ledger.effects(key) == 1)
            let document = try await sandbox.ledgerDocument()
            #expect(document["requests"]?[key] == .integer(2))
            #expect(document["effects"]?[key] == .integer(1))
            #expect(document["total"] == .integer(2))
        }
    }

    @Test func aWrongSecretKeyIsRefusedWith401() async throws {
        try await withSandbox { sandbox in
            var config = try #require(try Fixtures.merchant(sandbox.config).nets)
            config.secretKey = Secret("wrong-key")
            let request = try NetsPayments.sign(Self.createOrder("nets-401"), config: config, now: Self.now)
            let response = try await sandbox.send(request)
            #expect(response.status == 401)
            #expect(NetsPayments.classifyCreate(response).kind == "failed:NETS_UNAUTHORIZED")
            #expect(sandbox.ledger.effects("nets:" + NetsPayments.idempotencyKey(for: Self.createOrder("nets-401").key)) == 0)
        }
    }

    @Test func checkoutCompletesThenSubscriptionIsReadableChargeableAndTheWebhookArrives() async throws {
        try await Receiver.run { receiver, callbackPort in
            let settings = SandboxConfiguration().with { $0.nets.completeCheckoutAfterMilliseconds = 50 }
            try await withSandbox(settings, callbackPort: callbackPort) { sandbox in
                let config = try #require(try Fixtures.merchant(sandbox.config).nets)
                let webhookURL = "http://127.0.0.1:\(callbackPort)/callbacks/nets"
                let create = try NetsPayments.sign(Self.createOrder("nets-flow"), config: config, now: Self.now, webhookURL: webhookURL)
                let created = try await sandbox.send(create)
                let paymentId = try #require(NetsPayments.classifyCreate(created).result?["paymentId"]?.stringValue)

                let deliveries = try await receiver.wait(for: 1)
                let delivery = try #require(deliveries.first)
                #expect(delivery.path == "/callbacks/nets")
                guard let event = try? NetsWebhook.verify(headers: delivery.headers, body: delivery.body, config: config) else {
                    Issue.record("webhook was not authentic")
                    return
                }
                #expect(event.paymentId == paymentId)
                #expect(event.kind == .checkoutCompleted)
                #expect(event.amount == 1050)

                // getSubscription: payment, then the subscription the module asks for next.
                let fetch = try NetsPayments.sign(
                    Order(orderId: "nets-get", operation: .getSubscription, params: ["paymentId": .string(paymentId)]), config: config, now: Self.now)
                let payment = try await sandbox.send(fetch)
                guard case .send(let next) = NetsPayments.handle(payment, to: fetch) else {
                    Issue.record("expected a subscription request after the payment")
                    return
                }
                let subscription = try await sandbox.send(next)
                let verdict = NetsPayments.classifySubscription(subscription)
                #expect(verdict.kind == "succeeded")
                let subscriptionId = try #require(verdict.result?["subscriptionId"]?.stringValue)

                let chargeOrder = Order(
                    orderId: "nets-charge", operation: .chargeSubscription, amount: 1050, currency: "SEK",
                    params: ["subscriptionId": .string(subscriptionId), "reference": "charge-1"])
                let charge = try NetsPayments.sign(chargeOrder, config: config, now: Self.now)
                let charged = try await sandbox.send(charge)
                #expect(NetsPayments.classifyCharge(charged).kind == "succeeded")
                #expect(sandbox.ledger.effects("nets:" + NetsPayments.idempotencyKey(for: chargeOrder.key)) == 1)
            }
        }
    }

    @Test func aChargeOfAnUnknownSubscriptionIsNotFound() async throws {
        try await withSandbox { sandbox in
            let config = try #require(try Fixtures.merchant(sandbox.config).nets)
            let chargeOrder = Order(
                orderId: "nets-charge-404", operation: .chargeSubscription, amount: 1050, currency: "SEK",
                params: ["subscriptionId": "d079718bff6345dd947b4950c023750f", "reference": "charge-1"])
            let response = try await sandbox.send(try NetsPayments.sign(chargeOrder, config: config, now: Self.now))
            #expect(response.status == 404)
            #expect(NetsPayments.classifyCharge(response).kind.hasPrefix("failed"))
            #expect(sandbox.ledger.effects("nets:" + NetsPayments.idempotencyKey(for: chargeOrder.key)) == 0)
        }
    }
}

// MARK: The emulator on its own, without the server

extension NetsSandboxTests {
    static func sandbox() -> NetsSandbox { NetsSandbox(secretKey: Secret(NetsFixtures.secretKey)) }

    /// Creates the fixture's subscription payment (registering the fixture's webhook); its paymentId.
    static func createPayment(in sandbox: inout NetsSandbox) throws -> String {
        let create = try NetsPayments.createSubscription(
            NetsFixtures.createOrder(), config: NetsFixtures.config, now: NetsFixtures.now, webhookURL: NetsFixtures.webhookURL)
        let answer = NetsPayments.classifyCreate(sandbox.handle(create, now: NetsFixtures.now))
        let created: [String: JSONValue]? = if case .pending(let result) = answer { result } else { nil }
        return try #require(created?["paymentId"]?.stringValue, "create failed: \(answer)")
    }

    static func errorFields(_ response: HTTPResponseSpec) -> [String] {
        (try? JSONValue.parse(response.body))?["errors"]?.objectValue?.keys.sorted() ?? []
    }

    static func withBody(_ request: HTTPRequestSpec, _ change: (inout [String: JSONValue]) -> Void) throws -> HTTPRequestSpec {
        var body = try #require(try JSONValue.parse(request.body).objectValue)
        change(&body)
        var copy = request
        copy.body = Array(JSONValue.object(body).serialized.utf8)
        return copy
    }

    @Test func createIsAcceptedAndReplaysGiveTheFirstAnswer() throws {
        var sandbox = Self.sandbox()
        let request = try NetsPayments.createSubscription(
            NetsFixtures.createOrder(), config: NetsFixtures.config, now: NetsFixtures.now, webhookURL: NetsFixtures.webhookURL)
        let first = sandbox.handle(request, now: NetsFixtures.now)
        #expect(first.status == 201)
        guard case .pending(let result) = NetsPayments.classifyCreate(first) else {
            Issue.record("expected pending")
            return
        }
        #expect(result["paymentId"]?.stringValue?.count == 32)
        let replay = sandbox.handle(request, now: NetsFixtures.now + 5)
        #expect(replay == first)
        #expect(sandbox.payments.count == 1)

        let second = sandbox.handle(
            try NetsPayments.createSubscription(NetsFixtures.createOrder(orderId: "ord-2"), config: NetsFixtures.config, now: NetsFixtures.now),
            now: NetsFixtures.now)
        #expect(second.status == 201 && second.body != first.body)
    }

    @Test func wrongKeyIsUnauthorizedWithoutBody() throws {
        var sandbox = Self.sandbox()
        var config = NetsFixtures.config
        config.secretKey = Secret("another-key")
        let response = sandbox.handle(
            try NetsPayments.createSubscription(NetsFixtures.createOrder(), config: config, now: NetsFixtures.now), now: NetsFixtures.now)
        #expect(response.status == 401)
        #expect(response.body.isEmpty)
        var bearer = try NetsPayments.createSubscription(NetsFixtures.createOrder(), config: NetsFixtures.config, now: NetsFixtures.now)
        bearer.headers = bearer.headers.map { $0.name == "Authorization" ? HTTPHeader("Authorization", "Bearer " + NetsFixtures.secretKey) : $0 }
        #expect(sandbox.handle(bearer, now: NetsFixtures.now).status == 401)
    }

    @Test func headersAreCheckedLikeNets() throws {
        let request = try NetsPayments.createSubscription(NetsFixtures.createOrder(), config: NetsFixtures.config, now: NetsFixtures.now)
        #expect(NetsSandbox.check(request, secretKey: Secret(NetsFixtures.secretKey), now: NetsFixtures.now) == nil)

        var noTag = request
        noTag.headers.removeAll { $0.name == "commercePlatformTag" }
        let tagResponse = try #require(NetsSandbox.check(noTag, secretKey: Secret(NetsFixtures.secretKey), now: NetsFixtures.now))
        #expect(tagResponse.status == 400)
        #expect(Self.errorFields(tagResponse) == ["commercePlatformTag"])

        var longKey = request
        longKey.headers = longKey.headers.map { $0.name == "Idempotency-Key" ? HTTPHeader("Idempotency-Key", String(repeating: "k", count: 65)) : $0 }
        #expect(
            Self.errorFields(try #require(NetsSandbox.check(longKey, secretKey: Secret(NetsFixtures.secretKey), now: NetsFixtures.now))) == [
                "Idempotency-Key"
            ])

        var noKey = request
        noKey.headers.removeAll { $0.name == "Idempotency-Key" }
        #expect(
            Self.errorFields(try #require(NetsSandbox.check(noKey, secretKey: Secret(NetsFixtures.secretKey), now: NetsFixtures.now))) == [
                "Idempotency-Key"
            ])

        var textBody = request
        textBody.headers = textBody.headers.map { $0.name == "Content-Type" ? HTTPHeader("Content-Type", "text/plain") : $0 }
        #expect(NetsSandbox.check(textBody, secretKey: Secret(NetsFixtures.secretKey), now: NetsFixtures.now)?.status == 415)
    }

    @Test func bodyIsCheckedLikeNets() throws {
        let request = try NetsPayments.createSubscription(NetsFixtures.createOrder(), config: NetsFixtures.config, now: NetsFixtures.now)
        let key = Secret(NetsFixtures.secretKey)
        // The signer accepted it; ten years later Nets would refuse the same end date.
        let late = try #require(NetsSandbox.check(request, secretKey: key, now: NetsFixtures.now + 10 * 365 * 86_400))
        #expect(Self.errorFields(late) == ["subscription.endDate"])

        let zulu = try Self.withBody(request) { $0["subscription"] = ["endDate": "2029-07-18T00:00:00Z", "interval": 0] }
        #expect(Self.errorFields(try #require(NetsSandbox.check(zulu, secretKey: key, now: NetsFixtures.now))) == ["subscription.endDate"])

        let mismatch = try Self.withBody(request) { body in
            var order = body["order"]?.objectValue ?? [:]
            order["amount"] = 999
            body["order"] = .object(order)
        }
        #expect(Self.errorFields(try #require(NetsSandbox.check(mismatch, secretKey: key, now: NetsFixtures.now))) == ["order.amount"])

        let embedded = try Self.withBody(request) { $0["checkout"] = ["integrationType": "EmbeddedCheckout"] }
        #expect(Self.errorFields(try #require(NetsSandbox.check(embedded, secretKey: key, now: NetsFixtures.now))) == ["checkout.integrationType"])

        let negative = try Self.withBody(request) { $0["subscription"] = ["endDate": "2029-07-18T00:00:00+01:00", "interval": -1] }
        #expect(Self.errorFields(try #require(NetsSandbox.check(negative, secretKey: key, now: NetsFixtures.now))) == ["subscription.interval"])

        var garbage = request
        garbage.body = Array("{not json".utf8)
        #expect(Self.errorFields(try #require(NetsSandbox.check(garbage, secretKey: key, now: NetsFixtures.now))) == ["body"])

        // The sandbox's 400 is understood by the classifier.
        guard case .failed("NETS_BAD_REQUEST", let message) = NetsPayments.classifyCreate(late) else {
            Issue.record("expected NETS_BAD_REQUEST")
            return
        }
        #expect(message.contains("subscription.endDate"))
    }

    @Test func fullSubscriptionLifecycle() throws {
        var sandbox = Self.sandbox()
        let paymentId = try Self.createPayment(in: &sandbox)

        // Before the customer completes the page there is no subscription yet.
        let lookup = try NetsPayments.sign(NetsFixtures.getOrder(paymentId: .string(paymentId)), config: NetsFixtures.config, now: NetsFixtures.now)
        guard case .finish(.failed("NETS_SUBSCRIPTION_NOT_FOUND", _)) = NetsPayments.handle(sandbox.handle(lookup, now: NetsFixtures.now), to: lookup)
        else {
            Issue.record("expected no subscription yet")
            return
        }

        let deliveries = sandbox.completeCheckout(paymentId: paymentId, timestampMilliseconds: NetsFixtures.now * 1000 + 123)
        #expect(deliveries.count == 1)
        let delivery = try #require(deliveries.first)
        #expect(delivery.url == NetsFixtures.webhookURL)
        guard let event = try? NetsWebhook.verify(headers: delivery.headers, body: delivery.body, config: NetsFixtures.config) else {
            Issue.record("the sandbox's delivery must verify")
            return
        }
        #expect(event.paymentId == paymentId)
        #expect(
            NetsWebhook.interpret(event, for: NetsFixtures.createOrder()) == .apply(.succeeded(["paymentId": .string(paymentId), "amount": 1050])))
        #expect(sandbox.completeCheckout(paymentId: paymentId, timestampMilliseconds: 0).first?.body.count ?? 0 > 0)  // redelivery
        #expect(sandbox.subscriptions.count == 1)

        guard case .send(let second) = NetsPayments.handle(sandbox.handle(lookup, now: NetsFixtures.now), to: lookup) else {
            Issue.record("expected step 2")
            return
        }
        guard case .finish(.succeeded(let details)) = NetsPayments.handle(sandbox.handle(second, now: NetsFixtures.now), to: second),
            let subscriptionId = details["subscriptionId"]?.stringValue
        else {
            Issue.record("expected subscription details")
            return
        }
        #expect(details["interval"] == 30)
        #expect(details["endDate"] == "2029-07-18T00:00:00+01:00")

        let charge = try NetsPayments.chargeSubscription(
            NetsFixtures.chargeOrder(subscriptionId: .string(subscriptionId)), config: NetsFixtures.config)
        let charged = sandbox.handle(charge, now: NetsFixtures.now)
        guard case .succeeded(let ids) = NetsPayments.classifyCharge(charged) else {
            Issue.record("expected a charge")
            return
        }
        #expect(ids["chargeId"] != nil)
        #expect(sandbox.handle(charge, now: NetsFixtures.now + 60) == charged)  // replay: same charge, not a second one

        let reused = try Self.withBody(charge) { body in
            var order = body["order"]?.objectValue ?? [:]
            order["reference"] = "different"
            body["order"] = .object(order)
        }
        #expect(Self.errorFields(sandbox.handle(reused, now: NetsFixtures.now)) == ["Idempotency-Key"])

        let expired = try NetsPayments.chargeSubscription(
            NetsFixtures.chargeOrder(orderId: "ord-late", subscriptionId: .string(subscriptionId)), config: NetsFixtures.config)
        #expect(Self.errorFields(sandbox.handle(expired, now: NetsFixtures.now + 10 * 365 * 86_400)) == ["subscriptionId"])
    }

    @Test func unknownIdsAndRoutesAreNotFound() throws {
        var sandbox = Self.sandbox()
        let charge = try NetsPayments.chargeSubscription(NetsFixtures.chargeOrder(), config: NetsFixtures.config)
        let response = sandbox.handle(charge, now: NetsFixtures.now)
        #expect(response.status == 404)
        #expect(NetsPayments.classifyCharge(response) == .failed(code: "NETS_NOT_FOUND", message: "Nets does not know this subscription"))
        let auth = [HTTPHeader("Authorization", NetsFixtures.secretKey)]
        #expect(sandbox.handle(HTTPRequestSpec(method: .GET, url: "/v1/payments/..%2Fsubscriptions", headers: auth), now: 0).status == 404)
        #expect(sandbox.handle(HTTPRequestSpec(method: .GET, url: "/v1/refunds/abc", headers: auth), now: 0).status == 404)
        #expect(sandbox.handle(HTTPRequestSpec(method: .GET, url: "/v1/payments/abc"), now: 0).status == 401)
    }

    @Test func failedReservationDelivery() throws {
        var sandbox = Self.sandbox()
        let paymentId = try Self.createPayment(in: &sandbox)
        let delivery = try #require(sandbox.failReservation(paymentId: paymentId, timestampMilliseconds: 0).first)
        guard let event = try? NetsWebhook.verify(headers: delivery.headers, body: delivery.body, config: NetsFixtures.config) else {
            Issue.record("expected authentic")
            return
        }
        guard case .apply(.failed("NETS_RESERVATION_FAILED", _)) = NetsWebhook.interpret(event, for: NetsFixtures.createOrder()) else {
            Issue.record("expected failed")
            return
        }
        #expect(sandbox.failReservation(paymentId: "unknown", timestampMilliseconds: 0).isEmpty)
    }

    @Test func tamperedDeliveries() throws {
        let content = NetsWebhookContent(
            kind: .checkoutCompleted, eventId: "e1", paymentId: "p1", amount: 1050, currency: "SEK", reference: "sub-42", timestampMilliseconds: 0)
        let genuine = NetsSandbox.webhookDelivery(content, config: NetsFixtures.config)
        #expect(genuine.authorization == NetsFixtures.webhookSecret)
        guard let event = try? NetsWebhook.verify(headers: genuine.headers, body: genuine.body, config: NetsFixtures.config) else {
            Issue.record("genuine")
            return
        }
        #expect(NetsWebhook.interpret(event, for: NetsFixtures.createOrder()) == .apply(.succeeded(["paymentId": "p1", "amount": 1050])))

        let forged = NetsSandbox.webhookDelivery(content, config: NetsFixtures.config, tampering: .authorization("guess"))
        #expect(throws: CallbackRejection.forged(CallbackRejection.Code.badAuthorization, "the Authorization header does not match")) {
            try NetsWebhook.verify(headers: forged.headers, body: forged.body, config: NetsFixtures.config)
        }
        let cheap = NetsSandbox.webhookDelivery(content, config: NetsFixtures.config, tampering: .amount(1))
        guard let cheapEvent = try? NetsWebhook.verify(headers: cheap.headers, body: cheap.body, config: NetsFixtures.config),
            case .apply(.failed("AMOUNT_MISMATCH", _)) = NetsWebhook.interpret(cheapEvent, for: NetsFixtures.createOrder())
        else {
            Issue.record("amount tampering must give AMOUNT_MISMATCH")
            return
        }
        let renamed = NetsSandbox.webhookDelivery(content, config: NetsFixtures.config, tampering: .reference("other"))
        guard let renamedEvent = try? NetsWebhook.verify(headers: renamed.headers, body: renamed.body, config: NetsFixtures.config),
            case .apply(.failed("REFERENCE_MISMATCH", _)) = NetsWebhook.interpret(renamedEvent, for: NetsFixtures.createOrder())
        else {
            Issue.record("reference tampering must give REFERENCE_MISMATCH")
            return
        }
    }

    @Test(arguments: [NetsWebhookEvent.Kind.reservationCreated, .reservationFailed, .chargeCreated, .chargeFailed, .other("payment.cancel.created")])
    func everyBuiltEventParses(kind: NetsWebhookEvent.Kind) {
        let content = NetsWebhookContent(kind: kind, eventId: "e1", paymentId: "p1", amount: 1050, currency: "SEK", timestampMilliseconds: 1)
        let delivery = NetsSandbox.webhookDelivery(content, config: NetsFixtures.config)
        guard let event = try? NetsWebhook.verify(headers: delivery.headers, body: delivery.body, config: NetsFixtures.config) else {
            Issue.record("\(kind) must parse")
            return
        }
        #expect(event.kind == kind)
        #expect(event.amount == (kind == .other("payment.cancel.created") ? nil : 1050))
        // Nets' form: an offset and four fraction digits (php-payment-sdk webhook payloads).
        #expect(event.timestamp == "1970-01-01T00:00:00.0010+00:00")
    }

    @Test func aPaymentWithoutRegisteredWebhooksGetsNoneAndGetPaymentTellsItsState() throws {
        var sandbox = Self.sandbox()
        func create(_ orderId: String) throws -> String? {
            let request = try NetsPayments.createSubscription(
                NetsFixtures.createOrder(orderId: orderId), config: NetsFixtures.config, now: NetsFixtures.now)
            guard case .pending(let created) = NetsPayments.classifyCreate(sandbox.handle(request, now: NetsFixtures.now)) else { return nil }
            return created["paymentId"]?.stringValue
        }
        func payment(_ paymentId: String) throws -> ProviderVerdict {
            let request = try NetsPayments.fetchPayment(paymentId: paymentId, config: NetsFixtures.config)
            return NetsPendingCreate.read(sandbox.handle(request, now: NetsFixtures.now), paymentId: paymentId)
        }
        let paid = try #require(try create("ord-nohook-1"))
        #expect(try payment(paid) == .pending(["paymentId": .string(paid)]))
        // No webhook was registered, so none is sent; Nets' payment shows the subscription.
        #expect(sandbox.completeCheckout(paymentId: paid, timestampMilliseconds: 1).isEmpty)
        let subscriptionId = try #require(sandbox.payments[paid]?.subscriptionId)
        #expect(try payment(paid) == .succeeded(["paymentId": .string(paid), "subscriptionId": .string(subscriptionId), "amount": 1050]))

        let abandoned = try #require(try create("ord-nohook-2"))
        sandbox.terminateCheckout(paymentId: abandoned, timestampMilliseconds: 2)
        guard case .failed("NETS_CHECKOUT_ABANDONED", _) = try payment(abandoned) else {
            Issue.record("a terminated checkout reads as abandoned")
            return
        }
        // A terminated checkout can no longer be completed.
        #expect(sandbox.completeCheckout(paymentId: abandoned, timestampMilliseconds: 3).isEmpty)
        #expect(sandbox.payments[abandoned]?.subscriptionId == nil)
    }
}

import NetsEasy
import PaypipeCore
import Testing

@Suite struct NetsSandboxTests {
    static func sandbox() -> NetsSandbox { NetsSandbox(secretKey: Secret(Fixtures.secretKey)) }

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
        let request = try NetsPayments.createSubscription(Fixtures.createOrder(), config: Fixtures.config, now: Fixtures.now, webhookURL: Fixtures.webhookURL)
        let first = sandbox.handle(request, now: Fixtures.now)
        #expect(first.status == 201)
        guard case .pending(let result) = NetsPayments.classifyCreate(first) else {
            Issue.record("expected pending")
            return
        }
        #expect(result["paymentId"]?.stringValue?.count == 32)
        let replay = sandbox.handle(request, now: Fixtures.now + 5)
        #expect(replay == first)
        #expect(sandbox.payments.count == 1)

        let second = sandbox.handle(try NetsPayments.createSubscription(Fixtures.createOrder(orderId: "ord-2"), config: Fixtures.config, now: Fixtures.now), now: Fixtures.now)
        #expect(second.status == 201 && second.body != first.body)
    }

    @Test func wrongKeyIsUnauthorizedWithoutBody() throws {
        var sandbox = Self.sandbox()
        var config = Fixtures.config
        config.secretKey = Secret("another-key")
        let response = sandbox.handle(try NetsPayments.createSubscription(Fixtures.createOrder(), config: config, now: Fixtures.now), now: Fixtures.now)
        #expect(response.status == 401)
        #expect(response.body.isEmpty)
        var bearer = try NetsPayments.createSubscription(Fixtures.createOrder(), config: Fixtures.config, now: Fixtures.now)
        bearer.headers = bearer.headers.map { $0.name == "Authorization" ? HTTPHeader("Authorization", "Bearer " + Fixtures.secretKey) : $0 }
        #expect(sandbox.handle(bearer, now: Fixtures.now).status == 401)
    }

    @Test func headersAreCheckedLikeNets() throws {
        let request = try NetsPayments.createSubscription(Fixtures.createOrder(), config: Fixtures.config, now: Fixtures.now)
        #expect(NetsSandbox.check(request, secretKey: Secret(Fixtures.secretKey), now: Fixtures.now) == nil)

        var noTag = request
        noTag.headers.removeAll { $0.name == "commercePlatformTag" }
        let tagResponse = try #require(NetsSandbox.check(noTag, secretKey: Secret(Fixtures.secretKey), now: Fixtures.now))
        #expect(tagResponse.status == 400)
        #expect(Self.errorFields(tagResponse) == ["commercePlatformTag"])

        var longKey = request
        longKey.headers = longKey.headers.map { $0.name == "Idempotency-Key" ? HTTPHeader("Idempotency-Key", String(repeating: "k", count: 65)) : $0 }
        #expect(Self.errorFields(try #require(NetsSandbox.check(longKey, secretKey: Secret(Fixtures.secretKey), now: Fixtures.now))) == ["Idempotency-Key"])

        var noKey = request
        noKey.headers.removeAll { $0.name == "Idempotency-Key" }
        #expect(Self.errorFields(try #require(NetsSandbox.check(noKey, secretKey: Secret(Fixtures.secretKey), now: Fixtures.now))) == ["Idempotency-Key"])

        var textBody = request
        textBody.headers = textBody.headers.map { $0.name == "Content-Type" ? HTTPHeader("Content-Type", "text/plain") : $0 }
        #expect(NetsSandbox.check(textBody, secretKey: Secret(Fixtures.secretKey), now: Fixtures.now)?.status == 415)
    }

    @Test func bodyIsCheckedLikeNets() throws {
        let request = try NetsPayments.createSubscription(Fixtures.createOrder(), config: Fixtures.config, now: Fixtures.now)
        let key = Secret(Fixtures.secretKey)
        // The signer accepted it; ten years later Nets would refuse the same end date.
        let late = try #require(NetsSandbox.check(request, secretKey: key, now: Fixtures.now + 10 * 365 * 86_400))
        #expect(Self.errorFields(late) == ["subscription.endDate"])

        let zulu = try Self.withBody(request) { $0["subscription"] = ["endDate": "2029-07-18T00:00:00Z", "interval": 0] }
        #expect(Self.errorFields(try #require(NetsSandbox.check(zulu, secretKey: key, now: Fixtures.now))) == ["subscription.endDate"])

        let mismatch = try Self.withBody(request) { body in
            var order = body["order"]?.objectValue ?? [:]
            order["amount"] = 999
            body["order"] = .object(order)
        }
        #expect(Self.errorFields(try #require(NetsSandbox.check(mismatch, secretKey: key, now: Fixtures.now))) == ["order.amount"])

        let embedded = try Self.withBody(request) { $0["checkout"] = ["integrationType": "EmbeddedCheckout"] }
        #expect(Self.errorFields(try #require(NetsSandbox.check(embedded, secretKey: key, now: Fixtures.now))) == ["checkout.integrationType"])

        let negative = try Self.withBody(request) { $0["subscription"] = ["endDate": "2029-07-18T00:00:00+01:00", "interval": -1] }
        #expect(Self.errorFields(try #require(NetsSandbox.check(negative, secretKey: key, now: Fixtures.now))) == ["subscription.interval"])

        var garbage = request
        garbage.body = Array("{not json".utf8)
        #expect(Self.errorFields(try #require(NetsSandbox.check(garbage, secretKey: key, now: Fixtures.now))) == ["body"])

        // The sandbox's 400 is understood by the classifier.
        guard case .failed("NETS_BAD_REQUEST", let message) = NetsPayments.classifyCreate(late) else {
            Issue.record("expected NETS_BAD_REQUEST")
            return
        }
        #expect(message.contains("subscription.endDate"))
    }

    @Test func fullSubscriptionLifecycle() throws {
        var sandbox = Self.sandbox()
        let create = try NetsPayments.createSubscription(Fixtures.createOrder(), config: Fixtures.config, now: Fixtures.now, webhookURL: Fixtures.webhookURL)
        guard case .pending(let created) = NetsPayments.classifyCreate(sandbox.handle(create, now: Fixtures.now)),
            let paymentId = created["paymentId"]?.stringValue
        else {
            Issue.record("create failed")
            return
        }

        // Before the customer completes the page there is no subscription yet.
        let lookup = try NetsPayments.sign(Fixtures.getOrder(paymentId: .string(paymentId)), config: Fixtures.config, now: Fixtures.now)
        guard case .finish(.failed("NETS_SUBSCRIPTION_NOT_FOUND", _)) = NetsPayments.handle(sandbox.handle(lookup, now: Fixtures.now), to: lookup) else {
            Issue.record("expected no subscription yet")
            return
        }

        let deliveries = sandbox.completeCheckout(paymentId: paymentId, timestampMilliseconds: Fixtures.now * 1000 + 123)
        #expect(deliveries.count == 1)
        let delivery = try #require(deliveries.first)
        #expect(delivery.url == Fixtures.webhookURL)
        guard let event = try? NetsWebhook.verify(headers: delivery.headers, body: delivery.body, config: Fixtures.config) else {
            Issue.record("the sandbox's delivery must verify")
            return
        }
        #expect(event.paymentId == paymentId)
        #expect(NetsWebhook.interpret(event, for: Fixtures.createOrder()) == .apply(.succeeded(["paymentId": .string(paymentId), "amount": 1050])))
        #expect(sandbox.completeCheckout(paymentId: paymentId, timestampMilliseconds: 0).first?.body.count ?? 0 > 0)  // redelivery
        #expect(sandbox.subscriptions.count == 1)

        guard case .send(let second) = NetsPayments.handle(sandbox.handle(lookup, now: Fixtures.now), to: lookup) else {
            Issue.record("expected step 2")
            return
        }
        guard case .finish(.succeeded(let details)) = NetsPayments.handle(sandbox.handle(second, now: Fixtures.now), to: second),
            let subscriptionId = details["subscriptionId"]?.stringValue
        else {
            Issue.record("expected subscription details")
            return
        }
        #expect(details["interval"] == 30)
        #expect(details["endDate"] == "2029-07-18T00:00:00+01:00")

        let charge = try NetsPayments.chargeSubscription(Fixtures.chargeOrder(subscriptionId: .string(subscriptionId)), config: Fixtures.config)
        let charged = sandbox.handle(charge, now: Fixtures.now)
        guard case .succeeded(let ids) = NetsPayments.classifyCharge(charged) else {
            Issue.record("expected a charge")
            return
        }
        #expect(ids["chargeId"] != nil)
        #expect(sandbox.handle(charge, now: Fixtures.now + 60) == charged)  // replay: same charge, not a second one

        let reused = try Self.withBody(charge) { body in
            var order = body["order"]?.objectValue ?? [:]
            order["reference"] = "different"
            body["order"] = .object(order)
        }
        #expect(Self.errorFields(sandbox.handle(reused, now: Fixtures.now)) == ["Idempotency-Key"])

        let expired = try NetsPayments.chargeSubscription(Fixtures.chargeOrder(orderId: "ord-late", subscriptionId: .string(subscriptionId)), config: Fixtures.config)
        #expect(Self.errorFields(sandbox.handle(expired, now: Fixtures.now + 10 * 365 * 86_400)) == ["subscriptionId"])
    }

    @Test func unknownIdsAndRoutesAreNotFound() throws {
        var sandbox = Self.sandbox()
        let charge = try NetsPayments.chargeSubscription(Fixtures.chargeOrder(), config: Fixtures.config)
        let response = sandbox.handle(charge, now: Fixtures.now)
        #expect(response.status == 404)
        #expect(NetsPayments.classifyCharge(response) == .failed(code: "NETS_NOT_FOUND", message: "Nets does not know this subscription"))
        let auth = [HTTPHeader("Authorization", Fixtures.secretKey)]
        #expect(sandbox.handle(HTTPRequestSpec(method: .GET, url: "/v1/payments/..%2Fsubscriptions", headers: auth), now: 0).status == 404)
        #expect(sandbox.handle(HTTPRequestSpec(method: .GET, url: "/v1/refunds/abc", headers: auth), now: 0).status == 404)
        #expect(sandbox.handle(HTTPRequestSpec(method: .GET, url: "/v1/payments/abc"), now: 0).status == 401)
    }

    @Test func failedReservationDelivery() throws {
        var sandbox = Self.sandbox()
        let create = try NetsPayments.createSubscription(Fixtures.createOrder(), config: Fixtures.config, now: Fixtures.now, webhookURL: Fixtures.webhookURL)
        guard case .pending(let created) = NetsPayments.classifyCreate(sandbox.handle(create, now: Fixtures.now)),
            let paymentId = created["paymentId"]?.stringValue
        else {
            Issue.record("create failed")
            return
        }
        let delivery = try #require(sandbox.failReservation(paymentId: paymentId, timestampMilliseconds: 0).first)
        guard let event = try? NetsWebhook.verify(headers: delivery.headers, body: delivery.body, config: Fixtures.config) else {
            Issue.record("expected authentic")
            return
        }
        guard case .apply(.failed("NETS_RESERVATION_FAILED", _)) = NetsWebhook.interpret(event, for: Fixtures.createOrder()) else {
            Issue.record("expected failed")
            return
        }
        #expect(sandbox.failReservation(paymentId: "unknown", timestampMilliseconds: 0).isEmpty)
    }

    @Test func tamperedDeliveries() throws {
        let content = NetsWebhookContent(
            kind: .checkoutCompleted, eventId: "e1", paymentId: "p1", amount: 1050, currency: "SEK", reference: "sub-42", timestampMilliseconds: 0)
        let genuine = NetsSandbox.webhookDelivery(content, config: Fixtures.config)
        #expect(genuine.authorization == Fixtures.webhookSecret)
        guard let event = try? NetsWebhook.verify(headers: genuine.headers, body: genuine.body, config: Fixtures.config) else {
            Issue.record("genuine")
            return
        }
        #expect(NetsWebhook.interpret(event, for: Fixtures.createOrder()) == .apply(.succeeded(["paymentId": "p1", "amount": 1050])))

        let forged = NetsSandbox.webhookDelivery(content, config: Fixtures.config, tampering: .authorization("guess"))
        #expect(throws: CallbackRejection.forged(CallbackRejection.Code.badAuthorization, "the Authorization header does not match")) {
            try NetsWebhook.verify(headers: forged.headers, body: forged.body, config: Fixtures.config)
        }
        let cheap = NetsSandbox.webhookDelivery(content, config: Fixtures.config, tampering: .amount(1))
        guard let cheapEvent = try? NetsWebhook.verify(headers: cheap.headers, body: cheap.body, config: Fixtures.config),
            case .apply(.failed("AMOUNT_MISMATCH", _)) = NetsWebhook.interpret(cheapEvent, for: Fixtures.createOrder())
        else {
            Issue.record("amount tampering must give AMOUNT_MISMATCH")
            return
        }
        let renamed = NetsSandbox.webhookDelivery(content, config: Fixtures.config, tampering: .reference("other"))
        guard let renamedEvent = try? NetsWebhook.verify(headers: renamed.headers, body: renamed.body, config: Fixtures.config),
            case .apply(.failed("REFERENCE_MISMATCH", _)) = NetsWebhook.interpret(renamedEvent, for: Fixtures.createOrder())
        else {
            Issue.record("reference tampering must give REFERENCE_MISMATCH")
            return
        }
    }

    @Test(arguments: [NetsWebhookEvent.Kind.reservationCreated, .reservationFailed, .chargeCreated, .chargeFailed, .other("payment.cancel.created")])
    func everyBuiltEventParses(kind: NetsWebhookEvent.Kind) {
        let content = NetsWebhookContent(kind: kind, eventId: "e1", paymentId: "p1", amount: 1050, currency: "SEK", timestampMilliseconds: 1)
        let delivery = NetsSandbox.webhookDelivery(content, config: Fixtures.config)
        guard let event = try? NetsWebhook.verify(headers: delivery.headers, body: delivery.body, config: Fixtures.config) else {
            Issue.record("\(kind) must parse")
            return
        }
        #expect(event.kind == kind)
        #expect(event.amount == (kind == .other("payment.cancel.created") ? nil : 1050))
        #expect(event.timestamp == "1970-01-01T00:00:00.001Z")
    }
}

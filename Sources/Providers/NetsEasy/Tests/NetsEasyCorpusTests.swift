import FixtureCorpus
import NetsEasyTesting
import PaypipeCore
import Testing

@testable import NetsEasy

/// Nets Easy's published messages (Fixtures/, see its README) through the real signer, response
/// classifiers, pending-create reader and webhook route.
@Suite struct NetsEasyCorpusTests {
    static let corpus = NetsEasyCorpus.all

    /// The merchant config with a webhook URL, so that a created payment registers its webhooks.
    static let webhookConfig = NetsConfig(
        baseURL: Fixtures.config.baseURL, secretKey: Fixtures.config.secretKey, webhookAuthorization: Fixtures.config.webhookAuthorization,
        webhookURL: Fixtures.webhookURL)

    struct NoRequest: Error, CustomStringConvertible {
        let description: String
    }

    // MARK: Helpers

    static func code(_ verdict: ProviderVerdict?) -> String? {
        if case .failed(let code, _)? = verdict { return code.rawValue }
        return nil
    }

    /// The verdict's name and error code, and the result keys the fixture names.
    static func check(_ verdict: ProviderVerdict?, _ fixture: Fixture) {
        #expect(Fixture.verdictName(verdict) == fixture.meaningText("verdict"), "\(fixture.name): \(String(describing: verdict))")
        #expect(Self.code(verdict) == fixture.meaningText("errorCode"), "\(fixture.name): \(String(describing: verdict))")
        let values = Fixture.verdictResult(verdict)
        guard !values.isEmpty else { return }
        for key in ["paymentId", "hostedPaymentPageUrl", "chargeId", "subscriptionId", "amount", "frequency", "interval", "endDate"] {
            guard let expected = fixture.meaning(key) else { continue }
            #expect(values[key] == expected, "\(fixture.name): \(key)")
        }
        if let paymentType = fixture.meaning("paymentType") {
            #expect(values["paymentDetails"]?["paymentType"] == paymentType, "\(fixture.name): paymentDetails.paymentType")
        }
    }

    static func response(_ fixture: Fixture) -> HTTPResponseSpec {
        HTTPResponseSpec(status: fixture.status ?? 200, body: fixture.jsonBody)
    }

    /// `a.b.c` in a JSON object.
    static func value(at path: Substring, in json: JSONValue) -> JSONValue? {
        var current: JSONValue? = json
        for key in path.split(separator: ".") { current = current?[String(key)] }
        return current
    }

    static func requiredHeaders(_ fixture: Fixture) -> [String] {
        (fixture.meaningText("requiredHeaders") ?? "").split(separator: ",").map(String.init)
    }

    /// What the connector signs for `order` (the pipeline's entry point).
    static func signed(_ order: Order, nowSeconds: Int64 = Fixtures.now) async throws -> HTTPRequestSpec {
        let connector = await NetsConnector(config: PaypipeConfig(merchants: ["default": MerchantConfig(webhookConfig)]))
        guard case .request(let signed) = try connector.sign(order, purpose: .submit, nowSeconds: nowSeconds) else {
            throw NoRequest(description: "\(order.operation.rawValue) signed no request")
        }
        return signed.request
    }

    /// The chargeSubscription order whose request a charge fixture documents.
    static func chargeOrder(_ fixture: Fixture) throws -> Order {
        let order = try #require(fixture.json?["order"])
        return Order(
            orderId: "ord-corpus-charge", operation: .chargeSubscription, amount: order["amount"]?.integerValue,
            currency: order["currency"]?.stringValue,
            params: [
                "subscriptionId": try #require(fixture.meaning("subscriptionId")), "reference": try #require(order["reference"]),
                "items": try #require(order["items"]),
            ])
    }

    /// Delivers a webhook through the connector's callback route, as the callbacks stage does.
    func deliver(
        _ body: [UInt8], authorization: String, order: Order, paymentId: String, nets: FakeNetsPayments
    ) async -> Result<CallbackDecision, CallbackRejection> {
        let connector = await NetsConnector(config: PaypipeConfig(merchants: ["default": MerchantConfig(Fixtures.config)]))
        let request = CallbackRequest(
            headers: [HTTPHeader("Authorization", authorization), HTTPHeader("Content-Type", "application/json")], body: body)
        let context = CallbackContext(orders: PaymentLookup(order: order, paymentId: paymentId), http: nets, remoteAddress: "127.0.0.1")
        do {
            return .success(try await connector.callbackRoutes[0].handle(request, context))
        } catch {
            return .failure(error)
        }
    }

    // MARK: The corpus itself

    @Test func everyFixtureNamesItsSourceKindAndSummary() {
        #expect(Self.corpus.fixtures.count >= 15)
        for fixture in Self.corpus.fixtures {
            #expect(!fixture.source.isEmpty && !fixture.kind.isEmpty && !fixture.summary.isEmpty, "\(fixture.name)")
            #expect(!fixture.source.contains("\n"), "\(fixture.name): the source is one line")
            #expect(fixture.name.utf8.allSatisfy { (97...122).contains($0) || (48...57).contains($0) || $0 == 45 }, "\(fixture.name)")
        }
    }

    @Test func everyKindIsExercised() {
        let tested: Set<String> = [
            "createPaymentRequest", "chargeSubscriptionRequest", "fetchPaymentRequest", "fetchSubscriptionRequest", "chargeStatusRequest",
            "terminatePaymentRequest", "createPaymentResponse", "chargeSubscriptionResponse", "chargeStatusResponse", "paymentResponse",
            "subscriptionResponse", "webhook",
        ]
        #expect(Set(Self.corpus.fixtures.map(\.kind)) == tested)
    }

    // MARK: Outgoing

    /// `POST /v1/payments`: the documented order, hosted checkout and subscription, the seed's
    /// headers, and the webhooks with an 8-64 alphanumeric authorization.
    @Test(arguments: NetsEasyCorpus.all.of(kind: "createPaymentRequest"))
    func createPaymentRequest(_ fixture: Fixture) async throws {
        let documented = try #require(fixture.json)
        let order = try #require(documented["order"])
        let subscription = try #require(documented["subscription"])
        let checkout = try #require(documented["checkout"])
        var params: [String: JSONValue] = [
            "endDate": try #require(fixture.meaning("endDateParam")), "interval": try #require(subscription["interval"]),
            "reference": try #require(order["reference"]), "items": try #require(order["items"]),
        ]
        if let url = checkout["returnUrl"] { params["checkoutUrl"] = url }
        if let url = checkout["termsUrl"] { params["termsUrl"] = url }
        let paypipeOrder = Order(
            orderId: "ord-corpus-create", operation: .createSubscription, amount: order["amount"]?.integerValue,
            currency: order["currency"]?.stringValue, params: params)
        let request = try await Self.signed(paypipeOrder, nowSeconds: try #require(fixture.meaning("signedAtEpochSeconds")?.integerValue))

        #expect(request.method.rawValue == fixture.meaningText("method"))
        #expect(request.url == Fixtures.config.baseURL + (fixture.meaningText("path") ?? "?"))
        for header in Self.requiredHeaders(fixture) { #expect(request.header(header) != nil, "\(fixture.name): header \(header)") }
        #expect(request.header("Authorization") == Fixtures.secretKey)
        #expect(request.header("commercePlatformTag") == fixture.meaningText("commercePlatformTag"))
        let key = try #require(request.header("Idempotency-Key"))
        #expect((1...64).contains(key.utf8.count))

        let body = try JSONValue.parse(request.body)
        for path in (fixture.meaningText("requiredFields") ?? "").split(separator: ",") {
            #expect(Self.value(at: path, in: body) != nil, "\(fixture.name): \(path)")
        }
        #expect(body["order"] == order)
        #expect(body["subscription"] == subscription)
        #expect(body["checkout"] == checkout)
        let sent = body["notifications"]?["webHooks"]?.arrayValue ?? []
        let documentedHooks = documented["notifications"]?["webHooks"]?.arrayValue ?? []
        #expect(sent.map { $0["eventName"] } == documentedHooks.map { $0["eventName"] })
        #expect(sent.map { $0["url"] } == documentedHooks.map { $0["url"] })
        for hook in sent {
            let authorization = hook["authorization"]?.stringValue ?? ""
            let alphanumeric = authorization.utf8.allSatisfy { (48...57).contains($0) || (65...90).contains($0) || (97...122).contains($0) }
            #expect((8...64).contains(authorization.utf8.count) && alphanumeric, "webhook authorization must be 8-64 alphanumeric characters")
        }
    }

    /// `POST /v1/subscriptions/{subscriptionId}/charges` with `{order}` and an Idempotency-Key.
    @Test(arguments: NetsEasyCorpus.all.of(kind: "chargeSubscriptionRequest"))
    func chargeSubscriptionRequest(_ fixture: Fixture) async throws {
        let request = try await Self.signed(try Self.chargeOrder(fixture))
        #expect(request.method.rawValue == fixture.meaningText("method"))
        #expect(request.url == Fixtures.config.baseURL + (fixture.meaningText("path") ?? "?"))
        for header in Self.requiredHeaders(fixture) { #expect(request.header(header) != nil, "\(fixture.name): header \(header)") }
        #expect(request.header("Authorization") == Fixtures.secretKey)
        let key = try #require(request.header("Idempotency-Key"))
        #expect((1...64).contains(key.utf8.count))
        let body = try JSONValue.parse(request.body)
        for path in (fixture.meaningText("requiredFields") ?? "").split(separator: ",") {
            #expect(Self.value(at: path, in: body) != nil, "\(fixture.name): \(path)")
        }
        #expect(body == fixture.json)
    }

    /// `GET /v1/payments/{paymentId}`: getSubscription's first call.
    @Test(arguments: NetsEasyCorpus.all.of(kind: "fetchPaymentRequest"))
    func fetchPaymentRequest(_ fixture: Fixture) async throws {
        let order = Order(
            orderId: "ord-corpus-get", operation: .getSubscription, params: ["paymentId": try #require(fixture.meaning("paymentId"))])
        let request = try await Self.signed(order)
        #expect(request.method.rawValue == fixture.meaningText("method"))
        #expect(request.url == Fixtures.config.baseURL + (fixture.meaningText("path") ?? "?"))
        for header in Self.requiredHeaders(fixture) { #expect(request.header(header) != nil, "\(fixture.name): header \(header)") }
        #expect(request.body.isEmpty)
        #expect(request.header("Idempotency-Key") == nil)
    }

    /// `GET /v1/subscriptions/{subscriptionId}`, derived from the payment Nets answered.
    @Test(arguments: NetsEasyCorpus.all.of(kind: "fetchSubscriptionRequest"))
    func fetchSubscriptionRequest(_ fixture: Fixture) throws {
        let payment = Self.corpus.named(try #require(fixture.meaningText("followsPaymentResponse")))
        let fetch = try NetsPayments.fetchPayment(paymentId: try #require(fixture.meaningText("paymentId")), config: Fixtures.config)
        guard case .send(let next) = NetsPayments.handle(Self.response(payment), to: fetch) else {
            Issue.record("\(payment.name) must lead to the subscription read")
            return
        }
        #expect(next.method.rawValue == fixture.meaningText("method"))
        #expect(next.url == Fixtures.config.baseURL + (fixture.meaningText("path") ?? "?"))
        for header in Self.requiredHeaders(fixture) { #expect(next.header(header) != nil, "\(fixture.name): header \(header)") }
        #expect(next.body.isEmpty)
    }

    /// `GET …/charges/status` by the charge's own Idempotency-Key: how an unknown charge is resolved.
    @Test(arguments: NetsEasyCorpus.all.of(kind: "chargeStatusRequest"))
    func chargeStatusRequest(_ fixture: Fixture) async throws {
        let charge = try await Self.signed(try Self.chargeOrder(Self.corpus.named(try #require(fixture.meaningText("followsChargeRequest")))))
        guard case .readChargeStatus(let status) = NetsPayments.resolution(forUnknown: charge) else {
            Issue.record("an unknown charge must be read by its key")
            return
        }
        #expect(status.method.rawValue == fixture.meaningText("method"))
        #expect(status.url == Fixtures.config.baseURL + (fixture.meaningText("path") ?? "?"))
        for header in Self.requiredHeaders(fixture) { #expect(status.header(header) != nil, "\(fixture.name): header \(header)") }
        #expect(status.header("Idempotency-Key") == charge.header("Idempotency-Key"))
        #expect(status.body.isEmpty)
    }

    /// `PUT /v1/payments/{paymentId}/terminate`, from the payment's read.
    @Test(arguments: NetsEasyCorpus.all.of(kind: "terminatePaymentRequest"))
    func terminatePaymentRequest(_ fixture: Fixture) throws {
        let fetch = try NetsPayments.fetchPayment(paymentId: try #require(fixture.meaningText("paymentId")), config: Fixtures.config)
        let terminate = try #require(NetsPayments.terminateRequest(following: fetch))
        #expect(terminate.method.rawValue == fixture.meaningText("method"))
        #expect(terminate.url == Fixtures.config.baseURL + (fixture.meaningText("path") ?? "?"))
        for header in Self.requiredHeaders(fixture) { #expect(terminate.header(header) != nil, "\(fixture.name): header \(header)") }
    }

    // MARK: Incoming responses

    @Test(arguments: NetsEasyCorpus.all.of(kind: "createPaymentResponse"))
    func createPaymentResponse(_ fixture: Fixture) throws {
        let create = try NetsPayments.createSubscription(Fixtures.createOrder(), config: Fixtures.config, now: Fixtures.now)
        guard case .finish(let verdict) = NetsPayments.handle(Self.response(fixture), to: create) else {
            Issue.record("\(fixture.name): a create answer ends in a verdict")
            return
        }
        Self.check(verdict, fixture)
        if let part = fixture.meaningText("messageContains") {
            guard case .failed(_, let message) = verdict else {
                Issue.record("\(fixture.name): expected a failure message")
                return
            }
            #expect(message.contains(part), "\(fixture.name): \(message)")
        }
    }

    @Test(arguments: NetsEasyCorpus.all.of(kind: "chargeSubscriptionResponse"))
    func chargeSubscriptionResponse(_ fixture: Fixture) throws {
        let charge = try NetsPayments.chargeSubscription(Fixtures.chargeOrder(), config: Fixtures.config)
        guard case .finish(let verdict) = NetsPayments.handle(Self.response(fixture), to: charge) else {
            Issue.record("\(fixture.name): a charge answer ends in a verdict")
            return
        }
        Self.check(verdict, fixture)
    }

    /// Read as `NetsConnector.read` reads a charge status (`keyMayBeForgotten` from the order's age).
    @Test(arguments: NetsEasyCorpus.all.of(kind: "chargeStatusResponse"))
    func chargeStatusResponse(_ fixture: Fixture) {
        let forgotten = fixture.meaning("keyMayBeForgotten")?.boolValue ?? true
        Self.check(NetsPayments.classifyChargeStatus(Self.response(fixture), keyMayBeForgotten: forgotten), fixture)
    }

    /// `GET /v1/payments/{paymentId}` read twice, as paypipe reads it: for a pending create (status
    /// check and checkout webhook) and as getSubscription's first step.
    @Test(arguments: NetsEasyCorpus.all.of(kind: "paymentResponse"))
    func paymentResponse(_ fixture: Fixture) throws {
        let paymentId = try #require(fixture.meaningText("paymentId"))
        let response = Self.response(fixture)
        Self.check(NetsPendingCreate.read(response, paymentId: paymentId), fixture)

        let fetch = try NetsPayments.fetchPayment(paymentId: paymentId, config: Fixtures.config)
        switch NetsPayments.handle(response, to: fetch) {
        case .send(let next):
            #expect(fixture.meaningText("getSubscription") == "send", "\(fixture.name)")
            #expect(next.method == .GET)
            #expect(next.url == Fixtures.config.baseURL + "/v1/subscriptions/" + (fixture.meaningText("subscriptionId") ?? "?"))
            #expect(next.headers == fetch.headers)
        case .finish(let verdict):
            #expect(Fixture.verdictName(verdict) == fixture.meaningText("getSubscription"), "\(fixture.name): \(verdict)")
            #expect(Self.code(verdict) == fixture.meaningText("getSubscriptionErrorCode"), "\(fixture.name): \(verdict)")
        }
    }

    @Test(arguments: NetsEasyCorpus.all.of(kind: "subscriptionResponse"))
    func subscriptionResponse(_ fixture: Fixture) throws {
        let fetch = try NetsPayments.fetchSubscription(subscriptionId: try #require(fixture.meaningText("subscriptionId")), config: Fixtures.config)
        guard case .finish(let verdict) = NetsPayments.handle(Self.response(fixture), to: fetch) else {
            Issue.record("\(fixture.name): a subscription answer ends in a verdict")
            return
        }
        Self.check(verdict, fixture)
    }

    // MARK: Webhooks

    /// Each delivery through the callback route with the registered Authorization (or the
    /// fixture's own, for a forged one), about an order consistent with the event; a completed
    /// checkout reads its subscription from Nets (answered with `subscriptionId`).
    @Test(arguments: NetsEasyCorpus.all.of(kind: "webhook"))
    func webhook(_ fixture: Fixture) async throws {
        let event = try #require(fixture.json)
        let data = event["data"]
        let paymentId = data?["paymentId"]?.stringValue ?? ""
        let money = data?["order"]?["amount"] ?? data?["amount"]
        let order = Order(
            orderId: "ord-corpus-webhook", operation: .createSubscription, amount: money?["amount"]?.integerValue,
            currency: money?["currency"]?.stringValue,
            params: [
                "endDate": "2029-07-18T00:00:00+01:00", "interval": 30, "reference": .string(data?["order"]?["reference"]?.stringValue ?? "sub-42"),
            ])
        let answer: Result<HTTPResponseSpec, TransportFailure>
        if let subscriptionId = fixture.meaningText("subscriptionId"), let renewal = fixture.meaningText("renewal") {
            // The charge's payment read back: the charge Nets made, or none for a failed one.
            var charges: [JSONValue] = []
            if renewal == SubscriptionEvent.Kind.renewalSucceeded.rawValue, let chargeId = data?["chargeId"] {
                charges = [["chargeId": chargeId, "amount": money?["amount"] ?? .null, "created": "2026-11-28T00:00:00Z", "orderItems": []]]
            }
            let payment: JSONValue = [
                "payment": [
                    "paymentId": .string(paymentId), "orderDetails": ["amount": money?["amount"] ?? .null, "currency": money?["currency"] ?? .null],
                    "subscription": ["id": .string(subscriptionId)], "charges": .array(charges),
                ]
            ]
            answer = .success(HTTPResponseSpec(status: 200, body: payment.bytes))
        } else if let subscriptionId = fixture.meaningText("subscriptionId") {
            let payment: JSONValue = [
                "payment": [
                    "paymentId": .string(paymentId), "summary": ["reservedAmount": money?["amount"] ?? .null],
                    "subscription": ["id": .string(subscriptionId)],
                ]
            ]
            answer = .success(HTTPResponseSpec(status: 200, body: payment.bytes))
        } else {
            answer = .failure(.notSent("this event needs no read from Nets"))
        }
        let nets = FakeNetsPayments(answer)
        let authorization = fixture.accepted ? Fixtures.webhookSecret : (fixture.headers["Authorization"] ?? "")
        let outcome = await deliver(fixture.jsonBody, authorization: authorization, order: order, paymentId: paymentId, nets: nets)

        guard fixture.accepted else {
            guard case .failure(let rejection) = outcome else {
                Issue.record("\(fixture.name) must be refused")
                return
            }
            #expect(rejection.status == fixture.meaning("rejectionStatus")?.integerValue.map { Int($0) })
            #expect(rejection.code.rawValue == fixture.meaningText("rejectionCode"))
            #expect(nets.requests.isEmpty)
            return
        }
        let decision: CallbackDecision
        switch outcome {
        case .success(let accepted): decision = accepted
        case .failure(let rejection):
            Issue.record("\(fixture.name) was refused: \(rejection)")
            return
        }

        let parsed = try NetsWebhook.parse(fixture.jsonBody)
        #expect(parsed.id == fixture.meaningText("eventId"))
        #expect(parsed.timestamp == event["timestamp"]?.stringValue)
        if let merchantId = fixture.meaningText("merchantId") { #expect(parsed.merchantId == merchantId) }

        if let renewal = fixture.meaningText("renewal") {
            #expect(decision.order == nil)
            #expect(decision.subscriptionEvents.count == 1)
            let renewalEvent = try #require(decision.subscriptionEvents.first)
            #expect(renewalEvent.kind.rawValue == renewal)
            #expect(renewalEvent.subscription == fixture.meaningText("subscriptionId"))
            #expect(renewalEvent.dedupeKey == fixture.meaningText("dedupeKey"))
            #expect(renewalEvent.providerReference == fixture.meaningText("providerReference"))
            #expect(renewalEvent.amount == fixture.meaning("amount")?.integerValue)
            #expect(renewalEvent.currency == fixture.meaningText("currency"))
            #expect(renewalEvent.reason == fixture.meaningText("reason"))
            #expect(nets.requests.map(\.url) == [Fixtures.config.baseURL + "/v1/payments/" + paymentId], "the charge is read back from Nets")
            return
        }
        #expect(decision.event == fixture.meaningText("eventId"))
        #expect(parsed.paymentId == fixture.meaningText("paymentId"))
        #expect(Fixture.verdictName(decision.verdict) == fixture.meaningText("verdict"), "\(fixture.name): \(String(describing: decision.verdict))")
        #expect(Self.code(decision.verdict) == fixture.meaningText("errorCode"), "\(fixture.name): \(String(describing: decision.verdict))")
        if let subscriptionId = fixture.meaningText("subscriptionId") {
            let values = Fixture.verdictResult(decision.verdict)
            #expect(values["subscriptionId"]?.stringValue == subscriptionId)
            #expect(values["paymentId"]?.stringValue == paymentId)
            #expect(nets.requests.map(\.url) == [Fixtures.config.baseURL + "/v1/payments/" + paymentId])
        }
    }
}

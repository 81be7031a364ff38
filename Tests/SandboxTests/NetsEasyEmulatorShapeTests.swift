import FixtureCorpus
import NetsEasy
import NetsEasyTesting
import PaypipeCore
import Testing

@testable import NetsEasyEmulation

/// The Nets emulator says what Nets publishes (`Sources/Providers/NetsEasy/Fixtures`): every
/// JSON answer and webhook it makes has only member paths some published message of that kind
/// has, in the codes, statuses and value forms the fixtures show.
@Suite struct NetsEasyEmulatorShapeTests {
    static let corpus = NetsEasyCorpus.all
    static let key = Secret(NetsFixtures.secretKey)

    static func json(_ response: HTTPResponseSpec) throws -> JSONValue { try JSONValue.parse(response.body) }

    /// What `value` says that no published message of `kind` says.
    static func isHex32(_ text: String?) -> Bool {
        guard let text else { return false }
        return text.utf8.count == 32 && text.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
    }

    /// Matches `text` against a form where `d` is a digit and `±` is `+` or `-`.
    static func hasForm(_ text: String?, _ form: String) -> Bool {
        guard let text else { return false }
        let bytes = Array(text.utf8)
        let wanted = Array(form.unicodeScalars)
        guard bytes.count == wanted.count else { return false }
        return zip(bytes, wanted).allSatisfy { byte, want in
            switch want {
            case "d": return (48...57).contains(byte)
            case "±": return byte == UInt8(ascii: "+") || byte == UInt8(ascii: "-")
            default: return UInt32(byte) == want.value
            }
        }
    }

    /// Nets' webhook timestamp, `2021-05-04T22:08:16.6623+02:00`.
    static let webhookTimestampForm = "dddd-dd-ddTdd:dd:dd.dddd±dd:dd"
    /// `GET /v1/payments/{id}`'s `created` / `terminated`, `2019-08-24T14:15:22Z`.
    static let paymentTimestampForm = "dddd-dd-ddTdd:dd:ddZ"

    struct Subscribed {
        var sandbox: NetsSandbox
        var paymentId: String
        var subscriptionId: String
        var checkout: [NetsWebhookDelivery]
    }

    /// The fixture's subscription payment created (with the connector's webhooks) and its
    /// checkout completed.
    static func subscribed() throws -> Subscribed {
        var sandbox = NetsSandbox(secretKey: key)
        let create = try NetsPayments.createSubscription(
            NetsFixtures.createOrder(), config: NetsFixtures.config, now: NetsFixtures.now, webhookURL: NetsFixtures.webhookURL)
        let created = sandbox.handle(create, now: NetsFixtures.now)
        let paymentId = try #require(try json(created)["paymentId"]?.stringValue)
        let checkout = sandbox.completeCheckout(paymentId: paymentId, timestampMilliseconds: NetsFixtures.now * 1000 + 123)
        let subscriptionId = try #require(sandbox.payments[paymentId]?.subscriptionId)
        return Subscribed(sandbox: sandbox, paymentId: paymentId, subscriptionId: subscriptionId, checkout: checkout)
    }

    // MARK: POST /v1/payments

    @Test func createAnswers201WithThePublishedShape() throws {
        var sandbox = NetsSandbox(secretKey: Self.key)
        let create = try NetsPayments.createSubscription(
            NetsFixtures.createOrder(), config: NetsFixtures.config, now: NetsFixtures.now, webhookURL: NetsFixtures.webhookURL)
        let response = sandbox.handle(create, now: NetsFixtures.now)
        #expect(response.status == 201)
        let body = try Self.json(response)
        #expect(
            Self.corpus.unpublishedPaths(in: body, kind: "createPaymentResponse").isEmpty,
            "\(Self.corpus.unpublishedPaths(in: body, kind: "createPaymentResponse"))")
        let paymentId = body["paymentId"]?.stringValue
        #expect(Self.isHex32(paymentId))
        let page = try #require(body["hostedPaymentPageUrl"]?.stringValue)
        #expect(page.contains("/hostedpaymentpage/?checkoutKey=") && page.hasSuffix("&pid=\(paymentId ?? "-")"))
    }

    @Test func validationErrorsAreAnErrorsObjectOfMessageLists() throws {
        var sandbox = NetsSandbox(secretKey: Self.key)
        let create = try NetsPayments.createSubscription(NetsFixtures.createOrder(), config: NetsFixtures.config, now: NetsFixtures.now)
        // Ten years on the end date is past: Nets refuses it with 400 {errors}.
        let response = sandbox.handle(create, now: NetsFixtures.now + 10 * 365 * 86_400)
        #expect(response.status == 400)
        let body = try Self.json(response)
        // Field names under `errors` are the request's own paths; the envelope is Nets'.
        let envelope = JSONValue.object((body.objectValue ?? [:]).mapValues { _ in JSONValue.object([:]) })
        #expect(Self.corpus.unpublishedPaths(in: envelope, kind: "createPaymentResponse").isEmpty)
        let errors = try #require(body["errors"]?.objectValue)
        #expect(!errors.isEmpty)
        for (_, messages) in errors {
            #expect(messages.arrayValue?.allSatisfy { $0.stringValue != nil } == true)
        }
    }

    @Test(arguments: [
        ("abcDEF12", true), (String(repeating: "a1", count: 32), true), (NetsFixtures.webhookSecret, true),
        ("short12", false), ("has-a-hyphen-1", false), ("with space 123", false), (String(repeating: "a", count: 65), false),
        ("ünïcödé123", false),
    ])
    func aWebhookAuthorizationIsEightToSixtyFourAlphanumerics(authorization: String, accepted: Bool) throws {
        let create = try NetsPayments.createSubscription(
            NetsFixtures.createOrder(), config: NetsFixtures.config, now: NetsFixtures.now, webhookURL: NetsFixtures.webhookURL)
        let request = try NetsSandboxTests.withBody(create) { body in
            body["notifications"] = [
                "webHooks": [
                    ["eventName": "payment.checkout.completed", "url": .string(NetsFixtures.webhookURL), "authorization": .string(authorization)]
                ]
            ]
        }
        let refusal = NetsSandbox.check(request, secretKey: Self.key, now: NetsFixtures.now)
        if accepted {
            #expect(refusal == nil)
        } else {
            let response = try #require(refusal)
            #expect(response.status == 400)
            #expect(NetsSandboxTests.errorFields(response) == ["notifications.webHooks[0].authorization"])
        }
    }

    @Test func theConnectorsOwnWebhookRegistrationPasses() throws {
        let create = try NetsPayments.createSubscription(
            NetsFixtures.createOrder(), config: NetsFixtures.config, now: NetsFixtures.now, webhookURL: NetsFixtures.webhookURL)
        #expect(NetsSandbox.check(create, secretKey: Self.key, now: NetsFixtures.now) == nil)
    }

    // MARK: POST /v1/subscriptions/{id}/charges

    @Test func aChargeAnswers200WithThePublishedShapeAndAReplayTheSame() throws {
        var subscribed = try Self.subscribed()
        let charge = try NetsPayments.chargeSubscription(
            NetsFixtures.chargeOrder(subscriptionId: .string(subscribed.subscriptionId)), config: NetsFixtures.config)
        let response = subscribed.sandbox.handle(charge, now: NetsFixtures.now)
        #expect(response.status == 200)
        let body = try Self.json(response)
        #expect(Self.corpus.unpublishedPaths(in: body, kind: "chargeSubscriptionResponse").isEmpty)
        #expect(body.keyPaths == Self.corpus.named("charge-subscription-response--charged-guid-ids").json?.keyPaths)
        #expect(NetsIdentifiers.isSafeId(body["paymentId"]?.stringValue ?? "") && NetsIdentifiers.isSafeId(body["chargeId"]?.stringValue ?? ""))
        #expect(NetsPayments.classifyCharge(response).kind == "succeeded")
        // The same key and body: Nets keeps the first result per key.
        #expect(subscribed.sandbox.handle(charge, now: NetsFixtures.now + 60) == response)
    }

    @Test func aDeclinedChargeIs402WithMessageCodeAndSourceAndReadAsADecline() throws {
        var subscribed = try Self.subscribed()
        let declining = subscribed.sandbox.declineNextCharge(subscriptionId: subscribed.subscriptionId)
        #expect(declining)
        let charge = try NetsPayments.chargeSubscription(
            NetsFixtures.chargeOrder(subscriptionId: .string(subscribed.subscriptionId)), config: NetsFixtures.config)
        let response = subscribed.sandbox.handle(charge, now: NetsFixtures.now)
        #expect(response.status == 402)
        let body = try Self.json(response)
        let published = try #require(Self.corpus.named("charge-subscription-response--declined").json)
        #expect(body.keyPaths == published.keyPaths)
        #expect(["message", "code", "source"].allSatisfy { body[$0]?.stringValue?.isEmpty == false })
        // The connector reads the documented body, not only the status.
        guard case .failed("NETS_DECLINED_911", let message) = NetsPayments.classifyCharge(response) else {
            Issue.record("a 402 is a decline: \(NetsPayments.classifyCharge(response))")
            return
        }
        #expect(message == "Nets declined: Error occurred, code 911, source Internal")
        // Nothing was charged: there is no charge to find by the key.
        let status = try #require(NetsPayments.chargeStatusRequest(following: charge))
        #expect(subscribed.sandbox.handle(status, now: NetsFixtures.now).status == 404)
    }

    @Test func anUnknownSubscriptionIs404WithoutABody() throws {
        var sandbox = NetsSandbox(secretKey: Self.key)
        let response = sandbox.handle(
            try NetsPayments.chargeSubscription(NetsFixtures.chargeOrder(), config: NetsFixtures.config), now: NetsFixtures.now)
        #expect(response.status == Self.corpus.named("charge-subscription-response--unknown-subscription").status)
        #expect(response.body.isEmpty)
    }

    // MARK: GET /v1/subscriptions/{id}/charges/status

    @Test func aChargesStatusHasThePublishedShape() throws {
        var subscribed = try Self.subscribed()
        let charge = try NetsPayments.chargeSubscription(
            NetsFixtures.chargeOrder(subscriptionId: .string(subscribed.subscriptionId)), config: NetsFixtures.config)
        let charged = try Self.json(subscribed.sandbox.handle(charge, now: NetsFixtures.now))
        let status = try #require(NetsPayments.chargeStatusRequest(following: charge))
        let response = subscribed.sandbox.handle(status, now: NetsFixtures.now)
        #expect(response.status == 200)
        let body = try Self.json(response)
        #expect(body.keyPaths == Self.corpus.named("charge-status-response--completed").json?.keyPaths)
        #expect(body["completed"] == true)
        #expect(body["paymentId"] == charged["paymentId"] && body["chargeId"] == charged["chargeId"])
    }

    // MARK: GET /v1/payments/{id}, GET /v1/subscriptions/{id}

    @Test func aPaymentReadHasThePublishedShapeOpenCompletedAndTerminated() throws {
        var sandbox = NetsSandbox(secretKey: Self.key)
        func create(_ orderId: String) throws -> String {
            let request = try NetsPayments.createSubscription(
                NetsFixtures.createOrder(orderId: orderId), config: NetsFixtures.config, now: NetsFixtures.now)
            let created = sandbox.handle(request, now: NetsFixtures.now)
            return try #require(try Self.json(created)["paymentId"]?.stringValue)
        }
        func read(_ paymentId: String) throws -> JSONValue {
            let response = sandbox.handle(try NetsPayments.fetchPayment(paymentId: paymentId, config: NetsFixtures.config), now: NetsFixtures.now)
            #expect(response.status == 200)
            return try Self.json(response)
        }
        let openId = try create("ord-open")
        let completed = try create("ord-completed")
        _ = sandbox.completeCheckout(paymentId: completed, timestampMilliseconds: 1)
        let abandoned = try create("ord-abandoned")
        sandbox.terminateCheckout(paymentId: abandoned, timestampMilliseconds: NetsFixtures.now * 1000 + 456)
        for paymentId in [openId, completed, abandoned] {
            let body = try read(paymentId)
            #expect(
                Self.corpus.unpublishedPaths(in: body, kind: "paymentResponse").isEmpty,
                "\(Self.corpus.unpublishedPaths(in: body, kind: "paymentResponse"))")
            #expect(Self.hasForm(body["payment"]?["created"]?.stringValue, Self.paymentTimestampForm))
        }
        let completedBody = try read(completed)
        let abandonedBody = try read(abandoned)
        #expect(completedBody["payment"]?["subscription"]?["id"] != nil)
        #expect(abandonedBody["payment"]?["terminated"] == "2026-11-21T05:00:00Z")
        // Unknown: 404 with no body, as published.
        let missing = sandbox.handle(
            try NetsPayments.fetchPayment(paymentId: "0123456789abcdef0123456789abcdef", config: NetsFixtures.config), now: NetsFixtures.now)
        #expect(missing.status == 404 && missing.body.isEmpty)
    }

    @Test func aSubscriptionReadHasThePublishedShape() throws {
        var subscribed = try Self.subscribed()
        let response = subscribed.sandbox.handle(
            try NetsPayments.fetchSubscription(subscriptionId: subscribed.subscriptionId, config: NetsFixtures.config), now: NetsFixtures.now)
        #expect(response.status == 200)
        let body = try Self.json(response)
        #expect(
            Self.corpus.unpublishedPaths(in: body, kind: "subscriptionResponse").isEmpty,
            "\(Self.corpus.unpublishedPaths(in: body, kind: "subscriptionResponse"))")
        #expect(NetsPayments.classifySubscription(response).kind == "succeeded")
    }

    // MARK: Webhooks

    @Test func theTimestampFormIsNets() {
        // The form the tests hold the emulator to is the one Nets' examples have.
        for name in ["webhook--refund-completed", "webhook--checkout-completed", "webhook--charge-failed-v2-subscription"] {
            #expect(Self.hasForm(Self.corpus.named(name).json?["timestamp"]?.stringValue, Self.webhookTimestampForm), "\(name)")
        }
        #expect(NetsSandbox.webhookTimestamp(milliseconds: 1) == "1970-01-01T00:00:00.0010+00:00")
        #expect(NetsSandbox.webhookTimestamp(milliseconds: NetsFixtures.now * 1000 + 662) == "2026-11-21T05:00:00.6620+00:00")
    }

    @Test func checkoutCompletedHasNetsEnvelopeAndData() throws {
        let subscribed = try Self.subscribed()
        let delivery = try #require(subscribed.checkout.first)
        let body = try JSONValue.parse(delivery.body)
        #expect(Self.corpus.unpublishedPaths(in: body, kind: "webhook").isEmpty, "\(Self.corpus.unpublishedPaths(in: body, kind: "webhook"))")
        #expect(body["event"] == "payment.checkout.completed")
        #expect(Self.isHex32(body["id"]?.stringValue))
        #expect(body["merchantId"]?.integerValue != nil && body["merchantNumber"] == nil)
        #expect(body["timestamp"] == "2026-11-21T05:00:00.1230+00:00")
        #expect(body["data"]?["order"]?["orderItems"]?.arrayValue?.count == 1)
        let event = try NetsWebhook.verify(headers: delivery.headers, body: delivery.body, config: NetsFixtures.config)
        #expect(event.kind == .checkoutCompleted && event.paymentId == subscribed.paymentId && event.amount == 1050)
    }

    @Test func chargeCreatedV2HasMerchantNumberAndTheChargeIdAsItsId() throws {
        var subscribed = try Self.subscribed()
        let charge = try NetsPayments.chargeSubscription(
            NetsFixtures.chargeOrder(subscriptionId: .string(subscribed.subscriptionId)), config: NetsFixtures.config)
        let charged = try Self.json(subscribed.sandbox.handle(charge, now: NetsFixtures.now))
        let deliveries = subscribed.sandbox.takeDeliveries()
        #expect(deliveries.count == 1)
        let delivery = try #require(deliveries.first)
        let body = try JSONValue.parse(delivery.body)
        #expect(Self.corpus.unpublishedPaths(in: body, kind: "webhook").isEmpty, "\(Self.corpus.unpublishedPaths(in: body, kind: "webhook"))")
        #expect(body["event"] == "payment.charge.created.v2")
        #expect(body["merchantNumber"]?.integerValue != nil && body["merchantId"] == nil)
        #expect(Self.hasForm(body["timestamp"]?.stringValue, Self.webhookTimestampForm))
        #expect(body["id"] == body["data"]?["chargeId"] && body["id"] == charged["chargeId"])
        let data = try #require(body["data"])
        #expect(data["subscriptionId"]?.stringValue == subscribed.subscriptionId && data["paymentId"] == charged["paymentId"])
        #expect(data["paymentMethod"] != nil && data["paymentType"] != nil && data["orderItems"]?.arrayValue?.isEmpty == false)
        let event = try NetsWebhook.verify(headers: delivery.headers, body: delivery.body, config: NetsFixtures.config)
        #expect(event.kind == .chargeCreated && event.subscriptionId == subscribed.subscriptionId && event.amount == 1050)
    }

    @Test func chargeFailedV2HasMerchantNumberAndNetsError() throws {
        var subscribed = try Self.subscribed()
        _ = subscribed.sandbox.declineNextCharge(subscriptionId: subscribed.subscriptionId)
        let charge = try NetsPayments.chargeSubscription(
            NetsFixtures.chargeOrder(subscriptionId: .string(subscribed.subscriptionId)), config: NetsFixtures.config)
        #expect(subscribed.sandbox.handle(charge, now: NetsFixtures.now).status == 402)
        let deliveries = subscribed.sandbox.takeDeliveries()
        let delivery = try #require(deliveries.first)
        let body = try JSONValue.parse(delivery.body)
        #expect(Self.corpus.unpublishedPaths(in: body, kind: "webhook").isEmpty, "\(Self.corpus.unpublishedPaths(in: body, kind: "webhook"))")
        #expect(body["event"] == "payment.charge.failed.v2")
        #expect(body["merchantNumber"]?.integerValue != nil && body["merchantId"] == nil)
        #expect(Self.isHex32(body["id"]?.stringValue) && body["id"] != body["data"]?["chargeId"])
        let published = Self.corpus.named("webhook--charge-failed-v2-subscription").json
        #expect(body["data"]?["error"] == published?["data"]?["error"])
        let event = try NetsWebhook.verify(headers: delivery.headers, body: delivery.body, config: NetsFixtures.config)
        #expect(event.kind == .chargeFailed && event.errorCode == "911" && event.subscriptionId == subscribed.subscriptionId)
    }

    @Test func reservationFailedHasMerchantIdOrderItemsAndNetsError() throws {
        var sandbox = NetsSandbox(secretKey: Self.key)
        let create = try NetsPayments.createSubscription(
            NetsFixtures.createOrder(), config: NetsFixtures.config, now: NetsFixtures.now, webhookURL: NetsFixtures.webhookURL)
        let created = sandbox.handle(create, now: NetsFixtures.now)
        let paymentId = try #require(try Self.json(created)["paymentId"]?.stringValue)
        let deliveries = sandbox.failReservation(paymentId: paymentId, timestampMilliseconds: NetsFixtures.now * 1000)
        #expect(deliveries.count == 1)
        let delivery = try #require(deliveries.first)
        let body = try JSONValue.parse(delivery.body)
        #expect(Self.corpus.unpublishedPaths(in: body, kind: "webhook").isEmpty, "\(Self.corpus.unpublishedPaths(in: body, kind: "webhook"))")
        #expect(body["merchantId"]?.integerValue != nil && body["merchantNumber"] == nil)
        #expect(body["data"]?["orderItems"]?.arrayValue?.count == 1)
        #expect(body["data"]?["error"] == Self.corpus.named("webhook--reservation-failed").json?["data"]?["error"])
    }

    @Test(arguments: [
        ("payment.checkout.completed", NetsWebhookEvent.Kind.checkoutCompleted),
        ("payment.reservation.created", NetsWebhookEvent.Kind.reservationCreated),
        ("payment.reservation.created.v2", NetsWebhookEvent.Kind.reservationCreated),
        ("payment.reservation.failed", NetsWebhookEvent.Kind.reservationFailed),
        ("payment.charge.created.v2", NetsWebhookEvent.Kind.chargeCreated),
        ("payment.charge.failed", NetsWebhookEvent.Kind.chargeFailed),
        ("payment.charge.failed.v2", NetsWebhookEvent.Kind.chargeFailed),
        ("payment.cancel.created", NetsWebhookEvent.Kind.other("payment.cancel.created")),
    ])
    func everyBuiltEventHasOnlyPublishedMembers(eventName: String, kind: NetsWebhookEvent.Kind) throws {
        let chargeId: String? = kind == .chargeCreated || kind == .chargeFailed ? "01ee00006091b2196937598058c4e488" : nil
        var content = NetsWebhookContent(
            kind: kind, eventId: NetsSandbox.derivedId("event", eventName), paymentId: "025400006091b1ef6937598058c4e487", amount: 1050,
            currency: "SEK", reference: "sub-42", chargeId: chargeId, timestampMilliseconds: NetsFixtures.now * 1000)
        content.eventName = eventName
        content.orderItems = NetsSandbox.orderItems(
            ["items": [["reference": "sub-42", "name": "Subscription", "quantity": 1, "unit": "pcs", "unitPrice": 1050, "extra": true]]])
        if eventName.hasSuffix(".v2") { content.subscriptionId = "d079718b-ff63-45dd-947b-4950c023750f" }
        let body = try JSONValue.parse(NetsSandbox.webhookDelivery(content, config: NetsFixtures.config).body)
        #expect(
            Self.corpus.unpublishedPaths(in: body, kind: "webhook").isEmpty,
            "\(eventName): \(Self.corpus.unpublishedPaths(in: body, kind: "webhook"))")
        let merchantNumber = ["payment.charge.created.v2", "payment.charge.failed.v2", "payment.reservation.created.v2"].contains(eventName)
        #expect((body["merchantNumber"] != nil) == merchantNumber && (body["merchantId"] != nil) == !merchantNumber)
        #expect(Self.hasForm(body["timestamp"]?.stringValue, Self.webhookTimestampForm))
    }
}

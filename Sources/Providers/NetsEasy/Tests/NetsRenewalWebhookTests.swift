import NetsEasy
import PaypipeCore
import Testing

/// A subscription's later charges (Nexi's payment-v1 reference: `payment.charge.created.v2`,
/// `payment.charge.failed.v2` with `data.subscriptionId`; `payment.reservation.failed` of a bulk
/// charge names only its payment) are the subscription's renewal events, never an order's.
@Suite("Nets renewal webhooks: a subscription's charges as its events")
struct NetsRenewalWebhookTests {
    static let subscriptionId = "d079718bff6345dd947b4950c023750f"

    func deliver(_ body: String, nets: FakeNetsPayments) async throws -> CallbackDecision {
        let connector = await NetsConnector(config: PaypipeConfig(merchants: ["default": MerchantConfig(Fixtures.config)]))
        let request = CallbackRequest(
            headers: [HTTPHeader("Authorization", Fixtures.webhookSecret), HTTPHeader("Content-Type", "application/json")], body: Array(body.utf8))
        let context = CallbackContext(
            orders: PaymentLookup(order: Fixtures.createOrder(), paymentId: "not-this-one"), http: nets, remoteAddress: "127.0.0.1")
        return try await connector.callbackRoutes[0].handle(request, context)
    }

    static let charged =
        #"{"id":"ev-1","event":"payment.charge.created.v2","timestamp":"2026-11-28T00:00:00Z","merchantNumber":100017120,"merchantId":0,"data":{"chargeId":"c1","subscriptionId":"\#(subscriptionId)","paymentMethod":"Visa","paymentType":"CARD","amount":{"amount":9900,"currency":"SEK"},"paymentId":"p1"}}"#

    /// The charge's payment as Nets' Retrieve payment shows it.
    static func payment(_ paymentId: String, subscription: String = subscriptionId, charges: String) -> FakeNetsPayments {
        FakeNetsPayments(
            .success(
                Fixtures.response(
                    200,
                    #"{"payment":{"paymentId":"\#(paymentId)","orderDetails":{"amount":9900,"currency":"SEK"},"subscription":{"id":"\#(subscription)"},"charges":[\#(charges)]}}"#
                )))
    }

    /// A charge's webhook is believed once the payment read back from Nets shows the charge: the
    /// event carries Nets' amount and is keyed by the charge, so a replay under a new id is the
    /// same event.
    @Test func chargesOfASubscriptionAreItsRenewalsOnceNetsShowsThem() async throws {
        let nets = Self.payment("p1", charges: #"{"chargeId":"c1","amount":9900,"created":"2026-11-28T00:00:00Z","orderItems":[]}"#)
        let created = try await deliver(Self.charged, nets: nets)
        #expect(created.order == nil)
        let expected = SubscriptionEvent(
            merchant: "default", provider: .nets, subscription: Self.subscriptionId, dedupeKey: "charge|c1", kind: .renewalSucceeded, amount: 9900,
            currency: "SEK", providerReference: "c1")
        #expect(created.subscriptionEvents == [expected])
        #expect(nets.requests.map(\.url).allSatisfy { $0.hasSuffix("/v1/payments/p1") } && nets.requests.count == 1)
        let replayed = try await deliver(Self.charged.replacingOccurrences(of: #""id":"ev-1""#, with: #""id":"ev-9""#), nets: nets)
        #expect(replayed.subscriptionEvents.map(\.eventId) == [expected.eventId], "one event per charge, whatever the delivery's id")

        let failed = try await deliver(
            #"{"id":"ev-2","event":"payment.charge.failed.v2","timestamp":"2026-11-28T00:00:00Z","merchantId":0,"data":{"error":{"code":"99","message":"Auth Failed","source":"Internal"},"chargeId":"c2","subscriptionId":"\#(Self.subscriptionId)","amount":{"amount":9900,"currency":"SEK"},"paymentId":"p2"}}"#,
            nets: Self.payment("p2", charges: ""))
        #expect(failed.subscriptionEvents.first?.kind == .renewalFailed && failed.subscriptionEvents.first?.reason == "99")
    }

    /// What a holder of the webhook's fixed Authorization could send: a charge Nets never made,
    /// another subscription's payment, a failure of a payment Nets shows charged, or a payment
    /// Nets does not know. None is recorded.
    @Test func aChargeWebhookThatNetsDoesNotBearOutRecordsNothing() async throws {
        let charge = #"{"chargeId":"c1","amount":9900,"created":"2026-11-28T00:00:00Z","orderItems":[]}"#
        let refusals: [(FakeNetsPayments, String, Int)] = [
            (Self.payment("p1", charges: ""), Self.charged, 503),
            (Self.payment("p1", charges: #"{"chargeId":"other","amount":9900}"#), Self.charged, 503),
            (Self.payment("p1", subscription: "another", charges: charge), Self.charged, 409),
            (FakeNetsPayments(.success(Fixtures.response(404, ""))), Self.charged, 409),
            (
                Self.payment("p1", charges: charge),
                Self.charged.replacingOccurrences(of: "payment.charge.created.v2", with: "payment.charge.failed.v2"), 409
            ),
        ]
        for (nets, body, status) in refusals {
            do {
                let decision = try await deliver(body, nets: nets)
                Issue.record("recorded \(decision.subscriptionEvents)")
            } catch let error as CallbackRejection {
                #expect(error.status == status, "\(error)")
            }
        }
    }

    /// A failed reservation of a payment no order has: the payment, read from Nets, names the
    /// subscription (the GET fallback); a payment without one is no order's and no subscription's.
    @Test func aFailedReservationOfNoOrderIsFoundThroughItsPayment() async throws {
        let body =
            #"{"id":"ev-3","event":"payment.reservation.failed","timestamp":"2026-11-28T00:00:00Z","merchantId":1,"data":{"error":{"code":"99","message":"Auth Failed"},"amount":{"amount":9900,"currency":"SEK"},"paymentId":"p3"}}"#
        let nets = FakeNetsPayments(
            .success(
                Fixtures.response(
                    200, #"{"payment":{"paymentId":"p3","summary":{"reservedAmount":9900},"subscription":{"id":"\#(Self.subscriptionId)"}}}"#)))
        let decision = try await deliver(body, nets: nets)
        #expect(decision.subscriptionEvents.map(\.kind) == [.renewalFailed] && decision.subscriptionEvents.first?.subscription == Self.subscriptionId)
        #expect(nets.requests.map(\.url).allSatisfy { $0.hasSuffix("/v1/payments/p3") } && nets.requests.count == 1)

        let none = FakeNetsPayments(.success(Fixtures.response(200, #"{"payment":{"paymentId":"p3","summary":{}}}"#)))
        await #expect(throws: CallbackRejection.self) { _ = try await deliver(body, nets: none) }
    }
}

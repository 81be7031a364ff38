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

    @Test func chargesOfASubscriptionAreItsRenewalsKeyedByTheEventId() async throws {
        let nets = FakeNetsPayments(.failure(.notSent("never asked")))
        let created = try await deliver(
            #"{"id":"ev-1","event":"payment.charge.created.v2","timestamp":"2026-11-28T00:00:00Z","merchantNumber":100017120,"merchantId":0,"data":{"chargeId":"c1","subscriptionId":"\#(Self.subscriptionId)","paymentMethod":"Visa","paymentType":"CARD","amount":{"amount":9900,"currency":"SEK"},"paymentId":"p1"}}"#,
            nets: nets)
        #expect(created.order == nil)
        #expect(
            created.subscriptionEvents == [
                SubscriptionEvent(
                    merchant: "default", provider: .nets, subscription: Self.subscriptionId, dedupeKey: "ev-1", kind: .renewalSucceeded, amount: 9900,
                    currency: "SEK", providerReference: "c1")
            ])
        let failed = try await deliver(
            #"{"id":"ev-2","event":"payment.charge.failed.v2","timestamp":"2026-11-28T00:00:00Z","merchantId":0,"data":{"error":{"code":"99","message":"Auth Failed","source":"Internal"},"chargeId":"c2","subscriptionId":"\#(Self.subscriptionId)","amount":{"amount":9900,"currency":"SEK"},"paymentId":"p2"}}"#,
            nets: nets)
        #expect(failed.subscriptionEvents.first?.kind == .renewalFailed && failed.subscriptionEvents.first?.reason == "99")
        #expect(nets.requests.isEmpty, "the event names its subscription: nothing is read from Nets")
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

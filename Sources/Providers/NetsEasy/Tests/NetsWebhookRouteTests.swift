import NetsEasy
import PaypipeCore
import Synchronization
import Testing

/// Nets' payment API as a fake transport: records every request, answers `GET /v1/payments/{id}`
/// with the configured status and body.
final class FakeNetsPayments: ProviderHTTPTransport {
    struct State {
        var requests: [HTTPRequestSpec] = []
        var answer: Result<HTTPResponseSpec, TransportFailure>
    }

    let state: Mutex<State>
    init(_ answer: Result<HTTPResponseSpec, TransportFailure>) { state = Mutex(State(answer: answer)) }

    var requests: [HTTPRequestSpec] { state.withLock { $0.requests } }

    func execute(_ request: HTTPRequestSpec) async -> Result<HTTPResponseSpec, TransportFailure> {
        state.withLock { state in
            state.requests.append(request)
            return state.answer
        }
    }
}

/// Finds the one order by its paymentId.
struct PaymentLookup: CallbackOrderLookup {
    let order: Order
    let paymentId: String

    func order(_ key: OrderKey, provider: Provider) async throws(CallbackRejection) -> Order {
        throw .orderNotFound(provider, merchant: key.merchant)
    }

    func order(reference: String, provider: Provider, merchant: String) async throws(CallbackRejection) -> Order {
        guard reference == paymentId, merchant == order.merchant else { throw .orderNotFound(provider, merchant: merchant) }
        return order
    }
}

@Suite("Nets webhook route: authorization first, then the subscription read from Nets")
struct NetsWebhookRouteTests {
    static let paymentId = "02a900006091a9a96937598058c4e474"

    func deliver(
        authorization: String = Fixtures.webhookSecret, nets: FakeNetsPayments
    ) async -> Result<CallbackDecision, CallbackRejection> {
        let connector = await NetsConnector(config: PaypipeConfig(merchants: ["default": MerchantConfig(Fixtures.config)]))
        let route = connector.callbackRoutes[0]
        let request = CallbackRequest(
            headers: [HTTPHeader("Authorization", authorization), HTTPHeader("Content-Type", "application/json")],
            body: Array(NetsWebhookTests.checkoutCompleted.utf8))
        let context = CallbackContext(
            orders: PaymentLookup(order: Fixtures.createOrder(), paymentId: Self.paymentId), http: nets, remoteAddress: "127.0.0.1")
        do {
            return .success(try await route.handle(request, context))
        } catch {
            return .failure(error)
        }
    }

    @Test func aCompletedCheckoutSucceedsWithTheSubscriptionNetsShows() async throws {
        let body =
            #"{"payment":{"paymentId":"\#(Self.paymentId)","summary":{"reservedAmount":1050},"subscription":{"id":"d079718b-ff63-45dd-947b-4950c023750f"}}}"#
        let nets = FakeNetsPayments(.success(Fixtures.response(200, body)))
        let decision = try await deliver(nets: nets).get()
        #expect(
            decision.verdict
                == .succeeded([
                    "paymentId": .string(Self.paymentId), "subscriptionId": "d079718b-ff63-45dd-947b-4950c023750f", "amount": 1050,
                ]))
        #expect(decision.event == "f1bd7e0a17b0413a8a3d84cc2a1a2a2c")
        #expect(nets.requests.map(\.url) == ["https://test.api.dibspayment.eu/v1/payments/\(Self.paymentId)"])
        #expect(nets.requests.first?.header("Authorization") == Fixtures.secretKey)
    }

    @Test(arguments: [
        Result<HTTPResponseSpec, TransportFailure>.success(Fixtures.response(200, #"{"payment":{"summary":{}}}"#)),
        .success(Fixtures.response(503, "")),
        .failure(.notSent("connection refused")),
    ])
    func untilNetsShowsTheSubscriptionTheDeliveryIsRefusedForARetry(answer: Result<HTTPResponseSpec, TransportFailure>) async {
        guard case .failure(let refusal) = await deliver(nets: FakeNetsPayments(answer)) else {
            Issue.record("expected a refusal")
            return
        }
        #expect(refusal.status == 503 && refusal.code == "NETS_UNAVAILABLE")
        #expect(!refusal.message.contains(Fixtures.secretKey) && !refusal.message.contains(Fixtures.webhookSecret))
    }

    @Test func aWrongAuthorizationIsRefusedBeforeNetsIsAsked() async {
        let nets = FakeNetsPayments(.success(Fixtures.response(200, "{}")))
        guard case .failure(let refusal) = await deliver(authorization: "guess", nets: nets) else {
            Issue.record("expected a refusal")
            return
        }
        #expect(refusal.status == 401)
        #expect(nets.requests.isEmpty)
    }
}

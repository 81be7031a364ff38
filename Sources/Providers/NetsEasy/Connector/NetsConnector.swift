import PaypipeCore

extension Provider {
    public static let nets = Provider("nets")
}

extension Operation {
    public static let createSubscription = Operation(.nets, "createSubscription")
    public static let getSubscription = Operation(.nets, "getSubscription")
    public static let chargeSubscription = Operation(.nets, "chargeSubscription")
}

/// Nets Easy behind the pipeline's seam: payment (with subscription) creation, subscription
/// reads and charges, and the checkout webhooks.
public struct NetsConnector: ProviderConnector {
    public static let provider = Provider.nets
    public static let settingsSection: any MerchantSection.Type = NetsConfig.self
    public static let operations = [
        OperationSpec(.createSubscription, movesMoney: true),
        OperationSpec(.getSubscription, movesMoney: false),
        OperationSpec(.chargeSubscription, movesMoney: true),
        OperationSpec(.scheduleNets, movesMoney: false),
        OperationSpec(.cancelNets, movesMoney: false),
        OperationSpec(.netsChargePayment, movesMoney: true),
        OperationSpec(.netsRefund, movesMoney: true),
    ]

    /// What a status check of a pending refund reads: its `refundId`, from its pending outcome.
    public struct Context: ConnectorContext {
        var refundId: String?

        init(refundId: String? = nil) { self.refundId = refundId }

        public init?(json: JSONValue) { refundId = json["refundId"]?.stringValue }

        public var json: JSONValue { refundId.map { ["refundId": .string($0)] } ?? .null }
    }

    let config: PaypipeConfig

    public init(config: PaypipeConfig) async { self.config = config }

    public func sign(_ order: Order, purpose: DispatchPurpose, nowSeconds: Int64) throws(Rejection) -> Signed<Context> {
        let nets = try config.merchant(order.merchant).require(\.nets, .nets)
        return .request(
            SignedRequest(request: try NetsPayments.sign(order, config: nets, now: nowSeconds, webhookURL: nets.webhookURL), context: Context()))
    }

    /// A created payment whose webhook never came: `GET /v1/payments/{paymentId}`.
    public func signStatusCheck(
        _ order: Order, pending: [String: JSONValue], purpose: DispatchPurpose, nowSeconds: Int64
    ) throws(Rejection) -> Signed<Context>? {
        guard order.operation == .createSubscription || order.operation == .netsRefund else { return nil }
        let nets = try config.merchant(order.merchant).require(\.nets, .nets)
        if order.operation == .netsRefund {
            let status = try NetsRefunds.statusRequest(order, config: nets)
            return .request(SignedRequest(request: status, resolve: status, context: Context(refundId: pending["refundId"]?.stringValue)))
        }
        return try NetsPendingCreate.statusRequest(pending: pending, config: nets).map {
            .request(SignedRequest(request: $0, resolve: $0, context: Context()))
        }
    }

    /// A checkout and a refund stay pending until Nets settles them: both are read back.
    public func pendingFollowUp(for operation: Operation, timers: PaypipeConfig.Timers) -> PendingFollowUp? {
        operation == .createSubscription || operation == .netsRefund ? .statusCheck(afterMilliseconds: timers.pendingResolveAfterMs) : nil
    }

    public func read(_ response: HTTPResponseSpec, to current: HTTPRequestSpec, in exchange: Exchange<Context>) -> ProviderReading {
        let order = exchange.order
        switch (order.operation, NetsRequestKind(current)) {
        case (.netsChargePayment, .chargePayment): return .verdict(NetsFirstCharge.readCharge(response, order: order))
        case (.netsChargePayment, .fetchPayment): return .verdict(NetsFirstCharge.readPayment(response, order: order))
        case (.netsRefund, .refundCharge): return .verdict(NetsRefunds.readRefund(response, order: order))
        case (.netsRefund, .fetchPayment):
            guard let refundId = exchange.signed.context.refundId else { return .verdict(.unknown(reason: "the pending refund names no refundId")) }
            return .verdict(NetsRefunds.readState(response, order: order, refundId: refundId, lastCheck: exchange.purpose == .expiryCheck))
        default: break
        }
        if exchange.purpose.isStatusCheck { return readPendingCreate(response, to: current, in: exchange) }
        if NetsRequestKind(current) == .chargeStatus {
            let forgotten = exchange.orderAgeMilliseconds >= config.timers[.netsIdempotencyKeyLifetime]
            return .verdict(NetsPayments.classifyChargeStatus(response, keyMayBeForgotten: forgotten))
        }
        switch NetsPayments.handle(response, to: current) {
        case .finish(let verdict): return .verdict(verdict)
        case .send(let next): return .followUp(next)
        }
    }

    /// A pending payment creation, read with `GET /v1/payments/{paymentId}`. At its last check a
    /// checkout still open is first terminated (so that the customer can no longer pay once the
    /// order has ended) and read once more: terminated with nothing taken, it ends `EXPIRED`;
    /// completed meanwhile, it succeeds; still open, it cannot be closed, and goes to review.
    func readPendingCreate(_ response: HTTPResponseSpec, to current: HTTPRequestSpec, in exchange: Exchange<Context>) -> ProviderReading {
        if NetsRequestKind(current) == .terminatePayment {
            guard let again = NetsPayments.paymentRequest(following: current) else {
                return .verdict(.unknown(reason: "cannot read the payment again"))
            }
            return .followUp(again)
        }
        let verdict = NetsPendingCreate.read(response, paymentId: NetsPendingCreate.paymentId(of: current))
        guard exchange.purpose == .expiryCheck else { return .verdict(verdict) }
        let terminated = exchange.followUps > 0
        switch verdict {
        case .pending where !terminated:
            guard let terminate = NetsPayments.terminateRequest(following: current) else {
                return .verdict(.unknown(reason: "cannot derive the terminate URL from the payment request"))
            }
            return .followUp(terminate)
        case .pending: return .verdict(.unknown(reason: "the checkout is still open after it was terminated"))
        case .failed(code: .netsCheckoutAbandoned, _) where terminated:
            // Terminated by this check, nothing taken: the pending answer that ends the order EXPIRED.
            return .verdict(.pending(["paymentId": .string(NetsPendingCreate.paymentId(of: current))]))
        default: return .verdict(verdict)
        }
    }

    public func readFailure(_ failure: TransportFailure, of current: HTTPRequestSpec, in exchange: Exchange<Context>) -> ProviderVerdict {
        if exchange.phase == .resolving { return .unknown(reason: failure.reason) }
        guard let kind = NetsRequestKind(current) else {
            return failure.mayHaveBeenSent ? .unknown(reason: failure.reason) : .retry(reason: failure.reason)
        }
        return NetsPayments.classifyTransportFailure(kind: kind, requestMayHaveBeenSent: failure.mayHaveBeenSent, reason: failure.reason)
    }

    /// A charge is read by its Idempotency-Key (`GET …/charges/status`), never sent again to
    /// find out; a payment creation (no money moves until the customer pays on the hosted page)
    /// is replayed with its key; reads are simply repeated.
    public func resolution(forUnknown exchange: Exchange<Context>) -> HTTPRequestSpec? {
        if let special = specialResolution(exchange) { return special.request }
        return switch NetsPayments.resolution(forUnknown: exchange.signed.request) {
        case .readChargeStatus(let request), .replayWithSameIdempotencyKey(let request), .repeatRead(let request): request
        case .manualReview: nil
        }
    }

    /// A redelivered charge reads its status first and is sent again only when Nets finds no
    /// charge by its key while the key is young enough to be remembered; anything else is
    /// sent again as it is (a creation with its key, or a read).
    public func redelivery(of exchange: Exchange<Context>) -> Redelivery {
        if let special = specialResolution(exchange) { return special.redelivery }
        return switch NetsPayments.resolution(forUnknown: exchange.signed.request) {
        case .readChargeStatus(let status): .resolveFirst(status)
        case .replayWithSameIdempotencyKey, .repeatRead: .resubmit
        case .manualReview: .review
        }
    }

    public var callbackRoutes: [CallbackRoute] {
        [
            CallbackRoute(path: "/callbacks/nets", label: "nets", headers: ["Authorization"]) { request, context throws(CallbackRejection) in
                try await webhook(request, context: context)
            }
        ]
    }

    /// The merchant is the one whose webhook secret the Authorization equals (constant time);
    /// the order is found by paymentId; redeliveries dedupe on the event id.
    func webhook(_ request: CallbackRequest, context: CallbackContext) async throws(CallbackRejection) -> CallbackDecision {
        var rejection = CallbackRejection.forged(.webhookNotConfigured, "no merchant has a nets webhookAuthorization")
        var authentic: (String, NetsWebhookEvent)?
        for (name, merchant) in config.merchants.sorted(by: { $0.key < $1.key }) {
            guard let nets = merchant.nets else { continue }
            do {
                authentic = (name, try NetsWebhook.verify(headers: request.headers, body: request.body, config: nets))
                break
            } catch  where error.isForged {
                // Another merchant's secret may still match; the most telling refusal is kept.
                if rejection.code == .webhookNotConfigured || error.code != .webhookNotConfigured { rejection = error }
            }
        }
        guard let (merchant, event) = authentic else { throw rejection }
        if let subscriptionId = event.subscriptionId, Self.isCharge(event.kind) {
            let payment = try await chargedPayment(event.paymentId, merchant: merchant, http: context.http)
            let renewal = try NetsRenewalConfirmation.renewal(event, subscriptionId: subscriptionId, merchant: merchant, payment: payment)
            return CallbackDecision(subscriptionEvents: [renewal])
        }
        let order: Order
        do {
            order = try await context.order(reference: event.paymentId, provider: .nets, merchant: merchant)
        } catch  where error.code == .orderNotFound && event.kind == .reservationFailed {
            // A failed subscription charge (a bulk charge's) names neither the subscription nor
            // an order: the payment, read from Nets, names the subscription.
            let payment = try await chargedPayment(event.paymentId, merchant: merchant, http: context.http)
            guard let subscriptionId = payment.subscriptionId else { throw error }
            let renewal = try NetsRenewalConfirmation.renewal(event, subscriptionId: subscriptionId, merchant: merchant, payment: payment)
            return CallbackDecision(subscriptionEvents: [renewal])
        }
        switch NetsWebhook.interpret(event, for: order) {
        case .apply(.succeeded(let result)) where order.operation == .createSubscription:
            let confirmed = try await subscription(of: event.paymentId, merchant: merchant, http: context.http)
            return CallbackDecision(order: order, event: event.id, verdict: .succeeded(result.merging(confirmed) { _, fetched in fetched }))
        case .apply(let verdict): return CallbackDecision(order: order, event: event.id, verdict: verdict)
        case .noChange: return CallbackDecision(order: order, event: event.id, verdict: nil)
        }
    }

    /// The completed checkout's subscription, read from Nets (the webhook does not carry it);
    /// until Nets shows it the delivery is refused 503, and Nets delivers it again.
    func subscription(
        of paymentId: String, merchant: String, http: any ProviderHTTPTransport, notFound: CallbackRejection? = nil
    ) async throws(CallbackRejection) -> [String: JSONValue] {
        let unavailable = { (detail: String) in
            CallbackRejection(
                status: 503, code: .netsUnavailable,
                "could not read the subscription of payment \(paymentId) from Nets: \(detail); deliver again later")
        }
        let response = try await payment(paymentId, merchant: merchant, http: http, unavailable: unavailable)
        switch NetsPendingCreate.read(response, paymentId: paymentId) {
        case .succeeded(let result): return result
        case .pending: throw notFound ?? unavailable("the payment shows no subscription yet")
        case .failed(_, let message), .retry(let message), .unknown(let message), .neverSeen(let message): throw unavailable(message)
        }
    }

    /// `GET /v1/payments/{paymentId}` with the merchant's key: Nets' answer, or `unavailable`
    /// of why it could not be asked or did not answer.
    func payment(
        _ paymentId: String, merchant: String, http: any ProviderHTTPTransport, unavailable: (String) -> CallbackRejection
    ) async throws(CallbackRejection) -> HTTPResponseSpec {
        let request: HTTPRequestSpec
        do {
            let nets = try config.merchant(merchant).require(\.nets, .nets)
            request = try NetsPayments.fetchPayment(paymentId: paymentId, config: nets)
        } catch {
            throw unavailable(error.message)
        }
        switch await http.execute(request) {
        case .failure(let failure): throw unavailable(failure.reason)
        case .success(let response): return response
        }
    }

    /// Whether `kind` reports a subscription charge's result (with `subscriptionId`, a renewal).
    static func isCharge(_ kind: NetsWebhookEvent.Kind) -> Bool {
        kind == .chargeCreated || kind == .chargeFailed || kind == .reservationFailed
    }

    /// A subscription charge's payment, read from Nets to confirm its webhook: 503 while Nets
    /// cannot be read (Nets delivers again), 409 when Nets knows no such payment.
    func chargedPayment(
        _ paymentId: String, merchant: String, http: any ProviderHTTPTransport
    ) async throws(CallbackRejection) -> NetsRenewalConfirmation.ChargedPayment {
        let unavailable = { (detail: String) in
            CallbackRejection(
                status: 503, code: .netsUnavailable, "could not read payment \(paymentId) from Nets: \(detail); deliver again later")
        }
        let response = try await payment(paymentId, merchant: merchant, http: http, unavailable: unavailable)
        guard response.status != 404 else {
            throw CallbackRejection(status: 409, code: .netsWebhookUnconfirmed, "Nets knows no payment \(paymentId)")
        }
        guard let payment = NetsRenewalConfirmation.ChargedPayment(response) else { throw unavailable("HTTP \(response.status)") }
        return payment
    }

    /// A completed subscription checkout opens the subscription its later charges name; it ends
    /// at the order's `endDate`, which Nets reports nothing about.
    public func opensSubscription(_ operation: Operation) -> Bool { operation == .createSubscription }

    public var scheduledCharging: (any ScheduledCharging)? { NetsScheduledCharging() }

    public func declineClass(of code: String) -> DeclineClass? { NetsDeclines.declineClass(of: code) }

    public var refunding: (any Refunding)? { NetsRefunding() }

    /// `nets.firstPayment: charge`: the reservation the checkout made is charged by an order of
    /// its own (`NetsFirstCharge`).
    public func followingOrder(after order: Order, outcome: Outcome) -> Order? {
        guard let nets = config.merchants[order.merchant]?.nets else { return nil }
        return NetsFirstCharge.order(after: order, outcome: outcome, mode: nets.firstPayment)
    }

    /// How the lost answer of a first charge or a refund is settled: the charge by reading its
    /// payment (charged or not), the refund by asking again with its Idempotency-Key, which
    /// Nets answers with the first refund's id while it remembers the key
    /// (`timers.netsIdempotencyKeyLifetimeMs`): the payment's `refunds[]` names no key, so it
    /// cannot tell which refund is this order's. Past that time it goes to review. nil for the
    /// other operations.
    func specialResolution(_ exchange: Exchange<Context>) -> (request: HTTPRequestSpec?, redelivery: Redelivery)? {
        let request = exchange.signed.request
        switch exchange.order.operation {
        case .netsChargePayment:
            guard let read = NetsFirstCharge.paymentRequest(following: request) else { return (nil, .review) }
            return (read, .resolveFirst(read))
        case .netsRefund:
            guard exchange.orderAgeMilliseconds < config.timers[.netsIdempotencyKeyLifetime] else { return (nil, .review) }
            return (request, .resubmit)
        default: return nil
        }
    }

    public func subscriptionOpening(for order: Order, outcome: Outcome) -> SubscriptionOpening? {
        guard let reference = outcome.result?["subscriptionId"]?.stringValue, !reference.isEmpty else { return nil }
        let endsAt = order.params["endDate"]?.stringValue.flatMap(NetsEndDate.init(iso8601:)).map { $0.epochSeconds * 1000 }
        return SubscriptionOpening(reference: reference, endsAt: endsAt)
    }

    /// Webhooks name the payment, which Nets assigns when the payment is created.
    /// A refund's outcome names its charge's payment too, which stays the checkout's.
    public func callbackReferences(in outcome: Outcome) -> [String] {
        guard outcome.operation != Operation.netsRefund.rawValue else { return [] }
        return outcome.result?["paymentId"]?.stringValue.map { [$0] } ?? []
    }
}

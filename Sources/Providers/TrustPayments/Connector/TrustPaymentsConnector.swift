import PaypipeCore

extension Provider {
    public static let trustpayments = Provider("trustpayments")
}

extension Operation {
    public static let subscriptionJwt = Operation(.trustpayments, "subscriptionJwt")
    public static let transactionUpdate = Operation(.trustpayments, "transactionUpdate")
    public static let transactionQuery = Operation(.trustpayments, "transactionQuery")
}

/// Trust Payments behind the pipeline's seam: the SDK JWT for the app, TRANSACTIONUPDATE /
/// TRANSACTIONQUERY over the JSON API, and the response JWT and URL notification callbacks.
public struct TrustPaymentsConnector: ProviderConnector {
    public static let provider = Provider.trustpayments
    public static let settingsSection: any MerchantSection.Type = TrustPaymentsConfig.self
    public static let operations = [
        OperationSpec(.subscriptionJwt, movesMoney: true),
        OperationSpec(.transactionUpdate, movesMoney: false),
        OperationSpec(.transactionQuery, movesMoney: false),
        OperationSpec(.enginePaymentQuery, movesMoney: false),
        OperationSpec(.cancelTrustPayments, movesMoney: false),
        OperationSpec(.tpRefund, movesMoney: true),
    ]

    /// The web-services request as the signer built it, so the submitter reads responses
    /// without parsing the request body again.
    public struct Context: ConnectorContext {
        var kind: TPWebServicesRequest.Kind
        var requestReference: String
        var transactionReference: String?
        var updates: [String: String]
        /// The TRANSACTIONQUERY that resolves an update whose outcome is unknown.
        var queryReference: String?

        init(_ request: TPWebServicesRequest, query: TPWebServicesRequest?) {
            kind = request.kind
            requestReference = request.requestReference
            transactionReference = request.transactionReference
            updates = request.updates
            queryReference = query?.requestReference
        }

        public init?(json: JSONValue) {
            guard let kind = json["kind"]?.stringValue.flatMap(TPWebServicesRequest.Kind.init(rawValue:)),
                let requestReference = json["requestReference"]?.stringValue, let updates = json["updates"]?.objectValue
            else { return nil }
            self.kind = kind
            self.requestReference = requestReference
            transactionReference = json["transactionReference"]?.stringValue
            self.updates = updates.compactMapValues(\.stringValue)
            queryReference = json["queryReference"]?.stringValue
        }

        public var json: JSONValue {
            [
                "kind": .string(kind.rawValue), "requestReference": .string(requestReference),
                "transactionReference": transactionReference.map(JSONValue.string) ?? .null,
                "updates": .object(updates.mapValues(JSONValue.string)),
                "queryReference": queryReference.map(JSONValue.string) ?? .null,
            ]
        }

        func request(_ http: HTTPRequestSpec) -> TPWebServicesRequest {
            TPWebServicesRequest(
                kind: kind, requestReference: requestReference, transactionReference: transactionReference, updates: updates, http: http)
        }

        func query(_ http: HTTPRequestSpec) -> TPWebServicesRequest? {
            // A refund is found by its orderreference, an update by the reference it changes.
            let refund = kind == .refund
            return queryReference.map {
                TPWebServicesRequest(
                    kind: refund ? .orderQuery : .transactionQuery, requestReference: $0,
                    transactionReference: refund ? nil : transactionReference, updates: [:], http: http)
            }
        }
    }

    let config: PaypipeConfig
    public let reconciling: (any PaymentReconciling)?
    let jwtSigners: [String: TPJWTSigner]
    let jwtVerifiers: [String: TPResponseJWTVerifier]

    public init(config: PaypipeConfig) async {
        self.config = config
        reconciling = TPEngineReconciling(timers: config.timers)
        // The SDK JWT expires before its order's last check (docs/operations.md, "Every pending
        // order ends").
        let lifetime = TPJWTSigner.lifetimeSeconds(pendingExpireAfterMs: config.timers.pendingExpireAfterMs)
        jwtSigners = config.merchants.compactMapValues { $0.trustpayments.map { TPJWTSigner(config: $0, lifetimeSeconds: lifetime) } }
        var verifiers: [String: TPResponseJWTVerifier] = [:]
        for (name, merchant) in config.merchants {
            if let tp = merchant.trustpayments { verifiers[name] = await TPResponseJWTVerifier(secret: tp.jwtSecret) }
        }
        jwtVerifiers = verifiers
    }

    func settings(_ merchant: String) throws(Rejection) -> TrustPaymentsConfig {
        try config.merchant(merchant).require(\.trustpayments, .trustpayments)
    }

    // MARK: - Signer

    public func sign(_ order: Order, purpose: DispatchPurpose, nowSeconds: Int64) throws(Rejection) -> Signed<Context> {
        let tp = try settings(order.merchant)
        if order.operation == .subscriptionJwt {
            let signer =
                jwtSigners[order.merchant]
                ?? TPJWTSigner(config: tp, lifetimeSeconds: TPJWTSigner.lifetimeSeconds(pendingExpireAfterMs: config.timers.pendingExpireAfterMs))
            return .outcome(.pending, result: ["jwt": .string(try signer.sign(order: order, issuedAt: nowSeconds))])
        }
        if order.operation == .cancelTrustPayments {
            let query = try TPCancel.query(order: order, config: tp)
            return .request(SignedRequest(request: query.http, resolve: query.http, context: Context(query, query: nil)))
        }
        let request = try TPWebServices.request(for: order, config: tp)
        var query: TPWebServicesRequest?
        if request.kind == .transactionUpdate, let reference = request.transactionReference {
            query = TPWebServices.referenceQuery(transactionReference: reference, for: order.key, config: tp)
        } else if request.kind == .refund {
            query = TPWebServices.orderQuery(for: order.key, config: tp)
        }
        return .request(SignedRequest(request: request.http, resolve: query?.http, context: Context(request, query: query)))
    }

    /// An SDK JWT whose result never came back: TRANSACTIONQUERY by orderreference. The other
    /// operations never stay pending.
    public func signStatusCheck(
        _ order: Order, pending: [String: JSONValue], purpose: DispatchPurpose, nowSeconds: Int64
    ) throws(Rejection) -> Signed<Context>? {
        guard order.operation == .subscriptionJwt else { return nil }
        let query = TPWebServices.orderQuery(for: order.key, config: try settings(order.merchant))
        return .request(SignedRequest(request: query.http, resolve: query.http, context: Context(query, query: nil)))
    }

    public func pendingFollowUp(for operation: Operation, timers: PaypipeConfig.Timers) -> PendingFollowUp? {
        operation == .subscriptionJwt ? .statusCheck(afterMilliseconds: timers.pendingResolveAfterMs) : nil
    }

    // MARK: - Submitter

    public func read(_ response: HTTPResponseSpec, to current: HTTPRequestSpec, in exchange: Exchange<Context>) -> ProviderReading {
        if exchange.order.operation == .cancelTrustPayments { return TPCancel.read(response, to: current, in: exchange) }
        let context = exchange.signed.context
        let request = context.request(exchange.signed.request)
        if context.kind == .orderQuery {
            let siteReference = (try? settings(exchange.order.merchant))?.siteReference
            return .verdict(Self.readOrderQuery(response, query: request, order: exchange.order, siteReference: siteReference))
        }
        if exchange.phase == .resolving, context.kind == .refund, let resolve = exchange.signed.resolve, let query = context.query(resolve) {
            return .verdict(
                TPWebServices.resolveRefund(
                    queryResponse: response, query: query, refund: request, orderId: exchange.order.orderId,
                    beforeResubmit: exchange.resolvingBeforeResubmit))
        }
        if exchange.phase == .resolving, let resolve = exchange.signed.resolve, let query = context.query(resolve) {
            let verdict = TPWebServices.resolveUpdate(queryResponse: response, query: query, update: request)
            // An update not in place was never applied: applying it now is its first effect.
            if exchange.resolvingBeforeResubmit, case .retry(let reason) = verdict { return .verdict(.neverSeen(reason: reason)) }
            return .verdict(verdict)
        }
        return .verdict(TPWebServices.classify(response, for: request))
    }

    /// A redelivered update is compared with the transaction's record first (TRANSACTIONQUERY by
    /// its reference), a redelivered refund looked for by its orderreference; a query is simply
    /// asked again.
    public func redelivery(of exchange: Exchange<Context>) -> Redelivery {
        if exchange.signed.context.kind.isReadOnly { return .resubmit }
        return exchange.signed.resolve.map(Redelivery.resolveFirst) ?? .review
    }

    public func readFailure(_ failure: TransportFailure, of current: HTTPRequestSpec, in exchange: Exchange<Context>) -> ProviderVerdict {
        if exchange.phase == .resolving { return .unknown(reason: failure.reason) }
        // A query has no effect, so sending it again is safe even if the first one arrived.
        let readOnly = exchange.signed.context.kind.isReadOnly
        return !failure.mayHaveBeenSent || readOnly ? .retry(reason: failure.reason) : .unknown(reason: failure.reason)
    }

    /// The status check of a pending SDK JWT: no AUTH yet → `pending` (nothing taken); the
    /// payment's own result → `succeeded`/`failed`. A query that failed as a call (credentials,
    /// HTTP 4xx, its own errorcode) says nothing about the payment → `unknown`.
    static func readOrderQuery(_ response: HTTPResponseSpec, query: TPWebServicesRequest, order: Order, siteReference: String?) -> ProviderVerdict {
        guard let siteReference else { return .unknown(reason: "merchant \(order.merchant) has no trustpayments section in this stage's config") }
        switch TPWebServices.classify(response, for: query) {
        case .failed(let code, let message): return .unknown(reason: "the order query failed (\(code)): \(message)")
        case .retry(let reason), .unknown(let reason), .neverSeen(let reason): return .unknown(reason: reason)
        case .succeeded, .pending: break
        }
        let expected = TPExpectedOrder(orderId: order.orderId, siteReference: siteReference, amount: order.amount, currency: order.currency)
        return TPWebServices.classifyOrderQuery(response, for: query, expected: expected)
    }

    // MARK: - Callbacks

    public var callbackRoutes: [CallbackRoute] {
        [
            CallbackRoute(path: "/callbacks/trustpayments/notification", label: "trustpayments_notification") {
                request, orders throws(CallbackRejection) in
                try await notification(request.body, orders: orders)
            },
            CallbackRoute(path: "/callbacks/trustpayments/jwt", label: "trustpayments_jwt") { request, orders throws(CallbackRejection) in
                try await responseJWT(request.body, orders: orders)
            },
        ]
    }

    /// `responsesitesecurity` with the notification password of the merchant whose site the
    /// form names; `orderreference` names the order.
    func notification(_ body: [UInt8], orders: any CallbackOrderLookup) async throws(CallbackRejection) -> CallbackDecision {
        let fields: [TPNotification.Field]
        fields = try TPNotification.parseForm(body)
        let site = fields.first { $0.name == "sitereference" }?.value
        var lastError = CallbackRejection.forged(.badSignature, "no merchant is configured for this sitereference")
        var verified: (String, TrustPaymentsConfig, TPNotificationEvent)?
        for (name, merchant) in config.merchants.sorted(by: { $0.key < $1.key }) {
            guard let tp = merchant.trustpayments, site == nil || site == tp.siteReference else { continue }
            do {
                verified = (name, tp, try TPNotification.verify(fields: fields, password: tp.notificationPassword))
                break
            } catch {
                lastError = error
            }
        }
        guard let (merchant, tp, event) = verified else { throw lastError }
        let subscriptionEvent = try event.subscriptionEvent(merchant: merchant)
        // An engine payment is the subscription's alone.
        if let subscriptionEvent, event.fields["accounttypedescription"] == "RECUR" {
            return CallbackDecision(subscriptionEvents: [subscriptionEvent])
        }
        guard Order.isValidOrderId(event.orderReference) else {
            throw .malformed("orderreference is not an orderId this pipeline issues", code: .invalidField)
        }
        // The first AUTH settling (or suspended, or cancelled) is its order's result while the order
        // is open, and its subscription's event in any case; once the order is gone, only the latter.
        let order: Order
        do {
            order = try await orders.order(OrderKey(merchant: merchant, orderId: event.orderReference), provider: .trustpayments)
        } catch  where error.code == .orderNotFound && subscriptionEvent != nil {
            return CallbackDecision(subscriptionEvents: [subscriptionEvent!])
        }
        let verdict = event.verdict(for: try TPExpectedOrder.forCallback(order: order, config: tp))
        var decision = CallbackDecision(order: order, event: Self.eventKey(event.dedupeKey, unlessUndecided: verdict), verdict: verdict)
        decision.subscriptionEvents = subscriptionEvent.map { [$0] } ?? []
        return decision
    }

    /// The response JWT forwarded by the app's backend: `{"orderId","jwt","merchant"?}`.
    func responseJWT(_ body: [UInt8], orders: any CallbackOrderLookup) async throws(CallbackRejection) -> CallbackDecision {
        let forwarded = try ForwardedCallback(body, field: "jwt")
        guard let tp = (try? config.merchant(forwarded.merchant))?.trustpayments, let verifier = jwtVerifiers[forwarded.merchant] else {
            throw .unknownMerchant(forwarded.merchant, .trustpayments)
        }
        let response = try await verifier.verify(
            forwarded.value, now: Timestamp.nowMilliseconds() / 1000, maxAgeSeconds: config.timers[.tpResponseMaxAge])
        let order = try await orders.order(forwarded.key, provider: .trustpayments)
        let expected = try TPExpectedOrder.forCallback(order: order, config: tp)
        try expected.checkOrderReference(in: response.entries)
        let payment = response.entries.first { $0["requesttypedescription"]?.stringValue == "AUTH" } ?? response.entries.first
        let reference = payment?["transactionreference"]?.stringValue ?? "jwt:\(Digest.sha256Hex(Array(forwarded.value.utf8)))"
        let reading = response.reading(for: expected)
        return CallbackDecision(
            order: order, event: Self.eventKey(reference, unlessUndecided: reading.verdict), verdict: reading.verdict,
            failureResult: reading.failureResult)
    }

    // MARK: - Subscriptions

    /// A subscription JWT whose AUTH succeeded opened the series the subscription engine then
    /// continues: its automated payments name the first AUTH's transactionreference as their
    /// parent, and it ends by itself after `subscriptionfinalnumber` payments.
    public func opensSubscription(_ operation: Operation) -> Bool { operation == .subscriptionJwt }

    public func declineClass(of code: String) -> DeclineClass? { TrustPaymentsDeclines.declineClass(of: code) }
    public var refunding: (any Refunding)? { TPRefunding() }

    public func subscriptionOpening(for order: Order, outcome: Outcome) -> SubscriptionOpening? {
        guard let reference = outcome.result?["transactionReference"]?.stringValue, !reference.isEmpty else { return nil }
        let finalNumber = order.params["finalNumber"]?.integerValue
        return SubscriptionOpening(reference: reference, finalCycle: finalNumber.flatMap { $0 > 0 ? $0 : nil })
    }

    /// A `transactionUpdate` that names paypipe's subscription (`params.subscription`, the first
    /// AUTH's reference: the update itself names the SUBSCRIPTION's) and sets
    /// `subscriptionfinalnumber` moves where the series ends; `0` means it has no end.
    public func changesSubscription(_ operation: Operation) -> Bool { operation == .transactionUpdate }

    public func subscriptionChange(after order: Order, outcome: Outcome) -> SubscriptionChange? {
        guard order.operation == .transactionUpdate, outcome.status == .succeeded,
            let reference = order.params["subscription"]?.stringValue,
            let finalNumber = order.params["updates"]?.objectValue?["subscriptionfinalnumber"]?.integerValue
        else { return nil }
        return SubscriptionChange(reference: reference, finalCycle: finalNumber > 0 ? finalNumber : nil)
    }

    /// An undecided verdict (AUTH errorcode 70001) records no event: the notification that later
    /// carries the final result names the same transactionreference and must not be a duplicate.
    static func eventKey(_ key: String, unlessUndecided verdict: ProviderVerdict?) -> String? {
        switch verdict {
        case .unknown?, .retry?, .pending?, .neverSeen?: nil
        case .succeeded?, .failed?, nil: key
        }
    }
}

import PaypipeCore

extension Provider {
    public static let viva = Provider("viva")
}

extension Operation {
    public static let sale = Operation(.viva, "sale")
}

/// Viva.com Sale requests behind the pipeline's seam: the pipeline builds the
/// `vivapayclient://pay/v1` URL for the app (no HTTP call) and checks the result the app's
/// backend forwards, confirming it with Viva's transactions API.
public struct VivaConnector: ProviderConnector {
    public static let provider = Provider.viva
    public static let settingsSection: any MerchantSection.Type = VivaConfig.self
    public static let operations = [OperationSpec(.sale, movesMoney: true), OperationSpec(.vivaRefund, movesMoney: true)]
    /// One app backend forwards every customer's result from one address, so the limit per
    /// address is wide and a tight one holds per order: each forwarded result costs a call to
    /// Viva's API, and one order is never confirmed more than a few times a second.
    public static let callbackRateLimit = CallbackRateLimit(burst: 400, perSecond: 100, perOrder: .init(burst: 5, perSecond: 1))

    let config: PaypipeConfig
    let transactions: VivaTransactionsClient

    public init(config: PaypipeConfig) async { self.init(config: config, transactions: VivaTransactionsClient()) }

    init(config: PaypipeConfig, transactions: VivaTransactionsClient) {
        self.config = config
        self.transactions = transactions
    }

    public func sign(_ order: Order, purpose: DispatchPurpose, nowSeconds: Int64) throws(Rejection) -> Signed<NoContext> {
        let viva = try config.merchant(order.merchant).require(\.viva, .viva)
        if order.operation == .vivaRefund {
            _ = try VivaRefund(order: order)
            guard let api = viva.api else {
                throw Rejection(
                    .missingCredentials, field: "viva.apiClientId", "a viva refund needs the merchant's viva.apiClientId and apiClientSecret")
            }
            // The refund follows the token its answer carries (`read`); so does the read that resolves it.
            let token = VivaAPIRequests.token(api)
            return .request(SignedRequest(request: token, resolve: token))
        }
        return .outcome(.pending, result: try VivaSale(order: order, config: viva).pendingResult)
    }

    public func read(_ response: HTTPResponseSpec, to current: HTTPRequestSpec, in exchange: Exchange<NoContext>) -> ProviderReading {
        guard exchange.order.operation == .vivaRefund else {
            return .verdict(.failed(code: .internalError, message: "a viva sale needs no HTTP call"))
        }
        guard let refund = try? VivaRefund(order: exchange.order), let api = (try? config.merchant(exchange.order.merchant))?.viva?.api else {
            return .verdict(.unknown(reason: "the refund order or its merchant's API credentials no longer read"))
        }
        let resolving = exchange.phase == .resolving
        if current.url.hasSuffix(VivaAPIRequests.tokenPath) { return refund.readToken(response, api: api, resolving: resolving) }
        return .verdict(resolving ? refund.resolve(response) : refund.classify(response))
    }

    /// The token call moves no money: whatever became of it, it is asked again.
    public func readFailure(_ failure: TransportFailure, of current: HTTPRequestSpec, in exchange: Exchange<NoContext>) -> ProviderVerdict {
        if exchange.phase == .resolving || (failure.mayHaveBeenSent && !current.url.hasSuffix(VivaAPIRequests.tokenPath)) {
            return .unknown(reason: failure.reason)
        }
        return .retry(reason: failure.reason)
    }

    public var refunding: (any Refunding)? { VivaRefunding() }

    /// Viva's transactions API answers by `transactionId`, which only the app's forwarded result
    /// carries; a sale whose result never came has none, and Viva offers no lookup by
    /// clientTransactionId. So nothing can tell: the expiry check ends it NEEDS_REVIEW.
    public func signStatusCheck(
        _ order: Order, pending: [String: JSONValue], purpose: DispatchPurpose, nowSeconds: Int64
    ) throws(Rejection) -> Signed<NoContext>? { nil }

    /// Only the last check is dispatched: earlier ones could not ask anything either.
    public func pendingFollowUp(for operation: Operation, timers: PaypipeConfig.Timers) -> PendingFollowUp? {
        operation == .sale ? .statusCheck(afterMilliseconds: timers.pendingExpireAfterMs) : nil
    }

    /// The ISV client secret travels in the sale URL (Viva's inter-app protocol): the ledger keeps
    /// it out of the stored outcome and puts it back whenever the outcome is sent or replayed.
    public static let outcomeSecretSettings = ["isvClientSecret"]

    public func withholdingSecrets(in outcome: Outcome) -> Outcome? {
        guard let url = outcome.result?["url"]?.stringValue, let withheld = VivaSale.withholdingISVSecret(in: url) else { return nil }
        var stored = outcome
        stored.result?["url"] = .string(withheld)
        return stored
    }

    public func withheldSecret(named setting: String, merchant: String) -> String? {
        guard setting == "isvClientSecret", let secret = (try? config.merchant(merchant))?.viva?.isvClientSecret, !secret.isEmpty else { return nil }
        return VivaQuery.percentEncode(secret.reveal())
    }

    public var callbackRoutes: [CallbackRoute] {
        [
            CallbackRoute(path: "/callbacks/viva", label: "viva", rateLimit: Self.callbackRateLimit) { request, context throws(CallbackRejection) in
                try await forwardedResult(request.body, context: context)
            }
        ]
    }

    /// The result URI forwarded by the app's backend: `{"orderId","uri","merchant"?}`.
    ///
    /// Everything that needs no order is checked before the order is looked up (body, URI syntax
    /// and fields, the merchant's policy, and with API credentials Viva's record of the
    /// transaction), so a request that is not a genuine result learns nothing about which orders
    /// exist. With credentials, Viva's record decides (`VivaConfirmation`); without, the URI is
    /// taken as is only when the merchant set `acceptUnconfirmedCallbacks`, and the outcome says
    /// `confirmed: false`.
    func forwardedResult(_ body: [UInt8], context: CallbackContext) async throws(CallbackRejection) -> CallbackDecision {
        let forwarded = try ForwardedCallback(body, field: "uri")
        let callback = try VivaSaleCallback(uri: forwarded.value)
        guard let viva = (try? config.merchant(forwarded.merchant))?.viva else {
            throw .unknownMerchant(forwarded.merchant, .viva)
        }
        guard let api = viva.api else {
            guard viva.acceptUnconfirmedCallbacks else {
                throw CallbackRejection(
                    status: 403, code: .confirmationUnavailable,
                    "merchant \(forwarded.merchant) has no Viva API credentials to confirm results with, and does not accept unconfirmed ones (viva.acceptUnconfirmedCallbacks)"
                )
            }
            return try await unconfirmed(callback, forwarded: forwarded, config: viva, orders: context)
        }
        guard let transactionId = callback.transactionId else {
            throw .viva(.missingField, "transactionId is required to confirm the result with Viva")
        }
        let transaction = try await transactions.transaction(transactionId, api: api, http: context.http)
        let order = try await context.order(forwarded.key, provider: .viva)
        try callback.requireScheme(of: order, config: viva)
        let verdict = try VivaConfirmation.verdict(for: transaction, callback: callback, order: order)
        return CallbackDecision(order: order, event: "\(order.orderId)|\(transactionId)", verdict: verdict)
    }

    /// The URI's own word, for a merchant that opted in: checked against the order, never confirmed.
    func unconfirmed(
        _ callback: VivaSaleCallback, forwarded: ForwardedCallback, config viva: VivaConfig, orders: any CallbackOrderLookup
    ) async throws(CallbackRejection) -> CallbackDecision {
        let order = try await orders.order(forwarded.key, provider: .viva)
        let validation = try VivaSaleCallback.validate(uri: forwarded.value, order: order, config: viva)
        var verdict = validation.verdict
        if case .succeeded(var result) = verdict {
            result["confirmed"] = false
            verdict = .succeeded(result)
        }
        let event = "\(order.orderId)|\(callback.transactionId ?? callback.clientTransactionId)"
        return CallbackDecision(order: order, event: event, verdict: verdict)
    }
}

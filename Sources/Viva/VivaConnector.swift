import PaypipeCore

extension Provider {
    public static let viva = Provider("viva")
}

extension Operation {
    public static let sale = Operation(.viva, "sale")
}

/// Viva.com Sale requests behind the pipeline's seam: the pipeline builds the
/// `vivapayclient://pay/v1` URL for the app (no HTTP call) and checks the result the app's
/// backend forwards.
public struct VivaConnector: ProviderConnector {
    public static let provider = Provider.viva
    public static let operations = [OperationSpec(.sale, movesMoney: true)]

    let config: PaypipeConfig

    public init(config: PaypipeConfig) async { self.config = config }

    public func sign(_ order: Order, purpose: DispatchPurpose, nowSeconds: Int64) throws(Rejection) -> Signed<NoContext> {
        let viva = try config.merchant(order.merchant).require(\.viva, .viva)
        return .outcome(.pending, result: try VivaSale(order: order, config: viva).pendingResult)
    }

    public func read(_ response: HTTPResponseSpec, to current: HTTPRequestSpec, in exchange: Exchange<NoContext>) -> ProviderReading {
        .verdict(.failed(code: "INTERNAL", message: "a viva sale needs no HTTP call"))
    }

    public var callbackRoutes: [CallbackRoute] {
        [CallbackRoute(path: "/callbacks/viva", label: "viva") { request, orders throws(CallbackRejection) in
            try await forwardedResult(request.body, orders: orders)
        }]
    }

    /// The result URI forwarded by the app's backend: `{"orderId","uri","merchant"?}`.
    func forwardedResult(_ body: [UInt8], orders: any CallbackOrderLookup) async throws(CallbackRejection) -> CallbackDecision {
        let forwarded = try ForwardedCallback(body, field: "uri")
        guard let viva = (try? config.merchant(forwarded.merchant))?.viva else {
            throw .unknownMerchant(forwarded.merchant, .viva)
        }
        let order = try await orders.order(forwarded.key, provider: .viva)
        let validation = try VivaSaleCallback.validate(uri: forwarded.value, order: order, config: viva)
        let event = "\(order.orderId)|\(validation.callback.transactionId ?? validation.callback.clientTransactionId)"
        return CallbackDecision(order: order, event: event, verdict: validation.verdict)
    }
}

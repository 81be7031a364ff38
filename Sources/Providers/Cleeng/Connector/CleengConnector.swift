import PaypipeCore

extension Provider {
    public static let cleeng = Provider("cleeng")
}

extension Operation {
    public static let appleReceipt = Operation(.cleeng, "appleReceipt")
}

/// Cleeng Apple in-app receipts behind the pipeline's seam: the receipt is posted here; the
/// Cleeng poller stage then owns the pending receipt (getAccessStatus every 5 s, up to 60 s).
public struct CleengConnector: ProviderConnector {
    public static let provider = Provider.cleeng
    public static let settingsSection: any MerchantSection.Type = CleengConfig.self
    public static let operations = [OperationSpec(.appleReceipt, movesMoney: false)]

    let config: PaypipeConfig

    public init(config: PaypipeConfig) async { self.config = config }

    public func sign(_ order: Order, purpose: DispatchPurpose, nowSeconds: Int64) throws(Rejection) -> Signed<NoContext> {
        let cleeng = try config.merchant(order.merchant).require(\.cleeng, .cleeng)
        return .request(SignedRequest(request: try CleengReceipt.request(order: order, config: cleeng)))
    }

    public func read(_ response: HTTPResponseSpec, to current: HTTPRequestSpec, in exchange: Exchange<NoContext>) -> ProviderReading {
        let params = exchange.order.params
        return .verdict(
            CleengReceiptResponse.classify(
                response, offerId: params["offerId"]?.stringValue ?? "", transactionId: params["transactionId"]?.stringValue ?? ""))
    }

    public func readFailure(_ failure: TransportFailure, of current: HTTPRequestSpec, in exchange: Exchange<NoContext>) -> ProviderVerdict {
        if exchange.phase == .resolving { return .unknown(reason: failure.reason) }
        return CleengReceiptResponse.classifyTransportFailure(reason: failure.reason)
    }

    /// A receipt still pending well past its polling deadline was lost with a poller.
    public func pendingFollowUp(for operation: Operation, timers: PaypipeConfig.Timers) -> PendingFollowUp? {
        guard operation == .appleReceipt else { return nil }
        return .poll(lostAfterMilliseconds: timers[.cleengGiveUp] + max(2 * timers[.cleengPollInterval], 30_000))
    }
}

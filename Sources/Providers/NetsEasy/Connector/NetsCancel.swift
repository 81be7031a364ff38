import PaypipeCore

extension Operation {
    public static let cancelNets = Operation(.nets, SubscriptionCancel.operationName)
}

/// Nets has no call that ends a subscription: its payment API has none, and a subscription's
/// `endDate` is set when it is created (PROVIDERS-MONEY §2, from SolidNetsEasyClient's
/// `Subscription.cs` and the Nexi reference; seed 001: "Merchant is responsible for managing
/// subscriptions after they're created"). Nets charges only when the merchant asks, so a
/// cancellation is paypipe no longer asking: the ledger applies the order when it takes it in,
/// and nothing is sent.
extension NetsConnector {
    public var cancelsWithoutProviderCall: Bool { true }
}

import PaypipeCore

/// A granted receipt is a subscription whose renewals and lapses Cleeng pushes nothing about that
/// paypipe can verify (its webhook topics for renewals are not documented, and seed 003 says to
/// rely on Cleeng for entitlement): the pollers ask getAccessStatus again at each expiry and at
/// least every `timers.entitlementRecheckMs`, and report what changed.
extension CleengConnector: EntitlementChecking {
    public var entitlementChecking: (any EntitlementChecking)? { self }

    public func opensSubscription(_ operation: Operation) -> Bool { operation == .appleReceipt }

    /// The subscription is the offer as this receipt's customer holds it; the check keeps what
    /// getAccessStatus needs (the customer token authorises it), since the order's contents go
    /// at compaction.
    public func subscriptionOpening(for order: Order, outcome: Outcome) -> SubscriptionOpening? {
        guard let receipt = try? CleengReceipt(order: order), let apiURL = config.merchants[order.merchant]?.cleeng?.apiURL else { return nil }
        var check: [String: JSONValue] = [
            "apiURL": .string(apiURL), "customerToken": .string(receipt.customerToken), "offerId": .string(receipt.offerId),
        ]
        if let ipAddress = receipt.ipAddress { check["ipAddress"] = .string(ipAddress) }
        let expiresAt = outcome.result?["expiresAt"]?.integerValue.map { $0 * 1000 }
        return SubscriptionOpening(reference: "\(receipt.offerId)@\(order.orderId)", check: .object(check), expiresAt: expiresAt)
    }

    public func recheckInterval(timers: PaypipeConfig.Timers) -> Int64 { timers.entitlementRecheckMs }

    public func checkRequest(_ check: JSONValue) -> HTTPRequestSpec? {
        guard let apiURL = check["apiURL"]?.stringValue, let token = check["customerToken"]?.stringValue,
            let offerId = check["offerId"]?.stringValue
        else { return nil }
        return CleengAccessStatusCall.request(
            customerToken: token, offerId: offerId, ipAddress: check["ipAddress"]?.stringValue, apiURL: apiURL, requestId: 1)
    }

    /// Access decides, never `expiresAt` alone (Cleeng's entitlement reference: it may lie in the
    /// past during a grace period while access is still granted).
    public func readCheck(_ response: HTTPResponseSpec) -> EntitlementReading? {
        switch CleengAccessStatusCall.classify(response, expectedId: 1) {
        case .granted(let grant): EntitlementReading(granted: true, expiresAt: grant.expiresAt.map { $0 * 1000 })
        case .notGranted: EntitlementReading(granted: false, expiresAt: nil)
        case .fatalError, .transient: nil
        }
    }
}

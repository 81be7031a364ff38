import PaypipeCore

/// A receipt Cleeng accepted is processed asynchronously: getAccessStatus, authorised by the
/// customer token, is asked every `timers.cleengPollIntervalMs` until access is granted or
/// `timers.cleengGiveUpMs` has passed.
extension CleengConnector: PendingPolling {
    public static let defaultPollIntervalMs: Int64 = 5000
    public static let defaultGiveUpMs: Int64 = 60000

    /// Every `intervalMs`, giving up after `deadlineMs` with `ACCESS_NOT_GRANTED`.
    public static func pollingPolicy(intervalMs: Int64 = defaultPollIntervalMs, deadlineMs: Int64 = defaultGiveUpMs) -> PollingPolicy? {
        PollingPolicy(intervalMs: intervalMs, deadlineMs: deadlineMs, giveUpCode: .accessNotGranted, giveUpReason: "access not granted")
    }

    public var pendingPolling: (any PendingPolling)? { self }

    public func pollingPolicy(timers: PaypipeConfig.Timers) -> PollingPolicy {
        Self.pollingPolicy(intervalMs: timers[.cleengPollInterval], deadlineMs: timers[.cleengGiveUp]) ?? Self.pollingPolicy()!
    }

    /// The merchant's API URL and the receipt's customer token, offer and IP address.
    public func pollTarget(for order: Order) throws(Rejection) -> PollTarget {
        guard order.operation == .appleReceipt else {
            throw Rejection(.unknownOperation, field: "operation", "cleeng polls only appleReceipt orders")
        }
        guard let apiURL = config.merchants[order.merchant]?.cleeng?.apiURL else {
            throw Rejection(.missingCredentials, field: "merchant", "merchant \(order.merchant) has no cleeng apiURL")
        }
        let params = order.params
        return PollTarget([
            apiURL, params["customerToken"]?.stringValue ?? "", params["offerId"]?.stringValue ?? "", params["ipAddress"]?.stringValue ?? "",
        ])
    }

    public func pollRequest(_ target: PollTarget, requestId: Int) -> HTTPRequestSpec {
        let v = target.values
        return CleengAccessStatusCall.request(
            customerToken: v[1], offerId: v[2], ipAddress: v[3].isEmpty ? nil : v[3], apiURL: v[0], requestId: requestId)
    }

    public func readPoll(_ response: HTTPResponseSpec, requestId: Int) -> PollAnswer {
        CleengAccessStatusCall.classify(response, expectedId: requestId).answer
    }

    public func readPollFailure(_ failure: TransportFailure) -> PollAnswer {
        CleengAccessStatusCall.classifyTransportFailure(reason: failure.reason).answer
    }
}

extension CleengAccessStatus {
    /// What this answer means to the poll schedule.
    public var answer: PollAnswer {
        switch self {
        case .granted, .fatalError: .ended(verdict!)
        case .notGranted: .notYet
        case .transient(let reason): .unanswered(reason: reason)
        }
    }
}

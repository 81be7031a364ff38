import PaypipeCore

/// A pending charge is decided by the provider later: the poller reads
/// `GET {baseURL}/charges?idempotencyKey=<the charge's key>` with the merchant's publishable key
/// until the charge has succeeded or been declined. Its webhook may end it first.
extension ExampleConnector: PendingPolling {
    public static let pollIntervalMs: Int64 = 300
    public static let giveUpMs: Int64 = 15_000

    public var pendingPolling: (any PendingPolling)? { self }

    public func pendingFollowUp(for operation: Operation, timers: PaypipeConfig.Timers) -> PendingFollowUp? {
        operation == .exampleCharge ? .poll(lostAfterMilliseconds: Self.giveUpMs + 30_000) : nil
    }

    public func pollingPolicy(timers: PaypipeConfig.Timers) -> PollingPolicy {
        PollingPolicy(
            intervalMs: Self.pollIntervalMs, deadlineMs: Self.giveUpMs, giveUpCode: .exampleNotDecided, giveUpReason: "the charge was not decided")!
    }

    public func pollTarget(for order: Order) throws(Rejection) -> PollTarget {
        let settings = try config.merchant(order.merchant).require(\.example, .example)
        return PollTarget([settings.baseURL, Self.idempotencyKey(order.key), settings.publishableKey])
    }

    public func pollRequest(_ target: PollTarget, requestId: Int) -> HTTPRequestSpec {
        let v = target.values
        return HTTPRequestSpec(method: .GET, url: v[0] + "/charges?idempotencyKey=" + v[1], headers: [HTTPHeader("Authorization", "Bearer " + v[2])])
    }

    public func readPoll(_ response: HTTPResponseSpec, requestId: Int) -> PollAnswer {
        guard response.status == 200 else { return .unanswered(reason: "HTTP \(response.status)") }
        switch read(charge: response.body) {
        case .verdict(.pending)?: return .notYet
        case .verdict(let verdict)?: return .ended(verdict)
        default: return .unanswered(reason: "an answer without id and status")
        }
    }
}

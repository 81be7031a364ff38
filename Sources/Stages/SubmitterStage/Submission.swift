import PaypipeCore
import StageRuntime
import StageWire

/// Retry and resolution budgets, with documented defaults.
package struct SubmissionPolicy: Sendable, Equatable {
    /// Sends of a request whose failure is known to have had no effect.
    package var maxAttempts = 4
    /// Status/query calls made to resolve an unknown outcome before reporting `unknown`.
    package var maxResolveAttempts = 5
    /// Follow-up requests one submission may send (a connector's second step, a terminate and
    /// the read after it), so that no reading can loop.
    package var maxFollowUps = 8
    package var baseBackoffMilliseconds: Int64 = 100
    package var maxBackoffMilliseconds: Int64 = 5000
    package init() {}

    /// Exponential backoff with jitter (`jitter` in 0..<1), so retries from many orders spread out.
    func backoff(attempt: Int, jitter: Double) -> Int64 {
        let exponential = baseBackoffMilliseconds << Int64(min(max(attempt - 1, 0), 16))
        let capped = min(exponential, maxBackoffMilliseconds)
        return Int64(Double(capped) * (0.5 + 0.5 * jitter))
    }
}

/// The submitter's state machine for one signed request: it decides what to send next from each
/// response or transport failure, following the provider module's verdict table (retry,
/// query, or fail). It never resends a request whose outcome is unknown unless the
/// provider module says that is a safe resolution (Nets' same Idempotency-Key replay); otherwise
/// it sends the pre-signed status/query request.
package struct Submission: Sendable {
    package enum Action: Sendable, Equatable {
        case send(HTTPRequestSpec, afterMilliseconds: Int64)
        case finish(Outcome)
    }

    package let work: SubmitWork
    let connector: any ProviderConnector
    let policy: SubmissionPolicy
    var phase = ExchangePhase.submitting
    var current: HTTPRequestSpec
    var attempts = 0
    var resolveAttempts = 0
    var retriesInPhase = 0
    /// Resolving a redelivered order before it may be submitted again.
    var resolvingBeforeResubmit = false
    /// Follow-up requests sent (`ProviderReading.followUp`), at most `policy.maxFollowUps`.
    var followUps = 0

    package init(work: SubmitWork, connector: any ProviderConnector, policy: SubmissionPolicy = SubmissionPolicy()) {
        self.work = work
        self.connector = connector
        self.policy = policy
        current = work.request
        if work.purpose.isStatusCheck { phase = .resolving }
    }

    package mutating func start() -> Action {
        // Checked before anything is sent: a context its connector cannot read would make
        // every answer unreadable, and the order must still end.
        guard connector.canRead(work) else {
            return .finish(Self.unsent(work, .unreadableWork, "the signed work's \(work.order.provider.rawValue) context is unreadable"))
        }
        // A redelivery: the first copy may have reached the provider.
        if work.purpose == .submit, work.generation > 1 {
            switch connector.redelivery(of: work) {
            case .resubmit: break
            case .resolveFirst(let request):
                phase = .resolving
                resolvingBeforeResubmit = true
                current = request
                resolveAttempts = 1
                return .send(request, afterMilliseconds: 0)
            case .review:
                return needsReview(
                    "redelivered (dispatch \(work.generation)) and \(work.order.provider.rawValue) cannot tell whether it saw the first copy")
            }
        }
        attempts = 1
        return .send(current, afterMilliseconds: 0)
    }

    package mutating func receive(_ response: HTTPResponseSpec, jitter: Double) -> Action {
        switch connector.read(response, to: current, work: work, phase: phase, resolvingBeforeResubmit: resolvingBeforeResubmit, followUps: followUps)
        {
        case .followUp(let next):
            guard followUps < policy.maxFollowUps else { return unresolved("\(followUps) follow-up requests without a verdict") }
            followUps += 1
            current = next
            return .send(next, afterMilliseconds: 0)
        case .verdict(let verdict):
            return apply(verdict, jitter: jitter)
        }
    }

    package mutating func fail(_ failure: TransportFailure, jitter: Double) -> Action {
        let verdict = connector.readFailure(
            failure, of: current, work: work, phase: phase, resolvingBeforeResubmit: resolvingBeforeResubmit, followUps: followUps)
        return apply(verdict, jitter: jitter)
    }

    // MARK: - Verdicts

    private mutating func apply(_ verdict: ProviderVerdict, jitter: Double) -> Action {
        if work.purpose.isStatusCheck, case .pending(let result) = verdict {
            // The provider confirms nothing was taken yet: the order stays pending with the answer
            // it had, until its last check, which ends it (docs/operations.md, "Every pending
            // order ends").
            guard work.purpose == .expiryCheck else { return finish(.pending, result: work.pending ?? result) }
            return finish(
                .failed,
                error: .init(
                    code: .expired, message: "still pending at the provider when the order expired; the provider confirms nothing was taken"))
        }
        switch verdict {
        case .succeeded(let result): return finish(.succeeded, result: result)
        case .pending(let result): return finish(.pending, result: result)
        case .failed(let code, let message): return finish(.failed, error: .init(code: code, message: message))
        case .neverSeen(let reason):
            // Only a resolution before a resubmit may send the order again; anywhere else the
            // reading settles nothing.
            guard resolvingBeforeResubmit else { return apply(.unknown(reason: reason), jitter: jitter) }
            resolvingBeforeResubmit = false
            phase = .submitting
            retriesInPhase = 0
            current = work.request
            attempts = 1
            return .send(current, afterMilliseconds: 0)
        case .retry(let reason):
            retriesInPhase += 1
            let budget = phase == .submitting ? policy.maxAttempts : policy.maxResolveAttempts
            guard retriesInPhase < budget else {
                if phase == .resolving { return unresolved(reason) }
                return finish(.failed, error: .init(code: .providerUnavailable, message: "gave up after \(retriesInPhase) attempts: \(reason)"))
            }
            countSend()
            return .send(current, afterMilliseconds: policy.backoff(attempt: retriesInPhase, jitter: jitter))
        case .unknown(let reason):
            if phase == .resolving {
                retriesInPhase += 1
                guard retriesInPhase < policy.maxResolveAttempts else { return unresolved(reason) }
                countSend()
                return .send(current, afterMilliseconds: policy.backoff(attempt: retriesInPhase, jitter: jitter))
            }
            guard let resolution = connector.resolution(forUnknown: work) else { return unresolved(reason) }
            phase = .resolving
            retriesInPhase = 0
            current = resolution
            countSend()
            return .send(resolution, afterMilliseconds: policy.backoff(attempt: 1, jitter: jitter))
        }
    }

    private mutating func countSend() {
        if phase == .submitting { attempts += 1 } else { resolveAttempts += 1 }
    }

    private func finish(_ status: Outcome.Status, result: [String: JSONValue]? = nil, error: Outcome.ErrorInfo? = nil) -> Action {
        .finish(Outcome(order: work.order, status: status, result: result, error: error, attempts: attempts))
    }

    /// Still unknown after the resolution budget: reported as `unknown` (non-terminal); the
    /// ledger redelivers the order later, resolved first. A redelivered order still unknown
    /// has had its budget: it goes to review, never to a guess.
    private func unresolved(_ reason: String) -> Action {
        if work.purpose == .expiryCheck { return needsReview("the provider cannot tell what became of the expired order: \(reason)") }
        if work.purpose == .submit, work.generation > 1 { return needsReview("still unresolved after dispatch \(work.generation): \(reason)") }
        return finish(.unknown, error: .init(code: .outcomeUnknown, message: "provider result not yet known: \(reason)"))
    }

    private func needsReview(_ reason: String) -> Action {
        .finish(.needsReview(work.order, reason, attempts: attempts))
    }

    /// The outcome of work this submitter cannot send at all: `rejected` for a first submission,
    /// which no provider has seen; a redelivery or a status check may have money behind it, so
    /// it goes to review instead.
    static func unsent(_ work: SubmitWork, _ code: Rejection.Code, _ message: String) -> Outcome {
        guard work.purpose == .submit, work.generation == 1 else { return .needsReview(work.order, "\(code.rawValue): \(message)") }
        return Outcome(order: work.order, status: .rejected, error: .init(code: code.rawValue, message: message), attempts: 0)
    }
}

extension ProviderConnector {
    /// The connector's typed view of one submission, or nil when its context is unreadable.
    func exchange(_ work: SubmitWork, phase: ExchangePhase, resolvingBeforeResubmit: Bool = false, followUps: Int = 0) -> Exchange<Context>? {
        guard let context = Context(json: work.context) else { return nil }
        return Exchange(
            order: work.order, signed: SignedRequest(request: work.request, resolve: work.resolve, context: context),
            purpose: work.purpose, phase: phase, resolvingBeforeResubmit: resolvingBeforeResubmit, followUps: followUps,
            orderAgeMilliseconds: max(0, Timestamp.nowMilliseconds() - work.acceptedAt))
    }

    func canRead(_ work: SubmitWork) -> Bool { Context(json: work.context) != nil }

    func read(
        _ response: HTTPResponseSpec, to current: HTTPRequestSpec, work: SubmitWork, phase: ExchangePhase, resolvingBeforeResubmit: Bool,
        followUps: Int
    ) -> ProviderReading {
        guard let exchange = exchange(work, phase: phase, resolvingBeforeResubmit: resolvingBeforeResubmit, followUps: followUps) else {
            return .verdict(.unknown(reason: "unreadable work context"))
        }
        return read(response, to: current, in: exchange)
    }

    func readFailure(
        _ failure: TransportFailure, of current: HTTPRequestSpec, work: SubmitWork, phase: ExchangePhase, resolvingBeforeResubmit: Bool,
        followUps: Int
    ) -> ProviderVerdict {
        guard let exchange = exchange(work, phase: phase, resolvingBeforeResubmit: resolvingBeforeResubmit, followUps: followUps) else {
            return .unknown(reason: failure.reason)
        }
        return readFailure(failure, of: current, in: exchange)
    }

    func redelivery(of work: SubmitWork) -> Redelivery {
        exchange(work, phase: .submitting).map { redelivery(of: $0) } ?? .review
    }

    func resolution(forUnknown work: SubmitWork) -> HTTPRequestSpec? {
        exchange(work, phase: .submitting).flatMap { resolution(forUnknown: $0) }
    }
}

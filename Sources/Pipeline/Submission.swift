import Cleeng
import NetsEasy
import PaypipeCore
import PhonePe
import TrustPayments

/// Why an HTTP exchange produced no response.
public enum TransportFailure: Error, Sendable, Equatable {
    /// The request certainly did not reach the provider (connection refused, connect timeout).
    case notSent(String)
    /// It may have reached the provider (timeout or reset after sending).
    case mayHaveBeenSent(String)
}

/// Retry and resolution budgets, with documented defaults.
public struct SubmissionPolicy: Sendable, Equatable {
    /// Sends of a request whose failure is known to have had no effect.
    public var maxAttempts = 4
    /// Status/query calls made to resolve an unknown outcome before reporting `unknown`.
    public var maxResolveAttempts = 5
    public var baseBackoffMilliseconds: Int64 = 100
    public var maxBackoffMilliseconds: Int64 = 5000
    public init() {}

    /// Exponential backoff with jitter (`jitter` in 0..<1), so retries from many orders spread out.
    func backoff(attempt: Int, jitter: Double) -> Int64 {
        let exponential = baseBackoffMilliseconds << Int64(min(max(attempt - 1, 0), 16))
        let capped = min(exponential, maxBackoffMilliseconds)
        return Int64(Double(capped) * (0.5 + 0.5 * jitter))
    }
}

/// The submitter's state machine for one signed request: it decides what to send next from each
/// response or transport failure, following the provider module's verdict table (DESIGN.md:
/// retry, query, or fail). It never resends a request whose outcome is unknown unless the
/// provider module says that is a safe resolution (Nets' same Idempotency-Key replay); otherwise
/// it sends the pre-signed status/query request.
public struct Submission: Sendable {
    public enum Action: Sendable, Equatable {
        case send(HTTPRequestSpec, afterMilliseconds: Int64)
        case finish(Outcome)
    }

    enum Phase: Sendable, Equatable { case submitting, resolving }

    public let work: SubmitWork
    let policy: SubmissionPolicy
    var phase = Phase.submitting
    var current: HTTPRequestSpec
    var attempts = 0
    var resolveAttempts = 0
    var retriesInPhase = 0

    public init(work: SubmitWork, policy: SubmissionPolicy = SubmissionPolicy()) {
        self.work = work
        self.policy = policy
        current = work.request
        if work.isStatusCheck { phase = .resolving }
    }

    public mutating func start() -> Action {
        attempts = 1
        return .send(current, afterMilliseconds: 0)
    }

    public mutating func receive(_ response: HTTPResponseSpec, jitter: Double) -> Action {
        switch read(response) {
        case .followUp(let next):
            current = next
            return .send(next, afterMilliseconds: 0)
        case .verdict(let verdict):
            return apply(verdict, jitter: jitter)
        }
    }

    public mutating func fail(_ failure: TransportFailure, jitter: Double) -> Action {
        apply(classify(failure), jitter: jitter)
    }

    // MARK: - Verdicts

    private mutating func apply(_ verdict: ProviderVerdict, jitter: Double) -> Action {
        switch verdict {
        case .succeeded(let result): return finish(.succeeded, result: result)
        case .pending(let result):
            if work.isStatusCheck {
                // PROTOCOL.md: a missed callback is resolved by the status call, terminal either way.
                return finish(.failed, error: .init(code: "AUTH_NOT_COMPLETED", message: "no callback arrived and the provider's status is still pending"))
            }
            return finish(.pending, result: result)
        case .failed(let code, let message): return finish(.failed, error: .init(code: code, message: message))
        case .retry(let reason):
            retriesInPhase += 1
            let budget = phase == .submitting ? policy.maxAttempts : policy.maxResolveAttempts
            guard retriesInPhase < budget else {
                if phase == .resolving { return unresolved(reason) }
                return finish(.failed, error: .init(code: "PROVIDER_UNAVAILABLE", message: "gave up after \(retriesInPhase) attempts: \(reason)"))
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
            guard let resolution = resolutionRequest() else { return unresolved(reason) }
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
    /// ledger redelivers the order later, and every provider reference is idempotent.
    private func unresolved(_ reason: String) -> Action {
        finish(.unknown, error: .init(code: "OUTCOME_UNKNOWN", message: "provider result not yet known: \(reason)"))
    }

    // MARK: - Provider tables (all decisions come from the provider modules)

    enum Reading { case verdict(ProviderVerdict), followUp(HTTPRequestSpec) }

    private func read(_ response: HTTPResponseSpec) -> Reading {
        let order = work.order
        switch order.provider {
        case .trustpayments:
            guard let request = TPWebServicesRequest(http: work.request) else {
                return .verdict(.failed(code: "INTERNAL", message: "unreadable Trust Payments request"))
            }
            if phase == .resolving, let resolve = work.resolve, let query = TPWebServicesRequest(http: resolve) {
                return .verdict(TPWebServices.resolveUpdate(queryResponse: response, query: query, update: request))
            }
            return .verdict(TPWebServices.classify(response, for: request))
        case .nets:
            switch NetsPayments.handle(response, to: current) {
            case .finish(let verdict): return .verdict(verdict)
            case .send(let next): return .followUp(next)
            }
        case .phonepe:
            if phase == .resolving {
                return .verdict(PhonePeAuthStatus.classify(response, order: order, merchantId: work.context["merchantId"] ?? ""))
            }
            return .verdict(PhonePeAuthInit.classify(response, authRequestId: work.context["authRequestId"] ?? ""))
        case .cleeng:
            let offerId = order.params["offerId"]?.stringValue ?? ""
            let transactionId = order.params["transactionId"]?.stringValue ?? ""
            return .verdict(CleengReceiptResponse.classify(response, offerId: offerId, transactionId: transactionId))
        case .viva:
            return .verdict(.failed(code: "INTERNAL", message: "viva sale needs no HTTP call"))
        }
    }

    private func classify(_ failure: TransportFailure) -> ProviderVerdict {
        let (sent, reason): (Bool, String) = switch failure {
        case .notSent(let r): (false, r)
        case .mayHaveBeenSent(let r): (true, r)
        }
        if phase == .resolving { return .unknown(reason: reason) }  // a status call: asking again is safe
        switch work.order.provider {
        case .nets:
            guard let kind = NetsRequestKind(current) else { return sent ? .unknown(reason: reason) : .retry(reason: reason) }
            return NetsPayments.classifyTransportFailure(kind: kind, requestMayHaveBeenSent: sent, reason: reason)
        case .cleeng:
            return CleengReceiptResponse.classifyTransportFailure(reason: reason)
        case .trustpayments:
            let readOnly = TPWebServicesRequest(http: work.request)?.kind.isReadOnly ?? false
            return !sent || readOnly ? .retry(reason: reason) : .unknown(reason: reason)
        case .phonepe, .viva:
            return sent ? .unknown(reason: reason) : .retry(reason: reason)
        }
    }

    /// The request that resolves an unknown outcome, if the provider has a safe one.
    private func resolutionRequest() -> HTTPRequestSpec? {
        if work.order.provider == .nets {
            switch NetsPayments.resolution(forUnknown: work.request) {
            case .replayWithSameIdempotencyKey(let request), .repeatRead(let request): return request
            case .manualReview: return nil
            }
        }
        return work.resolve
    }
}

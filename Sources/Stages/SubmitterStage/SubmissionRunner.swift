import HTTPTransport
import NIOCore
import PaypipeCore
import Prometheus
import StageRuntime
import StageWire
import Synchronization
import Tracing

/// Runs claimed submissions, at most `concurrency` at once, on the HTTP client's event loops:
/// each answer is read where it arrives and the next send leaves from there, so a request costs
/// no Swift task and no continuation: a task per request in flight would hold more of the
/// submitter's heap and buy no speed. Finished
/// work goes to `onFinish` on the thread it finished on.
final class SubmissionRunner: Sendable {
    struct Finished: Sendable {
        var work: SubmitWork
        /// nil: the work stopped unfinished because its lease was lost; the order is not this
        /// submitter's to answer any more.
        var outcome: Outcome?
        /// The `traceparent` of the submission's span, for the outcome's frame.
        var trace: String? = nil
    }

    private struct State {
        var waiting = CircularBuffer<SubmitWork>()
        var running = 0
    }

    private let state = Mutex(State())
    private let concurrency: Int
    private let registry: ConnectorRegistry
    private let policy: SubmissionPolicy
    private let http: ProviderHTTPClient
    private let leases: LeaseWindow
    private let runningChanged: @Sendable (Int) -> Void
    private let onFinish: @Sendable (Finished) -> Void
    private let requests: ProviderRequestMetrics?
    private let jitter = Jitter()

    /// `onFinish` gets each finished piece of work on the thread it finished on (often an event
    /// loop, so it must not block). `runningChanged` gets the new count of running submissions
    /// under the runner's lock, so the last value it got is the count now: reported after the
    /// lock, from two event loops, an older count could land last and leave a gauge at 1 with
    /// nothing running.
    init(
        concurrency: Int, registry: ConnectorRegistry, policy: SubmissionPolicy, http: ProviderHTTPClient, leases: LeaseWindow = .unchecked,
        requests: ProviderRequestMetrics? = nil, runningChanged: @escaping @Sendable (Int) -> Void = { _ in },
        onFinish: @escaping @Sendable (Finished) -> Void
    ) {
        self.requests = requests
        self.concurrency = max(1, concurrency)
        self.registry = registry
        self.policy = policy
        self.http = http
        self.leases = leases
        self.runningChanged = runningChanged
        self.onFinish = onFinish
    }

    /// Submissions between their first send and their outcome.
    var running: Int { state.withLock { $0.running } }

    /// Starts what fits under the concurrency limit; the rest waits its turn here.
    func start(_ items: [SubmitWork]) {
        let startNow = state.withLock { state -> [SubmitWork] in
            var startNow: [SubmitWork] = []
            for item in items {
                if state.running < concurrency {
                    state.running += 1
                    startNow.append(item)
                } else {
                    state.waiting.append(item)
                }
            }
            if !startNow.isEmpty { runningChanged(state.running) }
            return startNow
        }
        for item in startNow { run(item) }
    }

    /// Runs `first`, and after it, in a loop rather than by recursion, each waiting item that
    /// finished without sending anything (an unknown provider, an unreadable context).
    private func run(_ first: SubmitWork) {
        var next: SubmitWork? = first
        while let item = next {
            next = nil
            let span = StageTracing.startSpan("paypipe.submit", continuing: item.trace, kind: .consumer)
            if let span { StageTracing.describe(span, order: item.order.identity) }
            guard let connector = registry.connector(for: item.order.provider) else {
                next = end(
                    item, Submission.unsent(item, .unknownProvider, "this submitter has no connector for \(item.order.provider.rawValue)"), span)
                continue
            }
            guard leases.allowsSend(item) else {
                next = end(item, nil, span)
                continue
            }
            var submission = Submission(work: item, connector: connector, policy: policy)
            switch submission.start() {
            case .finish(let outcome): next = end(item, outcome, span)
            case .send(let request, let delay): send(request, after: delay, submission, span)
            }
        }
    }

    /// Every send checks the lease first, after its backoff: once the lease is lost, or could
    /// lapse before this request is answered, nothing more leaves for the order.
    private func send(_ request: HTTPRequestSpec, after delay: Int64, _ submission: Submission, _ span: (any Span)?) {
        guard delay <= 0 else { return http.schedule(afterMilliseconds: delay) { self.send(request, after: 0, submission, span) } }
        guard leases.allowsSend(submission.work) else {
            if let next = end(submission.work, nil, span) { run(next) }
            return
        }
        let sentAt = ContinuousClock.now
        let call = span.flatMap { StageTracing.startHTTPSpan(request, in: $0) }
        http.execute(request) { result in
            self.requests?.observe(submission.work.order, since: sentAt, result)
            if let call { StageTracing.endHTTPSpan(call, result.map(\.status)) }
            var submission = submission
            let action =
                switch result {
                case .success(let response): submission.receive(response, jitter: self.jitter.next())
                case .failure(let failure): submission.fail(failure, jitter: self.jitter.next())
                }
            switch action {
            case .send(let request, let delay): self.send(request, after: delay, submission, span)
            case .finish(let outcome): if let next = self.end(submission.work, outcome, span) { self.run(next) }
            }
        }
    }

    /// Hands the outcome on and frees the slot; returns the waiting item that takes it.
    /// The count goes down before the outcome goes out, so whoever reads the outcome reads a
    /// `running` that no longer counts it.
    private func end(_ item: SubmitWork, _ outcome: Outcome?, _ span: (any Span)?) -> SubmitWork? {
        let next = state.withLock { state -> SubmitWork? in
            if let next = state.waiting.popFirst() { return next }
            state.running -= 1
            runningChanged(state.running)
            return nil
        }
        var trace: String?
        if let span {
            span.attributes["paypipe.status"] = outcome?.status.rawValue ?? "lease_lost"
            trace = StageTracing.traceparent(of: span)
            span.end()
        }
        onFinish(Finished(work: item, outcome: outcome, trace: trace))
        return next
    }
}

/// Backoff jitter in 0..<1 for any event loop: SplitMix64 over an atomic counter seeded once.
/// `Double.random` would ask the kernel for randomness (a `getrandom` call) on every answer, though
/// only a retry uses its jitter, and a retry's spread needs no secrecy.
final class Jitter: Sendable {
    private let counter = Atomic<UInt64>(UInt64.random(in: .min ... .max))

    func next() -> Double {
        var z = counter.wrappingAdd(0x9E37_79B9_7F4A_7C15, ordering: .relaxed).newValue
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        z ^= z >> 31
        return Double(z >> 11) * 0x1p-53
    }
}

/// Each provider request's duration and what came back, by provider and operation
/// (`paypipe_provider_request_duration_seconds`, `paypipe_provider_responses_total`).
final class ProviderRequestMetrics: Sendable {
    private struct Series {
        let duration: DurationHistogram
        var responses: [String: Counter]
    }

    private let metrics: StageMetrics
    private struct Key: Hashable {
        let provider, operation: String
    }

    private let series = Mutex<[Key: Series]>([:])

    init(metrics: StageMetrics) { self.metrics = metrics }

    func observe(_ order: Order, since sentAt: ContinuousClock.Instant, _ result: Result<HTTPResponseSpec, TransportFailure>) {
        let elapsed = ContinuousClock.now - sentAt
        let statusClass: String
        switch result {
        case .success(let response): statusClass = "\(min(max(response.status / 100, 1), 5))xx"
        case .failure: statusClass = "transport"
        }
        let (provider, operation) = (order.provider.rawValue, order.operation.rawValue)
        let (duration, responses) = series.withLock { all -> (DurationHistogram, Counter) in
            let key = Key(provider: provider, operation: operation)
            var entry =
                all[key]
                ?? Series(
                    duration: metrics.latency(
                        "paypipe_provider_request_duration_seconds", [("provider", provider), ("operation", operation)],
                        help: "Time from sending a provider request to its answer or transport failure, by provider and operation"),
                    responses: [:])
            let counter =
                entry.responses[statusClass]
                ?? metrics.counter(
                    "paypipe_provider_responses_total", [("provider", provider), ("operation", operation), ("status_class", statusClass)],
                    help: "Provider answers by HTTP status class (2xx to 5xx), or transport for none (timeout, refused, reset)")
            entry.responses[statusClass] = counter
            all[key] = entry
            return (entry.duration, counter)
        }
        duration.record(elapsed)
        responses.increment()
    }
}

import Logging
import PaypipeCore
import Synchronization
import Prometheus
import ZeroMQ

/// `paypipe-submitter`: sends signed requests to providers with bounded concurrency, follows
/// each `Submission` to a verdict, and reports outcomes to the ledger. It holds no secrets.
public final class SubmitterService: Sendable {
    let config: PaypipeConfig
    let concurrency: Int
    let policy: SubmissionPolicy
    public let logger: Logger
    let metricsAddress: String
    public let metrics = StageMetrics()
    private let receiver = Mutex<ZMQReceiver?>(nil)
    private let stopFlag = StopFlag()

    public init(
        config: PaypipeConfig, concurrency: Int = 256, policy: SubmissionPolicy = SubmissionPolicy(),
        metricsAddress: String = "127.0.0.1:0", logger: Logger
    ) {
        self.config = config
        self.metricsAddress = metricsAddress
        self.concurrency = max(1, concurrency)
        self.policy = policy
        self.logger = logger
    }

    public func run() async throws {
        let context = try ZMQContext()
        let e = config.endpoints
        let pull = try context.socket(.pull, options: workQueueOptions())
        try pull.connect(e.signedOut)
        let resultsSocket = try context.socket(.push, options: stageOptions())
        try resultsSocket.connect(e.results)
        let work = try workReceiver(pull, capacity: concurrency)
        let results = try ZMQSender(socket: resultsSocket)
        receiver.withLock { $0 = work }
        if stopFlag.isStopped { work.stop() }
        let http = ProviderHTTPClient(
            connectTimeoutMilliseconds: config.timers.httpConnectTimeoutMs,
            requestTimeoutMilliseconds: config.timers.httpRequestTimeoutMs)
        logger.info("submitter ready", metadata: ["signedOut": "\(e.signedOut)", "concurrency": "\(concurrency)"])

        let policy = self.policy
        let logger = self.logger
        let metrics = self.metrics
        let metricsTask = metrics.start(address: metricsAddress, role: "submitter", logger: logger)
        let inFlightGauge = metrics.gauge("paypipe_submitter_in_flight", help: "Submissions in progress")
        let retries = metrics.counter("paypipe_submitter_retries_total", help: "Requests sent again after a retryable failure")
        let latency = metrics.latency("paypipe_order_latency_seconds", help: "From ledger acceptance to the submitter's outcome")
        await withTaskGroup(of: Void.self) { group in
            var inFlight = 0
            do {
                for try await message in work {
                    if inFlight >= concurrency {
                        await group.next()
                        inFlight -= 1
                    }
                    inFlight += 1
                    inFlightGauge.set(Double(inFlight))
                    group.addTask {
                        guard let item = try? SubmitWork.decode(message.body) else {
                            logger.warning("unreadable work frame", metadata: ["bytes": "\(message.body.count)"])
                            return
                        }
                        let outcome = await SubmitterService.submit(item, policy: policy, http: http)
                        if outcome.attempts > 1 { retries.increment(by: Int64(outcome.attempts - 1)) }
                        metrics.counter("paypipe_submitter_outcomes_total", [("status", outcome.status.rawValue)], help: "Outcomes from the submitter, by status")
                            .increment()
                        if item.acceptedAt > 0 { latency.recordNanoseconds(max(0, milliseconds() - item.acceptedAt) * 1_000_000) }
                        try? await results.send(outcome.bytes)
                    }
                }
            } catch {
                logger.error("work socket failed", metadata: ["error": "\(error)"])
            }
        }
        await http.shutdown()
        _ = await results.finish()
        await metrics.stop(metricsTask)
        context.terminate()
        logger.info("submitter stopped")
    }

    /// Drives one submission to its outcome. Every decision is `Submission`'s.
    static func submit(_ work: SubmitWork, policy: SubmissionPolicy, http: ProviderHTTPClient) async -> Outcome {
        var submission = Submission(work: work, policy: policy)
        var action = submission.start()
        while true {
            switch action {
            case .finish(let outcome):
                return outcome
            case .send(let request, let delay):
                if delay > 0 { try? await Task.sleep(for: .milliseconds(delay)) }
                switch await http.execute(request) {
                case .success(let response): action = submission.receive(response, jitter: Double.random(in: 0..<1))
                case .failure(let failure): action = submission.fail(failure, jitter: Double.random(in: 0..<1))
                }
            }
        }
    }

    /// Stops taking work; requests in flight finish and their outcomes are delivered.
    public func stop() {
        stopFlag.stop()
        receiver.withLock { $0 }?.stop()
    }
}

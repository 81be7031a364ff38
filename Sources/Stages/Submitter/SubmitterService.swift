import HTTPTransport
import Logging
import PaypipeCore
import Prometheus
import ServiceLifecycle
import StageRuntime
import StageWire
import Synchronization
import ZeroMQ

/// `paypipe-submitter`: sends signed requests to providers with bounded concurrency, follows
/// each `Submission` to a verdict, and reports outcomes to the ledger. It holds no secrets.
package final class SubmitterService: MeasuredStage {
    let config: PaypipeConfig
    let registry: ConnectorRegistry
    let concurrency: Int
    let policy: SubmissionPolicy
    let logger: Logger
    package let metrics = StageMetrics()
    /// Submissions between their first send and their reported outcome.
    private let inFlight = Atomic<Int>(0)

    package init(
        config: PaypipeConfig, registry: ConnectorRegistry, concurrency: Int = 256, policy: SubmissionPolicy = SubmissionPolicy(),
        logger: Logger
    ) {
        self.config = config
        self.registry = registry
        self.concurrency = max(1, concurrency)
        self.policy = policy
        self.logger = logger
    }

    package func run() async throws {
        let links = try StageLinks(config: config, role: .submitter)
        let context = try ZMQContext()
        defer { context.terminate() }
        let e = config.endpoints
        let pull = try context.socket(.pull, options: links.client(workQueueOptions()))
        try pull.connect(e.signedOut)
        let resultsSocket = try context.socket(.push, options: links.client(stageOptions()))
        try resultsSocket.connect(e.results)
        let work = try workReceiver(pull, capacity: concurrency)
        let results = try ZMQSender(socket: resultsSocket)
        let http = ProviderHTTPClient(
            connectTimeoutMilliseconds: config.timers.httpConnectTimeoutMs,
            requestTimeoutMilliseconds: config.timers.httpRequestTimeoutMs)
        logger.info("submitter ready", metadata: ["signedOut": "\(e.signedOut)", "concurrency": "\(concurrency)"])

        let (policy, logger, metrics, registry, concurrency) = (self.policy, self.logger, self.metrics, self.registry, self.concurrency)
        let inFlightGauge = metrics.gauge("paypipe_submitter_in_flight", help: "Submissions in progress")
        let retries = metrics.counter("paypipe_submitter_retries_total", help: "Requests sent again after a retryable failure")
        let latency = metrics.latency("paypipe_order_latency_seconds", help: "From ledger acceptance to the submitter's outcome")
        @Sendable func report(_ outcome: Outcome) async {
            metrics.counter("paypipe_submitter_outcomes_total", [("status", outcome.status.rawValue)], help: "Outcomes from the submitter, by status")
                .increment()
            do {
                try await results.send(outcome.bytes)
            } catch {
                // The ledger redelivers an order whose outcome never arrived.
                logger.error("could not hand an outcome to the ledger", metadata: ["order": "\(outcome.merchant)/\(outcome.orderId)", "error": "\(error)"])
            }
        }

        // Graceful shutdown stops taking work; submissions in flight finish and report.
        await withGracefulShutdownHandler {
            await withTaskGroup(of: Void.self) { group in
                var running = 0
                do {
                    for try await message in work {
                        if running >= concurrency {
                            await group.next()
                            running -= 1
                        }
                        running += 1
                        group.addTask {
                            inFlightGauge.set(Double(self.inFlight.add(1, ordering: .relaxed).newValue))
                            defer { inFlightGauge.set(Double(self.inFlight.subtract(1, ordering: .relaxed).newValue)) }
                            let item: SubmitWork
                            do throws(EnvelopeError) {
                                item = try SubmitWork.decode(message.body, catalog: registry.catalog)
                            } catch {
                                logger.warning("unreadable work frame", metadata: ["bytes": "\(message.body.count)", "reason": "\(error)"])
                                if let outcome = Outcome.unreadableWork(message.body, reason: error.description) { await report(outcome) }
                                return
                            }
                            guard let connector = registry.connector(for: item.order.provider) else {
                                await report(Outcome(
                                    order: item.order, status: .rejected,
                                    error: .init(code: Rejection.Code.unknownProvider.rawValue, message: "this submitter has no connector for \(item.order.provider.rawValue)"),
                                    attempts: 0))
                                return
                            }
                            let outcome = await SubmitterService.submit(Submission(work: item, connector: connector, policy: policy), http: http)
                            if outcome.attempts > 1 { retries.increment(by: Int64(outcome.attempts - 1)) }
                            if item.acceptedAt > 0 { latency.recordNanoseconds(max(0, milliseconds() - item.acceptedAt) * 1_000_000) }
                            await report(outcome)
                        }
                    }
                } catch {
                    logger.error("work socket failed", metadata: ["error": "\(error)"])
                }
            }
        } onGracefulShutdown: {
            work.stop()
        }
        await http.shutdown()
        _ = await results.finish()
        logger.info("submitter stopped")
    }

    /// Drives one submission to its outcome. Every decision is `Submission`'s.
    static func submit(_ submission: Submission, http: ProviderHTTPClient) async -> Outcome {
        var submission = submission
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
}

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
    /// Work held at once: claimed and leased, waiting for a slot or in flight.
    let backlog: Int
    let policy: SubmissionPolicy
    let logger: Logger
    package let metrics = StageMetrics()
    /// Submissions between their first send and their reported outcome.
    private let inFlight = Atomic<Int>(0)

    package init(
        config: PaypipeConfig, registry: ConnectorRegistry, concurrency: Int = 256, backlog: Int? = nil,
        policy: SubmissionPolicy = SubmissionPolicy(), logger: Logger
    ) {
        self.config = config
        self.registry = registry
        self.concurrency = max(1, concurrency)
        self.backlog = max(self.concurrency, backlog ?? 4 * self.concurrency)
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
        let ledger = try LedgerClient(context: context, endpoint: e.ledgerRPC, options: links.client(stageOptions()))
        let leases = LeaseKeeper(directory: ledger)
        let slots = WorkSlots(limit: backlog)
        let http = ProviderHTTPClient(
            connectTimeoutMilliseconds: config.timers.httpConnectTimeoutMs,
            requestTimeoutMilliseconds: config.timers.httpRequestTimeoutMs)
        logger.info("submitter ready", metadata: ["signedOut": "\(e.signedOut)", "concurrency": "\(concurrency)", "backlog": "\(backlog)"])

        let (policy, logger, metrics, registry, concurrency) = (self.policy, self.logger, self.metrics, self.registry, self.concurrency)
        let inFlightGauge = metrics.gauge("paypipe_submitter_in_flight", help: "Submissions in progress")
        let heldGauge = metrics.gauge("paypipe_submitter_leases_held", help: "Orders this submitter holds a lease on (waiting or in flight)")
        let retries = metrics.counter("paypipe_submitter_retries_total", help: "Requests sent again after a retryable failure")
        let latency = metrics.latency("paypipe_order_latency_seconds", help: "From ledger acceptance to the submitter's outcome")
        let leasesLost = metrics.counter(
            "paypipe_submitter_leases_lost_total", help: "Held leases the ledger refused to renew (the order ended or was redelivered)")
        @Sendable func dropped(_ reason: String) -> Counter {
            metrics.counter(
                "paypipe_submitter_work_dropped_total", [("reason", reason)],
                help: "Work never sent: its claim was refused (stale: an older dispatch, or the order ended) or not answered (unclaimed)")
        }
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
        /// Claims a batch of received work in one ledger request; what the ledger refuses is
        /// dropped unsent. Unreadable work ends with its outcome here.
        @Sendable func claimed(_ batch: [ZMQMessage]) async -> [SubmitWork] {
            var readable: [SubmitWork] = []
            for message in batch {
                do throws(EnvelopeError) {
                    readable.append(try SubmitWork.decode(message.body, catalog: registry.catalog))
                } catch {
                    logger.warning("unreadable work frame", metadata: ["bytes": "\(message.body.count)", "reason": "\(error)"])
                    if let outcome = Outcome.unreadableWork(message.body, reason: error.description) { await report(outcome) }
                }
            }
            var answers = await leases.claim(readable.compactMap(\.lease)).makeIterator()
            var kept: [SubmitWork] = []
            for item in readable {
                guard item.lease != nil else {
                    kept.append(item)
                    continue
                }
                switch answers.next() {
                case true??: kept.append(item)
                case false??: dropped("stale").increment()
                default: dropped("unclaimed").increment()
                }
            }
            heldGauge.set(Double(leases.count))
            return kept
        }

        let (claimedWork, claimedSink) = AsyncStream<SubmitWork>.makeStream()
        // Graceful shutdown stops taking work; submissions in flight finish and report.
        await withGracefulShutdownHandler {
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    defer { claimedSink.finish() }
                    do {
                        while let batch = try await work.nextBatch() {
                            for _ in batch { await slots.acquire() }
                            let kept = await claimed(batch)
                            for _ in kept.count..<batch.count { await slots.release() }
                            for item in kept { claimedSink.yield(item) }
                        }
                    } catch {
                        logger.error("work socket failed", metadata: ["error": "\(error)"])
                    }
                }
                let renewal = Task {
                    let interval = max(100, config.timers.leaseMs / 3)
                    for await _ in ticks(every: .milliseconds(interval)) {
                        if Task.isCancelled { break }
                        let lost = await leases.renew()
                        if lost > 0 { leasesLost.increment(by: Int64(lost)) }
                        heldGauge.set(Double(leases.count))
                    }
                }
                await withTaskGroup(of: Void.self) { submissions in
                    var running = 0
                    for await item in claimedWork {
                        if running >= concurrency {
                            await submissions.next()
                            running -= 1
                        }
                        running += 1
                        submissions.addTask {
                            inFlightGauge.set(Double(self.inFlight.add(1, ordering: .relaxed).newValue))
                            defer { inFlightGauge.set(Double(self.inFlight.subtract(1, ordering: .relaxed).newValue)) }
                            await report(await SubmitterService.outcome(for: item, registry: registry, policy: policy, http: http, retries: retries, latency: latency))
                            if let lease = item.lease { leases.release(lease) }
                            await slots.release()
                        }
                    }
                }
                renewal.cancel()
            }
        } onGracefulShutdown: {
            work.stop()
        }
        await http.shutdown()
        _ = await results.finish()
        await ledger.close()
        logger.info("submitter stopped")
    }

    /// The outcome of one piece of claimed work.
    static func outcome(
        for item: SubmitWork, registry: ConnectorRegistry, policy: SubmissionPolicy, http: ProviderHTTPClient, retries: Counter,
        latency: DurationHistogram
    ) async -> Outcome {
        guard let connector = registry.connector(for: item.order.provider) else {
            return Outcome(
                order: item.order, status: .rejected,
                error: .init(code: Rejection.Code.unknownProvider.rawValue, message: "this submitter has no connector for \(item.order.provider.rawValue)"),
                attempts: 0)
        }
        let outcome = await submit(Submission(work: item, connector: connector, policy: policy), http: http)
        if outcome.attempts > 1 { retries.increment(by: Int64(outcome.attempts - 1)) }
        if item.acceptedAt > 0 { latency.recordNanoseconds(max(0, milliseconds() - item.acceptedAt) * 1_000_000) }
        return outcome
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

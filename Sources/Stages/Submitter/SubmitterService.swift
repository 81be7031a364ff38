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
        @Sendable func count(_ outcome: Outcome) {
            metrics.counter("paypipe_submitter_outcomes_total", [("status", outcome.status.rawValue)], help: "Outcomes from the submitter, by status")
                .increment()
        }
        @Sendable func lost(_ outcome: Outcome, _ error: ZMQError) {
            // The ledger redelivers an order whose outcome never arrived.
            logger.error("could not hand an outcome to the ledger", metadata: ["order": "\(outcome.merchant)/\(outcome.orderId)", "error": "\(error)"])
        }
        @Sendable func report(_ outcome: Outcome) async {
            count(outcome)
            do {
                try await results.send(outcome.bytes)
            } catch {
                lost(outcome, error)
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

        /// After the outcome is queued: the work's lease and slot are let go.
        @Sendable func settle(_ done: SubmissionRunner.Finished) {
            if done.outcome.attempts > 1 { retries.increment(by: Int64(done.outcome.attempts - 1)) }
            if done.work.acceptedAt > 0 { latency.recordNanoseconds(max(0, milliseconds() - done.work.acceptedAt) * 1_000_000) }
            if let lease = done.work.lease { leases.release(lease) }
            slots.release()
        }
        // An outcome is handed to the results socket's queue where its submission ended; only
        // when that queue is full does it wait, in the loop over `runner.finished` below.
        let runner = SubmissionRunner(
            concurrency: concurrency, registry: registry, policy: policy, http: http, runningChanged: { inFlightGauge.set(Double($0)) }
        ) { done in
            do throws(ZMQError) {
                guard try results.trySend(ZMQMessage(done.outcome.bytes)) else { return false }
            } catch {
                lost(done.outcome, error)
            }
            count(done.outcome)
            settle(done)
            return true
        }
        // Graceful shutdown stops taking work; submissions in flight finish and report.
        await withGracefulShutdownHandler {
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    defer { runner.close() }
                    do {
                        while let batch = try await work.nextBatch() {
                            for _ in batch { await slots.acquire() }
                            let kept = await claimed(batch)
                            for _ in kept.count..<batch.count { slots.release() }
                            runner.start(kept)
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
                for await done in runner.finished {
                    await report(done.outcome)
                    settle(done)
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
}

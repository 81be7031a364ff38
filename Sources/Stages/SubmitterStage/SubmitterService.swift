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
        var peers = ConnectedPeers()
        let workSocket = try context.socket(.pull, options: links.client(workQueueOptions()))
        try peers.connect(workSocket, e.signedOut)
        let resultsSocket = try context.socket(.push, options: links.client(stageOptions()))
        try peers.connect(resultsSocket, e.results)
        let rpcSocket = try context.socket(.dealer, options: links.client(stageOptions()))
        try peers.connect(rpcSocket, e.ledgerRPC)
        let connected = peers
        let http = ProviderHTTPClient(
            connectTimeoutMilliseconds: config.timers.httpConnectTimeoutMs,
            requestTimeoutMilliseconds: config.timers.httpRequestTimeoutMs)
        let finished = FinishedWork(wakeup: try PollWakeup())
        let inFlightGauge = metrics.gauge("paypipe_submitter_in_flight", help: "Submissions in progress")
        let window = LeaseWindow(requestTimeoutMilliseconds: config.timers.httpRequestTimeoutMs)
        let runner = SubmissionRunner(
            concurrency: concurrency, registry: registry, policy: policy, http: http, leases: window,
            requests: ProviderRequestMetrics(metrics: metrics), runningChanged: { inFlightGauge.set(Double($0)) }
        ) { done in
            finished.append(done)
        }
        logger.info("submitter ready", metadata: ["signedOut": "\(e.signedOut)", "concurrency": "\(concurrency)", "backlog": "\(backlog)"])
        let stopping = StopFlag()
        // Graceful shutdown stops taking work; submissions in flight finish and report.
        try await runStageLoop(name: "submitter-loop", stopping: stopping) {
            defer { [workSocket, resultsSocket, rpcSocket].forEach { $0.close() } }
            try self.serve(
                work: workSocket, results: resultsSocket, rpc: rpcSocket, peers: connected, runner: runner, window: window, finished: finished,
                stopping: stopping)
        }
        await http.shutdown()
        logger.info("submitter stopped")
    }

    /// Frames read from the work queue in one pass.
    static let batchSize = 64

    /// The longest a stopping submitter waits for the work it holds (docs/deploy.md: every
    /// grace period is longer).
    package static let drainLimitMilliseconds: Int64 = 25_000

    /// The submitter's one thread: it polls the work queue, the ledger RPC and the wake-up of
    /// finished submissions. It claims what it reads, starts what the ledger granted on the
    /// HTTP client's event loops, and sends each outcome itself. Holding `backlog` pieces of
    /// work (claimed or waiting for a claim, waiting for a slot or in flight), it stops reading.
    private func serve(
        work: ZMQSocket, results resultsSocket: ZMQSocket, rpc rpcSocket: ZMQSocket, peers: ConnectedPeers, runner: SubmissionRunner,
        window: LeaseWindow, finished: FinishedWork, stopping: StopFlag
    ) throws {
        let (logger, metrics, catalog) = (self.logger, self.metrics, registry.catalog)
        let heldGauge = metrics.gauge("paypipe_submitter_leases_held", help: "Orders this submitter holds a lease on (waiting or in flight)")
        let retries = metrics.counter("paypipe_submitter_retries_total", help: "Requests sent again after a retryable failure")
        let latency = metrics.latency("paypipe_order_latency_seconds", help: "From ledger acceptance to the submitter's outcome")
        let leasesLost = metrics.counter(
            "paypipe_submitter_leases_lost_total",
            help: "Held leases the ledger refused to renew (the order ended, was redelivered, or was held past timers.leaseMaxMs)")
        func dropped(_ reason: String) -> Counter {
            metrics.counter(
                "paypipe_submitter_work_dropped_total", [("reason", reason)],
                help:
                    "Work not sent or stopped: its claim was refused (stale: an older dispatch, or the order ended), not answered (unclaimed), or its lease was lost while it ran (lease_lost)"
            )
        }
        let (stale, unclaimed, leaseLost) = (dropped("stale"), dropped("unclaimed"), dropped("lease_lost"))
        // Looked up once per status: a lookup by labels hashes them under the registry's lock.
        var outcomeCounters: [OutcomeLabels: Counter] = [:]
        func count(_ outcome: Outcome) {
            let key = OutcomeLabels(outcome)
            if let counter = outcomeCounters[key] { return counter.increment() }
            let counter = metrics.counter(
                "paypipe_submitter_outcomes_total", key.pairs, help: "Outcomes from the submitter, by status, provider and operation")
            outcomeCounters[key] = counter
            counter.increment()
        }

        var leases = LeaseBook(leaseMilliseconds: config.timers.leaseMs, now: steadyMilliseconds(), window: window)
        var results = ZMQOutbox(socket: resultsSocket), rpc = ZMQOutbox(socket: rpcSocket)
        /// Work read and not yet ended: waiting for its claim, for a slot, or in flight.
        var inHand = 0
        func report(_ result: StageResult) throws(ZMQError) {
            count(result.outcome)
            // The ledger redelivers an order whose outcome never arrived.
            try results.send(ZMQMessage(result.frame))
        }
        var busy = false
        var readiness = Readiness(metrics: metrics)
        var stopDeadline: Int64?
        while !(stopping.isStopped && inHand == 0) {
            if stopping.isStopped {
                // A bounded drain, so that a supervisor's grace period always covers it: what is
                // left is the ledger's to redeliver, resolved with its provider first, as after
                // a kill.
                let now = steadyMilliseconds()
                if let stopDeadline, now >= stopDeadline {
                    logger.warning("stopping with work in hand, for the ledger to redeliver", metadata: ["inHand": "\(inHand)"])
                    break
                }
                if stopDeadline == nil { stopDeadline = now + Self.drainLimitMilliseconds }
            }
            peers.refresh()
            readiness.update(rpcSocket.canSend || rpc.count > 0 ? nil : "no ledger reachable at endpoints.ledgerRPC")
            let room = stopping.isStopped ? 0 : backlog - inHand
            let now = steadyMilliseconds()
            let (ready, woken) = try ZMQPoll.wait(
                [(work, room > 0 ? .readable : []), (rpcSocket, rpc.pollEvents.union(.readable)), (resultsSocket, results.pollEvents)],
                wakeup: finished.wakeup, timeoutMilliseconds: Int(max(0, min(leases.nextDeadline - now, 50))), busy: busy)
            busy = false
            if ready[0].contains(.readable) {
                var readable: [SubmitWork] = []
                while readable.count < min(room, Self.batchSize), let message = try work.receive(dontWait: true) {
                    do throws(EnvelopeError) {
                        readable.append(try SubmitWork.decode(message.body, catalog: catalog))
                    } catch {
                        logger.warning("unreadable work frame", metadata: ["bytes": "\(message.body.count)", "reason": "\(error)"])
                        if let result = StageResult.unreadableWork(message.body, reason: error.description) { try report(result) }
                    }
                }
                inHand += readable.count
                busy = busy || !readable.isEmpty
                let (unleased, requests) = leases.claim(readable, now: steadyMilliseconds())
                for request in requests { try rpc.send(ZMQMessage(frames: request.frames)) }
                runner.start(unleased)
            }
            if ready[1].contains(.readable) {
                var granted: [SubmitWork] = []
                while let reply = try rpcSocket.receive(dontWait: true) {
                    busy = true
                    let (decided, lost) = leases.reply(reply.frames)
                    // The work on a lost lease sends nothing more (`LeaseWindow`) and ends unanswered.
                    if !lost.isEmpty { leasesLost.increment(by: Int64(lost.count)) }
                    for (item, verdict) in decided {
                        switch verdict {
                        case .granted: granted.append(item)
                        case .stale:
                            stale.increment()
                            inHand -= 1
                        case .unclaimed:
                            unclaimed.increment()
                            inHand -= 1
                        }
                    }
                }
                runner.start(granted)
            }
            if woken {
                let finishedNow = finished.take(), reportedAt = milliseconds()
                busy = busy || !finishedNow.isEmpty
                for done in finishedNow {
                    if let lease = done.work.lease { leases.release(lease) }
                    inHand -= 1
                    guard let outcome = done.outcome else {
                        leaseLost.increment()
                        continue
                    }
                    try report(StageResult(answering: .init(done.work.purpose), ticket: done.work.ticket, outcome: outcome, trace: done.trace))
                    if outcome.attempts > 1 { retries.increment(by: Int64(outcome.attempts - 1)) }
                    if done.work.acceptedAt > 0 { latency.recordNanoseconds(max(0, reportedAt - done.work.acceptedAt) * 1_000_000) }
                }
            }
            let due = leases.tick(now: steadyMilliseconds())
            for request in due.send { try rpc.send(ZMQMessage(frames: request.frames)) }
            unclaimed.increment(by: Int64(due.unclaimed.count))
            inHand -= due.unclaimed.count
            try results.flush()
            try rpc.flush()
            heldGauge.set(Double(leases.held.count))
        }
        try drainOnStop([results, rpc], logger: logger)
    }
}

/// Submissions that finished on the event loops, waiting for the submitter's thread to send
/// their outcomes: the first one in wakes it.
final class FinishedWork: Sendable {
    let wakeup: PollWakeup
    private let queue = Mutex<[SubmissionRunner.Finished]>([])

    init(wakeup: PollWakeup) { self.wakeup = wakeup }

    func append(_ done: SubmissionRunner.Finished) {
        let first = queue.withLock { queue in
            queue.append(done)
            return queue.count == 1
        }
        if first { wakeup.signal() }
    }

    func take() -> [SubmissionRunner.Finished] {
        queue.withLock { queue in
            defer { queue.removeAll(keepingCapacity: true) }
            return queue
        }
    }
}

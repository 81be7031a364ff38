import HTTPTransport
import Logging
import NIOCore
import PaypipeCore
import ServiceLifecycle
import StageRuntime
import StageWire
import Synchronization
import ZeroMQ

/// `paypipe-cleeng-poller`: takes the pending orders of polled providers (Cleeng's accepted
/// receipts) from the ledger's poll queue and asks the provider on each one's schedule (its
/// connector's `PendingPolling`), all on one scheduler with a bounded number of requests in
/// flight. It holds no secrets: a poll is authorised by what the order carries.
package final class PollerService: MeasuredStage {
    let config: PaypipeConfig
    let registry: ConnectorRegistry
    let catalog: OrderCatalog
    let concurrency: Int
    let logger: Logger
    package let metrics = StageMetrics()
    /// Set once the receive loop has ended, so the resume and timer loops end too.
    private let stopped = Atomic<Bool>(false)
    /// Every poll sent updates it, from whichever thread sends it; it needs no ordering.
    private let worstDriftMs = Atomic<Int64>(0)

    package init(config: PaypipeConfig, registry: ConnectorRegistry, concurrency: Int = 256, logger: Logger) {
        self.config = config
        self.registry = registry
        catalog = registry.catalog
        self.concurrency = max(1, concurrency)
        self.logger = logger
    }

    package func run() async throws {
        let links = try StageLinks(config: config, role: .poller)
        let context = try ZMQContext()
        let e = config.endpoints
        let pull = try context.socket(.pull, options: links.client(stageOptions(highWaterMark: 10_000)))
        var receiving = ZMQReceiver.Configuration()
        receiving.peers = ZMQPeers(e.pollQueue)
        try pull.connect(receiving.peers!)
        let resultsSocket = try context.socket(.push, options: links.client(stageOptions()))
        var sending = ZMQSender.Configuration()
        sending.peers = ZMQPeers(e.results)
        try resultsSocket.connect(sending.peers!)
        let receipts = try ZMQReceiver(socket: pull, configuration: receiving)
        let results = try ZMQSender(socket: resultsSocket, configuration: sending)
        let ledger = try LedgerClient(context: context, endpoint: e.ledgerRPC, options: links.client(stageOptions()))
        metrics.checkReadiness { ledger.reachesLedger ? nil : "no ledger reachable at endpoints.ledgerRPC" }
        let core = PollerCore(registry: registry, timers: config.timers)
        // An answer must come back before the next slot: no order has two polls out.
        let requestTimeoutMs = min(config.timers.httpRequestTimeoutMs, core.shortestIntervalMs ?? config.timers.httpRequestTimeoutMs)
        let http = ProviderHTTPClient(
            connectTimeoutMilliseconds: config.timers.httpConnectTimeoutMs, requestTimeoutMilliseconds: requestTimeoutMs)
        let (logger, metrics, catalog) = (self.logger, self.metrics, self.catalog)
        let held = metrics.gauge("paypipe_cleeng_receipts_polling", help: "Accepted receipts this poller is polling")
        let pollsSent = metrics.counter("paypipe_cleeng_polls_total", help: "getAccessStatus calls sent")
        let maxDrift = metrics.gauge("paypipe_cleeng_poll_drift_max_seconds", help: "Largest lateness of a poll against its schedule")
        let drift = metrics.latency("paypipe_cleeng_poll_drift_seconds", help: "Lateness of each poll against its schedule")
        let entitlementChecks = metrics.counter(
            "paypipe_entitlement_checks_total", help: "Subscriptions whose entitlement this poller checked (Cleeng access after the first grant)")
        let (outcomes, emit) = AsyncStream.makeStream(of: StageResult.self)
        let polls = PollDriver(
            core: core, http: http, limit: concurrency,
            emit: { emit.yield($0) },
            sent: { [self] lateness in
                drift.recordNanoseconds(lateness * 1_000_000)
                worstDriftMs.max(lateness, ordering: .relaxed)
                pollsSent.increment()
            })
        StageProcess.keepThreadsAtStartingNice()
        logger.info("poller ready", metadata: ["pollQueue": "\(e.pollQueue)", "providers": "\(core.providers.map(\.rawValue).sorted())"])

        // Graceful shutdown stops taking receipts. Receipts held are not ended: they stay pending
        // in the ledger, and the next poller to start asks for them and continues on their
        // original deadlines.
        await withGracefulShutdownHandler {
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    // Receipts the ledger already holds as pending (this poller may be a restart).
                    for attempt in 0..<60 where !self.stopped.load(ordering: .relaxed) {
                        if case .resumed(let count)? = try? await ledger.call(.resumePolls) {
                            logger.info("asked the ledger for pending receipts", metadata: ["count": "\(count)"])
                            break
                        }
                        try? await Task.sleep(for: .milliseconds(min(5000, 250 << min(attempt, 4))))
                    }
                }
                group.addTask {
                    for await result in outcomes {
                        let outcome = result.outcome
                        metrics.counter("paypipe_cleeng_outcomes_total", [("status", outcome.status.rawValue)], help: "Receipts ended, by status")
                            .increment()
                        do {
                            try await results.send(result.frame)
                        } catch {
                            // The ledger hands a receipt whose outcome never arrived to the pollers again.
                            logger.error("could not hand an outcome to the ledger", metadata: ["order": "\(outcome.merchant)/\(outcome.orderId)"])
                        }
                    }
                }
                group.addTask {
                    while let batch = try? await receipts.nextBatch() {
                        for message in batch {
                            do throws(EnvelopeError) {
                                let dispatch = try DispatchFrame.decode(message.body, catalog: catalog)
                                polls.add(
                                    dispatch.order, pendingSince: dispatch.acceptedAt,
                                    ticket: DispatchTicket(generation: dispatch.generation, token: dispatch.token), trace: dispatch.trace)
                            } catch {
                                logger.warning("unreadable poll frame", metadata: ["bytes": "\(message.body.count)", "reason": "\(error)"])
                                if var result = StageResult.unreadableWork(message.body, reason: error.description) {
                                    result.answering = .poll
                                    emit.yield(result)
                                }
                            }
                        }
                    }
                }
                let checks = EntitlementChecks(registry: self.registry)
                if checks.isNeeded {
                    group.addTask {
                        // Subscriptions' entitlement checks: due ones are asked for every second.
                        for await _ in ticks(every: .seconds(1)) {
                            if self.stopped.load(ordering: .relaxed) { break }
                            let checked = await checks.pass(ledger: ledger, http: http, logger: logger)
                            if checked > 0 { entitlementChecks.increment(by: Int64(checked)) }
                        }
                    }
                }
                group.addTask {
                    // One timer for every receipt: wake often enough that no poll is late by more than a tick.
                    for await _ in ticks(every: .milliseconds(10)) {
                        if self.stopped.load(ordering: .relaxed) { break }
                        polls.due()
                        held.set(Double(polls.count))
                        maxDrift.set(Double(self.worstDriftMs.load(ordering: .relaxed)) / 1000)
                    }
                }
                // The resume request and the receive loop; the outcome sender and the timer end only
                // after `stopped`.
                await group.next()
                await group.next()
                self.stopped.store(true, ordering: .relaxed)
                // Answers still on their way are recorded; the polls they would start are not sent.
                await polls.stop(waitingAtMost: .milliseconds(requestTimeoutMs + 1000))
                emit.finish()
                await group.waitForAll()
            }
        } onGracefulShutdown: {
            receipts.stop()
        }
        let (remaining, worstDrift) = (polls.count, self.worstDriftMs.load(ordering: .relaxed))
        logger.info("poller stopping", metadata: ["receipts": "\(remaining)", "max_drift_ms": "\(worstDrift)"])
        await http.shutdown()
        await ledger.close()
        _ = await results.finish()
        context.terminate()
    }
}

/// The pending orders' scheduler and the polls in flight. Answers are handled on the event loop they
/// arrive on, and the polls they lead to are sent from there: a Swift task per poll, and the
/// hops into and out of it, would cost a thread wake-up per poll.
final class PollDriver: Sendable {
    struct Poll: Sendable {
        var id: ReceiptID
        var requestId: Int
        var request: HTTPRequestSpec
        var slot: Int64
    }

    private struct State {
        var core: PollerCore
        var inFlight = 0
        /// Polls over the limit, oldest first.
        var waiting = CircularBuffer<Poll>()
        var stopped = false
    }

    private let state: Mutex<State>
    private let http: ProviderHTTPClient
    private let limit: Int
    private let emit: @Sendable (StageResult) -> Void
    /// Called as each poll is sent, with how late it is against its schedule (ms).
    private let sent: @Sendable (Int64) -> Void

    init(
        core: PollerCore, http: ProviderHTTPClient, limit: Int,
        emit: @escaping @Sendable (StageResult) -> Void, sent: @escaping @Sendable (Int64) -> Void
    ) {
        state = Mutex(State(core: core))
        self.http = http
        self.limit = max(1, limit)
        self.emit = emit
        self.sent = sent
    }

    var count: Int { state.withLock { $0.core.count } }

    func add(_ order: Order, pendingSince: Int64, ticket: DispatchTicket, trace: String? = nil) {
        perform { $0.add(order, pendingSince: pendingSince, ticket: ticket, trace: trace, now: milliseconds()) }
    }

    func due() {
        perform { $0.due(now: milliseconds()) }
    }

    /// Sends no more polls, and waits (up to `limit`) for the answers to those in flight.
    func stop(waitingAtMost limit: Duration) async {
        state.withLock { $0.stopped = true }
        let giveUp = ContinuousClock.now + limit
        while state.withLock({ $0.inFlight > 0 }), ContinuousClock.now < giveUp {
            try? await Task.sleep(for: .milliseconds(10))
        }
    }

    private func send(_ poll: Poll) {
        sent(max(0, milliseconds() - poll.slot))
        http.execute(poll.request) { result in
            self.perform(answered: true) { $0.receive(poll.id, requestId: poll.requestId, answer: result, now: milliseconds()) }
        }
    }

    /// Runs one step of the core, then sends the polls it asks for (as many as the limit lets
    /// through; the rest wait for answers) and emits its outcomes, outside the lock.
    private func perform(answered: Bool = false, _ step: (inout PollerCore) -> [PollerCore.Action]) {
        let (polls, outcomes) = state.withLock { state -> ([Poll], [StageResult]) in
            if answered { state.inFlight -= 1 }
            var outcomes: [StageResult] = []
            for action in step(&state.core) {
                switch action {
                case .poll(let id, let requestId, let request, let slot):
                    state.waiting.append(Poll(id: id, requestId: requestId, request: request, slot: slot))
                case .emit(let outcome): outcomes.append(outcome)
                }
            }
            var polls: [Poll] = []
            while !state.stopped, state.inFlight < limit, let poll = state.waiting.popFirst() {
                polls.append(poll)
                state.inFlight += 1
            }
            return (polls, outcomes)
        }
        for outcome in outcomes { emit(outcome) }
        for poll in polls { send(poll) }
    }
}

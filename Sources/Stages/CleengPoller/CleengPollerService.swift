import Cleeng
import HTTPTransport
import Logging
import PaypipeCore
import ServiceLifecycle
import StageRuntime
import StageWire
import Synchronization
import ZeroMQ

/// `paypipe-cleeng-poller`: takes accepted Cleeng receipts from the ledger's poll queue and asks
/// getAccessStatus on each one's schedule (every `timers.cleengPollIntervalMs`, giving up after
/// `timers.cleengGiveUpMs`), all on one scheduler with a bounded number of requests in flight.
/// It holds no secrets: getAccessStatus is authorised by the customer token in the order.
package final class CleengPollerService: MeasuredStage {
    let config: PaypipeConfig
    let catalog: OrderCatalog
    let concurrency: Int
    let logger: Logger
    package let metrics = StageMetrics()
    /// Set once the receive loop has ended, so the resume and timer loops end too.
    private let stopped = Atomic<Bool>(false)
    /// Kept outside the scheduler actor: every poll updates it, and it needs no ordering.
    private let worstDriftMs = Atomic<Int64>(0)

    /// The scheduler's state, shared by the receive loop, the timer loop and the workers.
    actor Scheduler {
        var core: CleengPollerCore
        init(core: CleengPollerCore) { self.core = core }
        func add(_ order: Order, acceptedAt: Int64) -> [CleengPollerCore.Action] { core.add(order, acceptedAt: acceptedAt, now: milliseconds()) }
        func due() -> [CleengPollerCore.Action] { core.due(now: milliseconds()) }
        func receive(_ id: ReceiptID, requestId: Int, status: CleengAccessStatus) -> [CleengPollerCore.Action] {
            core.receive(id, requestId: requestId, status: status, now: milliseconds())
        }
        var count: Int { core.count }
    }

    package init(config: PaypipeConfig, registry: ConnectorRegistry, concurrency: Int = 256, logger: Logger) {
        self.config = config
        catalog = registry.catalog
        self.concurrency = max(1, concurrency)
        self.logger = logger
    }

    package func run() async throws {
        let links = try StageLinks(config: config, role: .poller)
        let context = try ZMQContext()
        let e = config.endpoints
        let pull = try context.socket(.pull, options: links.client(stageOptions(highWaterMark: 10_000)))
        try pull.connect(e.pollQueue)
        let resultsSocket = try context.socket(.push, options: links.client(stageOptions()))
        try resultsSocket.connect(e.results)
        let receipts = try ZMQReceiver(socket: pull)
        let results = try ZMQSender(socket: resultsSocket)
        let ledger = try LedgerClient(context: context, endpoint: e.ledgerRPC, options: links.client(stageOptions()))
        let http = ProviderHTTPClient(
            connectTimeoutMilliseconds: config.timers.httpConnectTimeoutMs,
            requestTimeoutMilliseconds: min(config.timers.httpRequestTimeoutMs, config.timers.cleengPollIntervalMs))
        let scheduler = Scheduler(core: CleengPollerCore(policy: CleengPollingPolicy(timers: config.timers), config: config))
        let (logger, metrics, catalog) = (self.logger, self.metrics, self.catalog)
        let held = metrics.gauge("paypipe_cleeng_receipts_polling", help: "Accepted receipts this poller is polling")
        let pollsSent = metrics.counter("paypipe_cleeng_polls_total", help: "getAccessStatus calls sent")
        let maxDrift = metrics.gauge("paypipe_cleeng_poll_drift_max_ms", help: "Largest lateness of a poll against its schedule, in ms")
        let drift = metrics.latency("paypipe_cleeng_poll_drift_seconds", help: "Lateness of each poll against its schedule")
        logger.info("cleeng poller ready", metadata: ["pollQueue": "\(e.pollQueue)", "interval_ms": "\(config.timers.cleengPollIntervalMs)"])

        /// A struct, not a tuple: a generic over a tuple looks its type up at run time, per poll.
        struct Poll: Sendable {
            var id: ReceiptID
            var requestId: Int
            var request: HTTPRequestSpec
            var slot: Int64
        }
        let (polls, pollQueue) = AsyncStream.makeStream(of: Poll.self)
        @Sendable func perform(_ actions: [CleengPollerCore.Action]) async {
            for action in actions {
                switch action {
                case .poll(let id, let requestId, let request, let slot): pollQueue.yield(Poll(id: id, requestId: requestId, request: request, slot: slot))
                case .emit(let outcome):
                    metrics.counter("paypipe_cleeng_outcomes_total", [("status", outcome.status.rawValue)], help: "Receipts ended, by status").increment()
                    do {
                        try await results.send(outcome.bytes)
                    } catch {
                        // The ledger hands a receipt whose outcome never arrived to the pollers again.
                        logger.error("could not hand an outcome to the ledger", metadata: ["order": "\(outcome.merchant)/\(outcome.orderId)"])
                    }
                }
            }
        }

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
                while let batch = try? await receipts.nextBatch() {
                    for message in batch {
                        let dispatch: DispatchFrame
                        do throws(EnvelopeError) {
                            dispatch = try DispatchFrame.decode(message.body, catalog: catalog)
                        } catch {
                            logger.warning("unreadable poll frame", metadata: ["bytes": "\(message.body.count)", "reason": "\(error)"])
                            if let outcome = Outcome.unreadableWork(message.body, reason: error.description) {
                                await perform([.emit(outcome)])
                            }
                            continue
                        }
                        await perform(await scheduler.add(dispatch.order, acceptedAt: dispatch.acceptedAt))
                    }
                }
                pollQueue.finish()
            }
            group.addTask {
                // One timer for every receipt: wake often enough that no poll is late by more than a tick.
                for await _ in ticks(every: .milliseconds(10)) {
                    if self.stopped.load(ordering: .relaxed) { break }
                    await perform(await scheduler.due())
                    held.set(Double(await scheduler.count))
                    maxDrift.set(Double(self.worstDriftMs.load(ordering: .relaxed)))
                }
            }
            let limit = concurrency
            group.addTask {
                await withTaskGroup(of: Void.self) { pool in
                    var inFlight = 0
                    for await poll in polls {
                        if inFlight >= limit {
                            await pool.next()
                            inFlight -= 1
                        }
                        inFlight += 1
                        pool.addTask {
                            let lateness = max(0, milliseconds() - poll.slot)
                            drift.recordNanoseconds(lateness * 1_000_000)
                            self.worstDriftMs.max(lateness, ordering: .relaxed)
                            pollsSent.increment()
                            let status: CleengAccessStatus =
                                switch await http.execute(poll.request) {
                                case .success(let response): CleengAccessStatusCall.classify(response, expectedId: poll.requestId)
                                case .failure(let failure): CleengAccessStatusCall.classifyTransportFailure(reason: "\(failure)")
                                }
                            await perform(await scheduler.receive(poll.id, requestId: poll.requestId, status: status))
                        }
                    }
                }
            }
            await group.next()  // the resume request
            await group.next()  // the receive loop: stopped
            self.stopped.store(true, ordering: .relaxed)
            await group.waitForAll()
        }
        } onGracefulShutdown: {
            receipts.stop()
        }
        let (remaining, worstDrift) = (await scheduler.count, worstDriftMs.load(ordering: .relaxed))
        logger.info("cleeng poller stopping", metadata: ["receipts": "\(remaining)", "max_drift_ms": "\(worstDrift)"])
        await http.shutdown()
        await ledger.close()
        _ = await results.finish()
        context.terminate()
    }
}

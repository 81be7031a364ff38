import Logging
import PaypipeCore
import Prometheus
import ServiceLifecycle
import StageRuntime
import StageWire
import ZeroMQ

/// `paypipe-signer`: takes orders from the ledger, signs them through their connectors, and
/// passes signed requests to the submitters (or outcomes straight back to the ledger).
package final class SignerService: MeasuredStage {
    let config: PaypipeConfig
    let registry: ConnectorRegistry
    let logger: Logger
    package let metrics = StageMetrics()

    package init(config: PaypipeConfig, registry: ConnectorRegistry, logger: Logger) {
        self.config = config
        self.registry = registry
        self.logger = logger
    }

    package func run() async throws {
        let core = SignerCore(registry: registry)
        let links = try StageLinks(config: config, role: .signer)
        let context = try ZMQContext()
        defer { context.terminate() }
        let e = config.endpoints
        var peers = ConnectedPeers()
        let pull = try context.socket(.pull, options: links.client(workQueueOptions()))
        try peers.connect(pull, e.signQueue)
        let signedSocket = try context.socket(.push, options: links.client(stageOptions(highWaterMark: 256)))
        try peers.connect(signedSocket, e.signedIn)
        let resultsSocket = try context.socket(.push, options: links.client(stageOptions()))
        try peers.connect(resultsSocket, e.results)
        let connected = peers
        logger.info("signer ready", metadata: ["signQueue": "\(e.signQueue)"])
        let stopping = StopFlag()
        // Graceful shutdown stops taking orders; what was taken is signed and handed on.
        try await runStageLoop(name: "signer-loop", stopping: stopping) {
            defer { [pull, signedSocket, resultsSocket].forEach { $0.close() } }
            try self.serve(orders: pull, signed: signedSocket, results: resultsSocket, peers: connected, core: core, stopping: stopping)
        }
        logger.info("signer stopped")
    }

    /// Orders each copy holds beyond those in its socket's queue: signed requests are the
    /// bulkiest frames in the pipeline, and the submitters already hold their backlog, so while
    /// this many wait for the streamer the signer stops taking orders, which wait in the ledger.
    /// (Many more would hold memory and leave all of them to redelivery if the signer died; too
    /// few would cost throughput.)
    static let backlogLimit = 1024
    /// Orders signed per pass before the outboxes are flushed.
    static let batchSize = 64

    /// The signer's one thread: polls the work queue, signs, and sends each signed request or
    /// outcome itself, with no hand-off between threads.
    private func serve(
        orders: ZMQSocket, signed signedSocket: ZMQSocket, results resultsSocket: ZMQSocket, peers: ConnectedPeers, core: SignerCore,
        stopping: StopFlag
    ) throws {
        let counted = { (result: String) in
            self.metrics.counter("paypipe_signer_orders_total", [("result", result)], help: "Orders handled by the signer, by result")
        }
        let (signedCount, directCount, rejectedCount) = (counted("signed"), counted("outcome"), counted("rejected"))
        let uncheckedCount = counted("no_status_call")
        let catalog = registry.catalog
        var signed = ZMQOutbox(socket: signedSocket), results = ZMQOutbox(socket: resultsSocket)
        var busy = false
        var readiness = Readiness(metrics: metrics)
        while !stopping.isStopped {
            peers.refresh()
            if !(resultsSocket.canSend || results.count > 0) {
                readiness.update("no ledger reachable at endpoints.results")
            } else if !(signedSocket.canSend || signed.count > 0) {
                readiness.update("no streamer reachable at endpoints.signedIn")
            } else {
                readiness.update(nil)
            }
            let takesOrders = signed.count < Self.backlogLimit && results.count < Self.backlogLimit
            let ready = try ZMQPoll.wait(
                [(orders, takesOrders ? .readable : []), (signedSocket, signed.pollEvents), (resultsSocket, results.pollEvents)],
                timeoutMilliseconds: 50, busy: busy)
            var taken = 0
            defer { busy = taken > 0 }
            while ready[0].contains(.readable), taken < Self.batchSize, let message = try orders.receive(dontWait: true) {
                taken += 1
                let dispatch: DispatchFrame
                do throws(EnvelopeError) {
                    dispatch = try DispatchFrame.decode(message.body, catalog: catalog)
                } catch {
                    logger.warning("unreadable dispatch frame", metadata: ["bytes": "\(message.body.count)", "reason": "\(error)"])
                    if let result = StageResult.unreadableWork(message.body, reason: error.description) {
                        rejectedCount.increment()
                        try results.send(ZMQMessage(result.frame))
                    }
                    continue
                }
                let span = StageTracing.startSpan("paypipe.sign", continuing: dispatch.trace, kind: .consumer)
                defer { span?.end() }
                if let span { StageTracing.describe(span, order: dispatch.order.identity) }
                switch core.sign(dispatch, nowSeconds: milliseconds() / 1000) {
                case .submit(var work):
                    signedCount.increment()
                    work.trace = StageTracing.traceparent(of: span)
                    // The work's order is the dispatch's (`signWork`), so its bytes go on as they came.
                    try signed.send(ZMQMessage(work.frame(orderJSON: DispatchFrame.orderJSON(in: message.body))))
                case .outcome(let outcome):
                    (outcome.status == .rejected ? rejectedCount : directCount).increment()
                    span?.attributes["paypipe.status"] = outcome.status.rawValue
                    let ticket = DispatchTicket(generation: dispatch.generation, token: dispatch.token)
                    let result = StageResult(
                        answering: .init(dispatch.purpose), ticket: ticket, outcome: outcome, trace: StageTracing.traceparent(of: span))
                    try results.send(ZMQMessage(result.frame))
                case .nothing:
                    uncheckedCount.increment()
                }
            }
            try signed.flush()
            try results.flush()
        }
        try drainOnStop([signed, results], logger: logger)
    }
}

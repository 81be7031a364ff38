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
        let pull = try context.socket(.pull, options: links.client(workQueueOptions()))
        try pull.connect(e.signQueue)
        // Signed requests are the bulkiest frames in the pipeline, and the submitters already
        // hold their backlog. With the defaults (4,096 queued + 1,000 in the socket) a signer
        // held about 15 MiB more at W1's peak, and would leave all of them to redelivery if it
        // died. When this queue is full the signer stops taking orders, which wait in the
        // ledger. 256 + 256 cost W2 about 5 % of its throughput; 1,024 + 256 did not.
        let signedSocket = try context.socket(.push, options: links.client(stageOptions(highWaterMark: 256)))
        try signedSocket.connect(e.signedIn)
        let resultsSocket = try context.socket(.push, options: links.client(stageOptions()))
        try resultsSocket.connect(e.results)
        let orders = try workReceiver(pull, capacity: 64)
        var signedConfiguration = ZMQSender.Configuration()
        signedConfiguration.queueCapacity = 1024
        let signed = try ZMQSender(socket: signedSocket, configuration: signedConfiguration)
        let results = try ZMQSender(socket: resultsSocket)
        logger.info("signer ready", metadata: ["signQueue": "\(e.signQueue)"])
        let counted = { (result: String) in
            self.metrics.counter("paypipe_signer_orders_total", [("result", result)], help: "Orders handled by the signer, by result")
        }
        let (signedCount, directCount, rejectedCount) = (counted("signed"), counted("outcome"), counted("rejected"))
        let uncheckedCount = counted("no_status_call")
        let catalog = registry.catalog, logger = self.logger

        // Graceful shutdown stops taking orders; what was taken is signed and handed on.
        try await withGracefulShutdownHandler {
            for try await message in orders {
                let dispatch: DispatchFrame
                do throws(EnvelopeError) {
                    dispatch = try DispatchFrame.decode(message.body, catalog: catalog)
                } catch {
                    logger.warning("unreadable dispatch frame", metadata: ["bytes": "\(message.body.count)", "reason": "\(error)"])
                    if let outcome = Outcome.unreadableWork(message.body, reason: error.description) {
                        rejectedCount.increment()
                        try await results.send(outcome.bytes)
                    }
                    continue
                }
                switch core.sign(dispatch, nowSeconds: milliseconds() / 1000) {
                case .submit(let work):
                    signedCount.increment()
                    try await signed.send(work.frame)
                case .outcome(let outcome):
                    (outcome.status == .rejected ? rejectedCount : directCount).increment()
                    try await results.send(outcome.bytes)
                case .nothing:
                    uncheckedCount.increment()
                }
            }
        } onGracefulShutdown: {
            orders.stop()
        }
        _ = await signed.finish()
        _ = await results.finish()
        logger.info("signer stopped")
    }
}

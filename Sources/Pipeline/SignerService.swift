import Logging
import PaypipeCore
import Synchronization
import Prometheus
import ZeroMQ

/// `paypipe-signer`: takes orders from the ledger, signs them with the provider modules, and
/// passes signed requests to the submitters (or outcomes straight back to the ledger).
public final class SignerService: Sendable {
    let config: PaypipeConfig
    public let logger: Logger
    let metricsAddress: String
    public let metrics = StageMetrics()
    private let receiver = Mutex<ZMQReceiver?>(nil)
    private let stopFlag = StopFlag()

    public init(config: PaypipeConfig, metricsAddress: String = "127.0.0.1:0", logger: Logger) {
        self.config = config
        self.metricsAddress = metricsAddress
        self.logger = logger
    }

    public func run() async throws {
        let core = SignerCore(config: config)
        let context = try ZMQContext()
        let e = config.endpoints
        let pull = try context.socket(.pull, options: workQueueOptions())
        try pull.connect(e.signQueue)
        let signedSocket = try context.socket(.push, options: stageOptions())
        try signedSocket.connect(e.signedIn)
        let resultsSocket = try context.socket(.push, options: stageOptions())
        try resultsSocket.connect(e.results)
        let orders = try workReceiver(pull, capacity: 64)
        let signed = try ZMQSender(socket: signedSocket)
        let results = try ZMQSender(socket: resultsSocket)
        receiver.withLock { $0 = orders }
        if stopFlag.isStopped { orders.stop() }
        logger.info("signer ready", metadata: ["signQueue": "\(e.signQueue)"])
        let logger = self.logger
        let metrics = self.metrics
        let metricsTask = metrics.start(address: metricsAddress, role: "signer", logger: logger)
        let signedCount = metrics.counter("paypipe_signer_orders_total", [("result", "signed")], help: "Orders handled by the signer, by result")
        let directCount = metrics.counter("paypipe_signer_orders_total", [("result", "outcome")], help: "Orders handled by the signer, by result")
        let rejectedCount = metrics.counter("paypipe_signer_orders_total", [("result", "rejected")], help: "Orders handled by the signer, by result")

        for try await message in orders {
            guard let dispatch = LedgerCore.readDispatch(message.body) else {
                logger.warning("unreadable dispatch frame", metadata: ["bytes": "\(message.body.count)"])
                continue
            }
            let now = milliseconds()
            switch core.sign(dispatch.order, acceptedAt: dispatch.acceptedAt, nowSeconds: now / 1000, statusCheck: dispatch.statusCheck) {
            case .submit(let work):
                signedCount.increment()
                try await signed.send(work.frame)
            case .outcome(let outcome):
                (outcome.status == .rejected ? rejectedCount : directCount).increment()
                try await results.send(outcome.bytes)
            }
        }
        _ = await signed.finish()
        _ = await results.finish()
        await metrics.stop(metricsTask)
        context.terminate()
        logger.info("signer stopped")
    }

    public func stop() {
        stopFlag.stop()
        receiver.withLock { $0 }?.stop()
    }
}

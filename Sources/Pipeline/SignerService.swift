import Logging
import PaypipeCore
import Synchronization
import ZeroMQ

/// `paypipe-signer`: takes orders from the ledger, signs them with the provider modules, and
/// passes signed requests to the submitters (or outcomes straight back to the ledger).
public final class SignerService: Sendable {
    let config: PaypipeConfig
    let logger: Logger
    private let receiver = Mutex<ZMQReceiver?>(nil)
    private let stopFlag = StopFlag()

    public init(config: PaypipeConfig, logger: Logger) {
        self.config = config
        self.logger = logger
    }

    public func run() async throws {
        let core = SignerCore(config: config)
        let context = try ZMQContext()
        let e = config.endpoints
        let pull = try context.socket(.pull, options: stageOptions(highWaterMark: 100))
        try pull.connect(e.signQueue)
        let signedSocket = try context.socket(.push, options: stageOptions())
        try signedSocket.connect(e.signedIn)
        let resultsSocket = try context.socket(.push, options: stageOptions())
        try resultsSocket.connect(e.results)
        let orders = try ZMQReceiver(socket: pull)
        let signed = try ZMQSender(socket: signedSocket)
        let results = try ZMQSender(socket: resultsSocket)
        receiver.withLock { $0 = orders }
        if stopFlag.isStopped { orders.stop() }
        logger.info("signer ready", metadata: ["signQueue": "\(e.signQueue)"])

        for try await message in orders {
            guard let (order, acceptedAt) = LedgerCore.readDispatch(message.body) else {
                logger.warning("unreadable dispatch frame", metadata: ["bytes": "\(message.body.count)"])
                continue
            }
            let now = milliseconds()
            switch core.sign(order, acceptedAt: acceptedAt, nowSeconds: now / 1000) {
            case .submit(let work): try await signed.send(work.frame)
            case .outcome(let outcome): try await results.send(Array(outcome.serialized.utf8))
            }
        }
        _ = await signed.finish()
        _ = await results.finish()
        context.terminate()
        logger.info("signer stopped")
    }

    public func stop() {
        stopFlag.stop()
        receiver.withLock { $0 }?.stop()
    }
}

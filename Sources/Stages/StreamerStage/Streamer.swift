import Logging
import PaypipeCore
import ServiceLifecycle
import StageRuntime
import ZeroMQ

/// The hop between signers and submitters: signers push signed requests to its PULL, submitters
/// pull them from its PUSH, and copies on either side only connect to it. It holds no state, so
/// any number of copies can run, each a separate `paypipe-streamer` (or, for a single-host
/// pipeline, one inside the ledger). With `curve` it is a server with the ledger's key, which
/// signers and submitters already trust, and admits only the signer and submitter roles.
package final class Streamer: Sendable {
    private let proxy: ZMQProxy
    package let signedIn: String
    package let signedOut: String

    /// Binds `signedIn` and `signedOut` in `context` (whose ZAP handler, with `curve`, the caller
    /// runs) and starts forwarding.
    package init(context: ZMQContext, links: StageLinks, signedIn: String, signedOut: String) throws(ZMQError) {
        let inbound = try context.socket(.pull, options: links.server(stageOptions(highWaterMark: 256), .signedIn))
        let outbound = try context.socket(.push, options: links.server(workQueueOptions(), .signedOut))
        self.signedIn = try inbound.bind(signedIn)
        self.signedOut = try outbound.bind(signedOut)
        proxy = try ZMQProxy(context: context, frontend: inbound, backend: outbound)
    }

    package func stop() { proxy.stop() }
}

/// `paypipe-streamer`: one `Streamer` on the config's `signedIn` and `signedOut` addresses.
package final class StreamerService: MeasuredStage {
    let config: PaypipeConfig
    let logger: Logger
    let onReady: @Sendable (_ signedIn: String, _ signedOut: String) -> Void
    package let metrics = StageMetrics()

    package init(config: PaypipeConfig, logger: Logger, onReady: @escaping @Sendable (String, String) -> Void = { _, _ in }) {
        self.config = config
        self.logger = logger
        self.onReady = onReady
    }

    package func run() async throws {
        let links = try StageLinks(config: config, role: .ledger)
        let context = try ZMQContext()
        let authenticator = try links.authenticator(context: context)
        let streamer = try Streamer(context: context, links: links, signedIn: config.endpoints.signedIn, signedOut: config.endpoints.signedOut)
        defer {
            streamer.stop()
            authenticator?.stop()
            context.terminate()
        }
        logger.info("streamer ready", metadata: ["signedIn": "\(streamer.signedIn)", "signedOut": "\(streamer.signedOut)"])
        onReady(streamer.signedIn, streamer.signedOut)
        // Nothing is held here: a stopping streamer only stops forwarding, and what it had
        // taken in but not handed on is redelivered by the ledgers.
        try? await gracefulShutdown()
    }
}

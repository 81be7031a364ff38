import ArgumentParser
import Pipeline
import PaypipeCore

@main
struct CallbacksCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "paypipe-callbacks",
        abstract: "The callback validator: HTTP ingress for provider callbacks (PROTOCOL.md §3), plus /metrics and /healthz.")

    @Option(help: "Config file (PROTOCOL.md §4); default $PAYPIPE_CONFIG.") var config: String?
    @Option(help: "Override endpoints.callbacks (host:port; port 0: any free port, logged).") var listen: String?
    @Option(help: "Override endpoints.ledgerRPC.") var ledgerRpc: String?

    func run() async throws {
        var config = StageProcess.loadConfig(path: config)
        if let listen { config.endpoints.callbacks = listen }
        if let ledgerRpc { config.endpoints.ledgerRPC = ledgerRpc }
        let service = CallbacksService(config: config, logger: StageProcess.logger("paypipe-callbacks"))
        await StageProcess.run(
            StageService(run: { try await service.run { port in StageProcess.printLine("paypipe-callbacks listening port=\(port)") } },
                         stop: { Task { await service.stop() } }),
            logger: service.logger)
    }
}

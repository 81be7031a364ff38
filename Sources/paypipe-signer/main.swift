import ArgumentParser
import Pipeline
import PaypipeCore

@main
struct SignerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "paypipe-signer",
        abstract: "Builds and signs provider requests; the only stage with signing secrets.")

    @Option(help: "Config file (PROTOCOL.md §4); default $PAYPIPE_CONFIG.") var config: String?
    @Option(help: "Override endpoints.signQueue.") var signQueue: String?
    @Option(help: "Override endpoints.signedIn.") var signedIn: String?
    @Option(help: "Override endpoints.results.") var results: String?
    @Option(help: "host:port for GET /metrics and /healthz (port 0: any free port, logged).") var metrics = "127.0.0.1:0"

    func run() async throws {
        var config = StageProcess.loadConfig(path: config)
        if let signQueue { config.endpoints.signQueue = signQueue }
        if let signedIn { config.endpoints.signedIn = signedIn }
        if let results { config.endpoints.results = results }
        let service = SignerService(config: config, metricsAddress: metrics, logger: StageProcess.logger("paypipe-signer"))
        await StageProcess.run(StageService(run: { try await service.run() }, stop: { service.stop() }), logger: service.logger)
    }
}

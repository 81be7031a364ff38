import ArgumentParser
import Pipeline
import PaypipeCore

@main
struct SubmitterCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "paypipe-submitter",
        abstract: "Sends signed requests to providers over HTTP: retries, timeouts, unknown-outcome resolution. Holds no secrets.")

    @Option(help: "Config file (PROTOCOL.md §4); default $PAYPIPE_CONFIG. Secrets in it are not read.") var config: String?
    @Option(help: "Requests in flight at once.") var concurrency = 256
    @Option(help: "Override endpoints.signedOut.") var signedOut: String?
    @Option(help: "Override endpoints.results.") var results: String?
    @Option(help: "host:port for GET /metrics and /healthz (port 0: any free port, logged).") var metrics = "127.0.0.1:0"

    func run() async throws {
        var config = StageProcess.loadConfig(path: config, secrets: false)
        if let signedOut { config.endpoints.signedOut = signedOut }
        if let results { config.endpoints.results = results }
        let service = SubmitterService(config: config, concurrency: concurrency, metricsAddress: metrics, logger: StageProcess.logger("paypipe-submitter"))
        await StageProcess.run(StageService(run: { try await service.run() }, stop: { service.stop() }), logger: service.logger)
    }
}

import ArgumentParser
import Pipeline
import PaypipeCore

@main
struct CleengPollerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "paypipe-cleeng-poller",
        abstract: "Polls Cleeng getAccessStatus for accepted receipts every timers.cleengPollIntervalMs, gives up after timers.cleengGiveUpMs. Holds no secrets.")

    @Option(help: "Config file (PROTOCOL.md §4); default $PAYPIPE_CONFIG. Secrets in it are not read.") var config: String?
    @Option(help: "getAccessStatus calls in flight at once.") var concurrency = 256
    @Option(help: "Override endpoints.pollQueue.") var pollQueue: String?
    @Option(help: "Override endpoints.results.") var results: String?
    @Option(help: "Override endpoints.ledgerRPC.") var ledgerRpc: String?
    @Option(help: "host:port for GET /metrics and /healthz (port 0: any free port, logged).") var metrics = "127.0.0.1:0"

    func run() async throws {
        var config = StageProcess.loadConfig(path: config, secrets: false)
        if let pollQueue { config.endpoints.pollQueue = pollQueue }
        if let results { config.endpoints.results = results }
        if let ledgerRpc { config.endpoints.ledgerRPC = ledgerRpc }
        let service = CleengPollerService(config: config, concurrency: concurrency, metricsAddress: metrics, logger: StageProcess.logger("paypipe-cleeng-poller"))
        await StageProcess.run(StageService(run: { try await service.run() }, stop: { service.stop() }), logger: service.logger)
    }
}

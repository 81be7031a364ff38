import ArgumentParser
import Pipeline
import PaypipeCore

@main
struct LedgerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "paypipe-ledger",
        abstract: "Records and deduplicates orders, forwards outcomes upstream, redelivers stalled orders, and binds every stable address of the pipeline.")

    @Option(help: "Config file (PROTOCOL.md §4); default $PAYPIPE_CONFIG.") var config: String?
    @Option(help: "SQLite file holding the order ledger.") var store = "paypipe-ledger.sqlite"
    @Option(help: "Redeliver an order with no terminal or pending outcome after this many ms.") var redeliverAfterMs: Int64 = 60_000
    @Option(help: "Override endpoints.signQueue.") var signQueue: String?
    @Option(help: "Override endpoints.signedIn.") var signedIn: String?
    @Option(help: "Override endpoints.signedOut.") var signedOut: String?
    @Option(help: "Override endpoints.results.") var results: String?
    @Option(help: "Override endpoints.ledgerRPC.") var ledgerRpc: String?
    @Option(help: "Override endpoints.pollQueue.") var pollQueue: String?
    @Option(help: "Override endpoints.ledgerMetrics (host:port for GET /metrics and /healthz; port 0: any free port).") var metrics: String?

    func run() async throws {
        var config = StageProcess.loadConfig(path: config, secrets: false)
        if let signQueue { config.endpoints.signQueue = signQueue }
        if let signedIn { config.endpoints.signedIn = signedIn }
        if let signedOut { config.endpoints.signedOut = signedOut }
        if let results { config.endpoints.results = results }
        if let ledgerRpc { config.endpoints.ledgerRPC = ledgerRpc }
        if let pollQueue { config.endpoints.pollQueue = pollQueue }
        if let metrics { config.endpoints.ledgerMetrics = metrics }
        let service = LedgerService(
            config: config, storePath: store, redeliverAfterMilliseconds: redeliverAfterMs, logger: StageProcess.logger("paypipe-ledger"))
        let stage = StageService(
            run: {
                try await service.run { bound in
                    StageProcess.printLine(
                        "paypipe-ledger ready intake=\(bound.intake) outcomes=\(bound.outcomes) signQueue=\(bound.signQueue) signedIn=\(bound.signedIn) signedOut=\(bound.signedOut) results=\(bound.results) ledgerRPC=\(bound.ledgerRPC) pollQueue=\(bound.pollQueue)")
                }
            }, stop: { service.stop() })
        await StageProcess.run(stage, logger: service.logger)
    }
}

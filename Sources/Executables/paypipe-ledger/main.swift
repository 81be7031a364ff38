import ArgumentParser
import Connectors
import LedgerStage
import StageRuntime

@main
struct LedgerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "paypipe-ledger",
        abstract:
            "Records and deduplicates orders, forwards outcomes upstream, redelivers stalled orders, and binds every stable address of the pipeline.")

    @OptionGroup var options: StageOptions
    @Option(help: "SQLite file holding the order ledger.") var store = "paypipe-ledger.sqlite"
    @Option(help: "Redeliver an order with no terminal or pending outcome after this many ms.") var redeliverAfterMs: Int64 = 60_000

    func run() async throws {
        // No secret but what outcomes carry for the app, which the store keeps withheld.
        var config = options.loadConfig(
            secrets: false, alsoSecrets: Set(StandardConnectors.all.flatMap { $0.outcomeSecretSettings }), connectors: StandardConnectors.all)
        if let metrics = options.metrics { config.endpoints.ledgerMetrics = metrics }
        let logger = options.logger("paypipe-ledger")
        let ledger = LedgerService(
            config: config, registry: await StandardConnectors.registry(config: config), storePath: store,
            redeliverAfterMilliseconds: redeliverAfterMs, logger: logger
        ) { bound in
            StageProcess.printLine(bound.readyLine)
        }
        do {
            await StageProcess.run([ledger, try ledger.metricsServer(address: config.endpoints.ledgerMetrics)], logger: logger)
        } catch {
            StageProcess.fail("\(error)")
        }
    }
}

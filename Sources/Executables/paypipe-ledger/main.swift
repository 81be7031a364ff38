import ArgumentParser
import Connectors
import LedgerStage
import PaypipeCore
import ServiceLifecycle
import StageRuntime

@main
struct LedgerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "paypipe-ledger",
        abstract:
            "Records and deduplicates orders, forwards outcomes upstream, redelivers stalled orders, and binds every stable address of the pipeline.",
        version: PaypipeVersion.current)

    @OptionGroup var options: StageOptions
    @Option(help: "Where the ledger keeps orders: a SQLite file, or a postgres:// URL (default: the config's store section).")
    var store: String?
    @Option(help: "Redeliver an order with no terminal or pending outcome after this many ms.") var redeliverAfterMs: Int64 = 60_000
    @Option(help: "Override endpoints.ledgerScrape: a second host:port serving /metrics, /livez and /readyz, not /review.")
    var scrape: String?
    @Flag(help: "Leave the signer-to-submitter streamer to paypipe-streamer copies (a fleet); signedIn and signedOut are not bound.")
    var noStreamer = false

    func run() async throws {
        // No secret but what outcomes carry for the app, which the store keeps withheld.
        var config = options.loadConfig(
            secrets: false, alsoSecrets: Set(StandardConnectors.all.flatMap { $0.outcomeSecretSettings } + ["store.url", "store.password"]),
            connectors: StandardConnectors.all)
        if let metrics = options.metrics { config.endpoints.ledgerMetrics = metrics }
        let logger = options.logger("paypipe-ledger")
        do {
            if let store { config.store = try StoreSettings.parse(commandLine: store) }
        } catch {
            StageProcess.fail("\(error)")
        }
        let ledger = LedgerService(
            config: config, registry: await StandardConnectors.registry(config: config), store: config.store,
            redeliverAfterMilliseconds: redeliverAfterMs, runsStreamer: !noStreamer, logger: logger
        ) { bound in
            StageProcess.printLine(bound.readyLine)
        }
        do {
            var services: [any Service] = [ledger, try ledger.metricsServer(address: config.endpoints.ledgerMetrics)]
            // Metrics and probes without /review, for a network that may scrape but not read orders.
            if let address = scrape ?? config.endpoints.ledgerScrape {
                services.append(try ledger.metrics.server(address: address, role: "ledger scrape", logger: logger))
            }
            await StageProcess.run(services, logger: logger, tracing: config.tracing)
        } catch {
            StageProcess.fail("\(error)")
        }
    }
}

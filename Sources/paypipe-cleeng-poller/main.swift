import ArgumentParser
import CleengPollerStage
import Connectors
import StageRuntime

@main
struct CleengPollerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "paypipe-cleeng-poller",
        abstract: "Polls Cleeng getAccessStatus for accepted receipts every timers.cleengPollIntervalMs, gives up after timers.cleengGiveUpMs. Holds no secrets.")

    @OptionGroup var options: StageOptions
    @Option(help: "getAccessStatus calls in flight at once.") var concurrency = 256

    func run() async throws {
        let config = options.loadConfig(secrets: false, connectors: StandardConnectors.all)
        let logger = options.logger("paypipe-cleeng-poller")
        let poller = CleengPollerService(
            config: config, registry: await StandardConnectors.registry(config: config), concurrency: concurrency, logger: logger)
        await StageProcess.run(stage: poller, metricsAddress: options.metrics ?? "127.0.0.1:0", role: "cleeng-poller", logger: logger)
    }
}

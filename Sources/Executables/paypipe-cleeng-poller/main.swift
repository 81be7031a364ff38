import ArgumentParser
import Connectors
import PaypipeCore
import PollerStage
import StageRuntime

@main
struct PollerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "paypipe-cleeng-poller",
        abstract:
            "Polls the pending orders of polled providers (Cleeng getAccessStatus every timers.cleengPollIntervalMs, giving up after timers.cleengGiveUpMs). Holds no secrets.",
        version: PaypipeVersion.current)

    @OptionGroup var options: StageOptions
    @Option(help: "Polls in flight at once.") var concurrency = 256

    func run() async throws {
        let config = options.loadConfig(secrets: false, connectors: StandardConnectors.all)
        let logger = options.logger("paypipe-cleeng-poller")
        let poller = PollerService(
            config: config, registry: await StandardConnectors.registry(config: config), concurrency: concurrency, logger: logger)
        await StageProcess.run(
            stage: poller, metricsAddress: options.metrics ?? "127.0.0.1:0", role: "cleeng-poller", logger: logger, tracing: config.tracing)
    }
}

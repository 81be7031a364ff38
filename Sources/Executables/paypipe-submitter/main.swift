import ArgumentParser
import Connectors
import PaypipeCore
import StageRuntime
import SubmitterStage

@main
struct SubmitterCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "paypipe-submitter",
        abstract: "Sends signed requests to providers over HTTP: retries, timeouts, unknown-outcome resolution. Holds no secrets.",
        version: PaypipeVersion.current)

    @OptionGroup var options: StageOptions
    @Option(help: "Requests in flight at once.") var concurrency = 256
    @Option(help: "Work held at once, claimed and leased, in flight or waiting for a slot (default: 4 x --concurrency).") var backlog: Int?

    func run() async throws {
        let config = options.loadConfig(secrets: false, connectors: StandardConnectors.all)
        let logger = options.logger("paypipe-submitter")
        let submitter = SubmitterService(
            config: config, registry: await StandardConnectors.registry(config: config), concurrency: concurrency, backlog: backlog, logger: logger)
        await StageProcess.run(
            stage: submitter, metricsAddress: options.metrics ?? "127.0.0.1:0", role: "submitter", logger: logger, tracing: config.tracing)
    }
}

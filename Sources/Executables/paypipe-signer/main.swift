import ArgumentParser
import Connectors
import PaypipeCore
import SignerStage
import StageRuntime

@main
struct SignerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "paypipe-signer",
        abstract: "Builds and signs provider requests; the only pipeline stage with signing secrets.", version: PaypipeVersion.current)

    @OptionGroup var options: StageOptions

    func run() async throws {
        let config = options.loadConfig(secrets: true, connectors: StandardConnectors.all)
        let logger = options.logger("paypipe-signer")
        let signer = SignerService(config: config, registry: await StandardConnectors.registry(config: config), logger: logger)
        await StageProcess.run(
            stage: signer, metricsAddress: options.metrics ?? "127.0.0.1:0", role: "signer", logger: logger, tracing: config.tracing)
    }
}

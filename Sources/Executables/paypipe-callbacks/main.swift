import ArgumentParser
import CallbacksStage
import Connectors
import PaypipeCore
import StageRuntime

@main
struct CallbacksCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "paypipe-callbacks",
        abstract:
            "The callback validator: HTTP ingress for provider callbacks (docs/protocol.md); /metrics and the probes on endpoints.callbacksMetrics.",
        version: PaypipeVersion.current)

    @OptionGroup var options: StageOptions
    @Option(help: "Override endpoints.callbacks (host:port; port 0: any free port, logged).") var listen: String?

    func run() async throws {
        var config = options.loadConfig(secrets: true, connectors: StandardConnectors.all)
        if let listen { config.endpoints.callbacks = listen }
        let logger = options.logger("paypipe-callbacks")
        let callbacks = CallbacksService(config: config, registry: await StandardConnectors.registry(config: config), logger: logger) { port in
            StageProcess.printLine("paypipe-callbacks listening port=\(port)")
        }
        await StageProcess.run(
            stage: callbacks, metricsAddress: options.metrics ?? config.endpoints.callbacksMetrics, role: "callbacks", logger: logger,
            tracing: config.tracing)
    }
}

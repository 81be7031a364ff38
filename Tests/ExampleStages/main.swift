import ArgumentParser
import CallbacksStage
import Connectors
import ExampleConnector
import LedgerStage
import PaypipeCore
import PollerStage
import SignerStage
import StageRuntime
import SubmitterStage

/// The real stages with one more registry line (`ExampleConnector`), for the end-to-end test
/// of the sixth provider added through the seams.
@main
struct ExampleStagesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "paypipe-example-stages", abstract: "Test only: runs one stage with the standard connectors plus the example provider's.")

    static let connectors: [any ProviderConnector.Type] = StandardConnectors.all + [ExampleConnector.self]

    @Argument(help: "ledger, signer, submitter, callbacks or poller") var role: String
    @OptionGroup var options: StageOptions
    @Option(help: "Ledger store (ledger only).") var store = "example-ledger.sqlite"
    @Option(help: "Callback listen address (callbacks only).") var listen: String?

    func run() async throws {
        let secrets = role == "signer" || role == "callbacks"
        var config = options.loadConfig(secrets: secrets, connectors: Self.connectors)
        let registry = await ConnectorRegistry(Self.connectors, config: config)
        let logger = options.logger("paypipe-example-\(role)")
        let metrics = options.metrics ?? "127.0.0.1:0"
        switch role {
        case "ledger":
            let ledger = LedgerService(config: config, registry: registry, store: try StoreSettings.parse(commandLine: store), logger: logger) {
                bound in
                StageProcess.printLine(bound.readyLine)
            }
            await StageProcess.run(stage: ledger, metricsAddress: metrics, role: role, logger: logger)
        case "signer":
            await StageProcess.run(
                stage: SignerService(config: config, registry: registry, logger: logger), metricsAddress: metrics, role: role, logger: logger)
        case "submitter":
            await StageProcess.run(
                stage: SubmitterService(config: config, registry: registry, logger: logger), metricsAddress: metrics, role: role, logger: logger)
        case "callbacks":
            if let listen { config.endpoints.callbacks = listen }
            let callbacks = CallbacksService(config: config, registry: registry, logger: logger) { port in
                StageProcess.printLine("paypipe-callbacks listening port=\(port)")
            }
            await StageProcess.run(stage: callbacks, metricsAddress: metrics, role: role, logger: logger)
        case "poller":
            await StageProcess.run(
                stage: PollerService(config: config, registry: registry, logger: logger), metricsAddress: metrics, role: role, logger: logger)
        default:
            StageProcess.fail("unknown role \(role)")
        }
    }
}

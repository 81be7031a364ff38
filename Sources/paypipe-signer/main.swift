import ArgumentParser
import Pipeline
import PaypipeCore

@main
struct SignerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "paypipe-signer",
        abstract: "Builds and signs provider requests; the only stage with signing secrets.")

    @Option(help: "Config file (PROTOCOL.md §4); default $PAYPIPE_CONFIG.") var config: String?
    @Option(help: "Override endpoints.signQueue.") var signQueue: String?
    @Option(help: "Override endpoints.signedIn.") var signedIn: String?
    @Option(help: "Override endpoints.results.") var results: String?

    func run() async throws {
        var config = StageProcess.loadConfig(path: config)
        if let signQueue { config.endpoints.signQueue = signQueue }
        if let signedIn { config.endpoints.signedIn = signedIn }
        if let results { config.endpoints.results = results }
        let service = SignerService(config: config, logger: StageProcess.logger("paypipe-signer"))
        StageProcess.onTerminationSignal { service.stop() }
        do {
            try await service.run()
        } catch {
            StageProcess.fail("\(error)")
        }
    }
}

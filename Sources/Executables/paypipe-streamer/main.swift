import ArgumentParser
import Connectors
import PaypipeCore
import StageRuntime
import StreamerStage

@main
struct StreamerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "paypipe-streamer",
        abstract:
            "Forwards signed requests from the signers to the submitters; binds endpoints.signedIn and endpoints.signedOut. Run any number beside ledgers started with --no-streamer.",
        version: PaypipeVersion.current)

    @OptionGroup var options: StageOptions

    func run() async throws {
        let config = options.loadConfig(secrets: false, connectors: StandardConnectors.all)
        let logger = options.logger("paypipe-streamer")
        let streamer = StreamerService(config: config, logger: logger) { signedIn, signedOut in
            StageProcess.printLine("paypipe-streamer ready signedIn=\(signedIn) signedOut=\(signedOut)")
        }
        await StageProcess.run(stage: streamer, metricsAddress: options.metrics ?? "127.0.0.1:0", role: "streamer", logger: logger)
    }
}

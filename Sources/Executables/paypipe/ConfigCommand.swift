import ArgumentParser
import Connectors
import PaypipeCore
import StageRuntime

/// `paypipe config check FILE`: every error in a config in one run.
struct ConfigCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "config", abstract: "Check a config file.", subcommands: [Check.self])

    struct Check: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print every error in a config file, one per line (path: rule); exit 1 when there is any.",
            discussion: """
                Secrets given as env: or file: are read as a stage would read them, so a missing variable or an unreadable \
                file is an error; --without-secrets checks a config on a machine that does not hold them.
                """)
        @Argument(help: "The config file.") var file: String
        @Flag(help: "Do not read env: and file: secrets.") var withoutSecrets = false

        func run() async throws {
            let sources = withoutSecrets ? PaypipeConfig.Sources.process.withoutSecrets : PaypipeConfig.Sources.process
            guard let bytes = sources.readFile(file) else { StageProcess.fail("cannot read \(file)") }
            let errors = PaypipeConfig.check(bytes, sources: sources, sections: StandardConnectors.all.map { $0.settingsSection })
            guard !errors.isEmpty else { return printText("\(file): ok") }
            printText(errors.map { "\(file): \($0.path.isEmpty ? "(top)" : $0.path): \($0.reason)" }.joined(separator: "\n"))
            throw ExitCode(1)
        }
    }
}

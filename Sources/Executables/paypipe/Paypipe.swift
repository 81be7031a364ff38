import ArgumentParser
import Connectors
import Foundation
import PaypipeCore
import StageRuntime
import Synchronization
import UnixSignals
import ZeroMQ

@main
struct Paypipe: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "paypipe",
        abstract: "The paypipe operator CLI.",
        version: PaypipeVersion.current,
        subcommands: [
            Up.self, Send.self, OutcomesCommand.self, SubscriptionCommand.self, SchedulesCommand.self, ReviewCommand.self, OrderCommand.self,
            OrdersCommand.self,
            KeysCommand.self, ConfigCommand.self, StoreCommand.self,
            ProbeCommand.self,
            SandboxCommand.self,
        ])
}

/// Where the stage executables are by default: next to this one.
func siblingDirectory() -> URL {
    let me = URL(fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0])
    return me.deletingLastPathComponent()
}

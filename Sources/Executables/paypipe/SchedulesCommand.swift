import ArgumentParser
import PaypipeCore
import StageRuntime
import StageWire
import ZeroMQ

#if canImport(Glibc)
import Glibc
#endif

/// `paypipe schedules`: the subscriptions paypipe charges on schedule (docs/protocol.md,
/// "Schedules"), soonest due first, asked of the ledger's replay endpoint.
struct SchedulesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "schedules",
        abstract: "List the charge schedules, soonest due first, from the ledger's replay endpoint.",
        discussion: """
            One line per schedule: provider, subscription, state (active, paused, review, cancelled, completed, ended), the \
            cycle and attempt under way or next, when its next step is due, and the schedule itself. --json prints the \
            records as the ledger answers them, with why a schedule is in review.
            """)

    @Option(help: "Only this merchant's.") var merchant: String?
    @Option(help: "Only this provider's: nets or phonepe.") var provider: String?
    @Option(help: "Only schedules in this state.") var state: String?
    @Option(help: "At most this many (up to 1000).") var limit = 100
    @Flag(help: "Print the records as JSON lines.") var json = false
    @OptionGroup var connection: ReplayConnection

    init() {}

    func run() async throws {
        let query = OutcomeReplay.SchedulesQuery(merchant: merchant, provider: provider.map { Provider($0) }, state: state, limit: limit)
        let answer = try await connection.ask { try await $0.schedules(query) }
        guard let schedules = answer else { StageProcess.fail("the ledger refused the query (a limited client must name its --merchant)") }
        let lines = json ? schedules.map(\.serialized) : [Self.header] + schedules.map(Self.line)
        StageProcess.writeAll(Array((lines.joined(separator: "\n") + "\n").utf8), to: STDOUT_FILENO)
    }

    static let header = "provider  subscription                       state      cycle  attempt  due                       schedule"

    static func line(_ record: JSONValue) -> String {
        let schedule = record["schedule"]
        let plan =
            "\(cellText(schedule?["amount"])) \(cellText(schedule?["currency"])) every \(cellText(schedule?["interval"])) from \(cellText(schedule?["firstChargeDate"]))"
            + (schedule?["count"].map { ", \(cellText($0)) cycles" } ?? "") + (schedule?["endDate"].map { " until \(cellText($0))" } ?? "")
        return [
            cellText(record["provider"]).padding(9), cellText(record["subscription"]).padding(34), cellText(record["state"]).padding(10),
            cellText(record["cycle"]).padding(6), cellText(record["attempt"]).padding(8), cellText(record["dueAt"]).padding(25), plan,
        ].joined(separator: " ")
    }
}

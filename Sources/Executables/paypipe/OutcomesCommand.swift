import ArgumentParser
import Connectors
import FoundationEssentials
import PaypipeCore
import StageRuntime
import StageWire
import ZeroMQ

#if canImport(Glibc)
import Glibc
#endif

/// `paypipe outcomes`: reads the ledger's outcome log by seq (docs/protocol.md). It asks the
/// replay endpoint only, never the live outcomes PUSH, so it takes nothing away from upstream.
struct OutcomesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "outcomes",
        abstract: "Print stored outcomes with a seq above --since as JSON lines, from the ledger's replay endpoint.",
        discussion: """
            Without --follow it stops once it has caught up (or printed --limit outcomes). With --follow it \
            keeps polling the replay endpoint for new seqs until interrupted. It never reads the live outcomes \
            PUSH, so it does not take outcomes from the real upstream.
            """)

    @Option(help: "Print outcomes whose seq is greater than this.") var since: Int64 = 0
    @Option(help: "Print at most this many outcomes, then exit.") var limit: Int?
    @Flag(help: "Keep polling for new outcomes until interrupted.") var follow = false
    @Option(help: "Replay endpoint (default: endpoints.outcomesReplay of --config, else tcp://127.0.0.1:5558).") var replay: String?
    @Option(help: "Config file to take endpoints.outcomesReplay from; default $PAYPIPE_CONFIG.") var config: String?
    @Option(help: "Milliseconds between polls once caught up, with --follow.") var pollIntervalMs: Int = 500
    @Option(help: "Milliseconds to wait for one answer.") var timeoutMs: Int64 = 5000
    @Option(help: "With upstream CURVE: this client's key pair, <path>.public and <path>.secret (paypipe keys generate --upstream).")
    var upstreamKey: String?

    init() {}

    func validate() throws {
        guard since >= 0 else { throw ValidationError("--since must be 0 or more") }
        if let limit, limit < 1 { throw ValidationError("--limit must be 1 or more") }
        guard pollIntervalMs >= 10 else { throw ValidationError("--poll-interval-ms must be 10 or more") }
    }

    func run() async throws {
        let endpoint = try replayEndpoint()
        let options = UpstreamKey.clientOptions(stageOptions(), keyPath: upstreamKey, configPath: config)
        let context = try ZMQContext()
        var client = try OutcomeReplayClient(context: context, endpoint: endpoint, options: options)
        var since = self.since
        var printed = 0
        defer { context.terminate() }
        while limit.map({ printed < $0 }) ?? true {
            let batch = min(OutcomeReplay.maxLimit, limit.map { $0 - printed } ?? OutcomeReplay.maxLimit)
            let answer: (outcomes: [[UInt8]], trailer: OutcomeReplay.Trailer)
            do {
                answer = try await client.fetch(since: since, limit: batch, timeoutMilliseconds: timeoutMs)
            } catch {
                await client.close()
                guard follow else { StageProcess.fail("\(error) (\(endpoint))") }
                // The ledger may be restarting: a fresh socket, so no late answer is mistaken for the next one.
                StageProcess.writeAll(Array("paypipe outcomes: \(error); retrying\n".utf8), to: STDERR_FILENO)
                try await Task.sleep(for: .milliseconds(pollIntervalMs))
                client = try OutcomeReplayClient(context: context, endpoint: endpoint, options: options)
                continue
            }
            for outcome in answer.outcomes {
                StageProcess.writeAll(outcome + [UInt8(ascii: "\n")], to: STDOUT_FILENO)
            }
            printed += answer.outcomes.count
            since = max(since, answer.trailer.next)
            if !answer.trailer.more {
                guard follow else { break }
                try await Task.sleep(for: .milliseconds(pollIntervalMs))
            }
        }
        await client.close()
    }

    private func replayEndpoint() throws -> String {
        replay ?? configuredEndpoints(config)?.outcomesReplay ?? "tcp://127.0.0.1:5558"
    }
}

/// The endpoints of `--config PATH`, else of `$PAYPIPE_CONFIG`; nil when neither is given. A
/// config that cannot be read ends the command.
func configuredEndpoints(_ configPath: String?) -> PaypipeConfig.Endpoints? {
    configuredConfig(configPath)?.endpoints
}

/// The config at `--config PATH`, else at `$PAYPIPE_CONFIG`, without its secrets; nil when
/// neither is given. A config that cannot be read ends the command.
func configuredConfig(_ configPath: String?) -> PaypipeConfig? {
    guard let path = configPath ?? ProcessInfo.processInfo.environment["PAYPIPE_CONFIG"], !path.isEmpty else { return nil }
    do {
        return try PaypipeConfig.load(path: path, sources: PaypipeConfig.Sources.process.withoutSecrets)
    } catch {
        StageProcess.fail("bad config \(path): \(error)")
    }
}

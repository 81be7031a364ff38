import ArgumentParser
import Connectors
import Foundation
import PaypipeCore
import StageRuntime
import Supervision
import Synchronization
import UnixSignals
import ZeroMQ

struct Up: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Start a whole pipeline on this machine as child processes; Ctrl-C stops them all.",
        discussion: "Without --config it writes a demo config under --state-dir and starts the provider sandbox too.")

    @Option(help: "Config file (docs/configuration.md). Without it: a demo config against the sandbox.") var config: String?
    @Flag(help: "Also start the provider sandbox (implied without --config).") var sandbox = false
    @Option(help: "Signer copies.") var signers = 1
    @Option(help: "Submitter copies.") var submitters = 1
    @Option(help: "Requests in flight per submitter.") var concurrency = 256
    @Option(help: "Directory for the demo config and the ledger database.") var stateDir = ".paypipe"
    @Option(
        help: ArgumentHelp(
            "Where the ledger keeps orders: sqlite (a file in --state-dir), postgres (a PostgreSQL cluster of its own in --state-dir), or postgres=URL.",
            discussion: "Without this option: the config's store section, or else sqlite."))
    var store: String?
    @Option(help: "Sandbox port (demo config).") var sandboxPort = 9100
    @Option(help: "Extra arguments for the sandbox, e.g. \"--latency-ms 50\".") var sandboxArgs = ""
    @Option(
        help: ArgumentHelp(
            "How far below the ledger's the priority of every other stage is, as a nice increment (0-19; 0: all equal).",
            discussion:
                "The ledger is the one stage that does not scale out: when the cores are busy, the stages waiting on it run faster if it goes first.")
    )
    var workerNice: Int32 = 5
    // Hidden: the tests start stand-in children and need a short start-up bound.
    @Option(help: ArgumentHelp("Directory of the stage executables (default: next to paypipe).", visibility: .hidden))
    var executablesDir: String?
    @Option(help: ArgumentHelp("Seconds a child gets to print its ready line.", visibility: .hidden))
    var startTimeout = 30.0

    func validate() throws {
        guard (0...19).contains(workerNice) else { throw ValidationError("--worker-nice must be 0 to 19") }
        if let store, store != "sqlite", store != "postgres", !store.hasPrefix("postgres=") {
            throw ValidationError("--store must be sqlite, postgres or postgres=URL")
        }
    }

    /// The ledger's `--store`, and the private cluster started for it, if any.
    private func ledgerStore(_ loaded: PaypipeConfig) throws -> (argument: String?, cluster: PrivatePostgres?) {
        switch store {
        case nil:
            // A config that names a store of its own keeps it; otherwise the store is in the state directory.
            if case .sqlite(let path) = loaded.store, path == StoreSettings.defaultSQLitePath {
                return ((stateDir as NSString).appendingPathComponent("ledger.sqlite"), nil)
            }
            return (nil, nil)
        case "sqlite": return ((stateDir as NSString).appendingPathComponent("ledger.sqlite"), nil)
        case "postgres":
            let cluster = try PrivatePostgres(stateDirectory: stateDir)
            try cluster.start()
            StageProcess.printLine("paypipe: started a PostgreSQL of its own in \(cluster.directory); it stops when the pipeline stops")
            return (cluster.url, cluster)
        default: return (String(store!.dropFirst("postgres=".count)), nil)
        }
    }

    func run() async throws {
        try FileManager.default.createDirectory(atPath: stateDir, withIntermediateDirectories: true)
        var configPath = config
        if configPath == nil {
            configPath = (stateDir as NSString).appendingPathComponent("demo-config.json")
            try DemoConfig.text(sandboxURL: "http://127.0.0.1:\(sandboxPort)").write(toFile: configPath!, atomically: true, encoding: .utf8)
        }
        let path = configPath!
        let loaded: PaypipeConfig
        do {
            loaded = try PaypipeConfig.load(path: path, sources: PaypipeConfig.Sources.process.withoutSecrets)
        } catch {
            StageProcess.fail("bad config \(path): \(error)")
        }
        let supervisor = Supervisor(
            executables: executablesDir.map { URL(fileURLWithPath: $0) } ?? siblingDirectory(), startTimeoutSeconds: startTimeout)
        // Trapped before the first child starts, so a signal during start-up stops what has started.
        let signals = await UnixSignalsSequence(trapping: .sigterm, .sigint)
        let signalHandling = Task {
            var received = 0
            for await _ in signals {
                received += 1
                if received == 1 { supervisor.stopAll(reason: "signal") } else { supervisor.killAllAndExit() }
            }
        }

        var cluster: PrivatePostgres?
        defer {
            if let cluster {
                cluster.stop()
                FileHandle.standardError.write(Data("paypipe: stopped the PostgreSQL in \(cluster.directory)\n".utf8))
            }
        }
        do {
            if config == nil || sandbox {
                var args = ["--config", path, "--port", String(sandboxPort)]
                args += sandboxArgs.split(separator: " ").map(String.init)
                try await supervisor.start("paypipe-sandbox", args, waitFor: "listening")
            }
            let ledgerStore: (argument: String?, cluster: PrivatePostgres?)
            do {
                ledgerStore = try self.ledgerStore(loaded)
            } catch {
                supervisor.stopAll(reason: "no store", exitCode: 1, announce: "\(error)")
                throw Supervisor.NotStarted()
            }
            cluster = ledgerStore.cluster
            try await supervisor.start(
                "paypipe-ledger", ["--config", path] + (ledgerStore.argument.map { ["--store", $0] } ?? []), waitFor: "paypipe-ledger ready")
            for _ in 0..<signers { try await supervisor.start("paypipe-signer", ["--config", path], waitFor: nil, nice: workerNice) }
            for _ in 0..<submitters {
                try await supervisor.start(
                    "paypipe-submitter", ["--config", path, "--concurrency", String(concurrency)], waitFor: nil, nice: workerNice)
            }
            try await supervisor.start("paypipe-callbacks", ["--config", path], waitFor: "paypipe-callbacks listening", nice: workerNice)
            try await supervisor.start("paypipe-cleeng-poller", ["--config", path], waitFor: nil, nice: workerNice)
            StageProcess.printLine(
                """
                paypipe is up (\(signers) signer(s), \(submitters) submitter(s), callbacks on \(loaded.endpoints.callbacks), 1 cleeng poller\(config == nil || sandbox ? ", sandbox on :\(sandboxPort)" : "")).
                  orders in:    PUSH to  \(loaded.endpoints.intake)
                  outcomes out: PULL from \(loaded.endpoints.outcomes)
                  config:       \(path)
                Try: paypipe send examples/orders.jsonl      (Ctrl-C here stops everything)
                """)
        } catch {
            // Not started (`Supervisor.NotStarted`): the supervisor has said why and is stopping
            // what did start.
        }
        let code = await supervisor.waitUntilStopped()
        signalHandling.cancel()
        throw ExitCode(code)
    }
}

/// Child processes of `paypipe up`, stopped one role at a time in reverse start order.
final class Supervisor: Sendable {
    /// Thrown by `start` once the pipeline is stopping; the reason is already printed.
    struct NotStarted: Error {}

    private struct State {
        var children: [(name: String, process: ChildProcess)] = []
        var stopping = false
        var exitCode: Int32 = 0
        var waiters: [CheckedContinuation<Int32, Never>] = []
        var stopped = false
    }

    private let executables: URL
    private let startTimeoutSeconds: Double
    private let state = Mutex(State())

    init(executables: URL, startTimeoutSeconds: Double) {
        self.executables = executables
        self.startTimeoutSeconds = startTimeoutSeconds
    }

    /// Starts `name` at `nice` below this process's priority; with a marker, waits until the
    /// child prints it, at most the start timeout. Its output is held until then, and passed on
    /// to ours from then on.
    func start(_ name: String, _ arguments: [String], waitFor marker: String?, nice: Int32 = 0) async throws(NotStarted) {
        let path = executables.appendingPathComponent(name).path
        let process: ChildProcess
        do {
            process = try ChildProcess(
                [path] + arguments, name: name, stdin: "/dev/null", stdout: marker == nil ? .inherit : .readyLine(afterReady: .inherit),
                nice: Int(nice), readyMarker: marker,
                onExit: { [weak self] pid, status in self?.exited(name, pid: pid, status) })
        } catch {
            stopAll(reason: "\(name) did not start", exitCode: 1, announce: "cannot start \(path): \(error.reason)")
            throw NotStarted()
        }
        let pid = process.pid
        let admitted = state.withLock {
            if !$0.stopping { $0.children.append((name, process)) }
            return !$0.stopping
        }
        guard admitted else {
            // The stop began while this child was being spawned, so the stop does not know it.
            process.signal(SIGKILL)
            throw NotStarted()
        }
        guard let marker else { return }
        switch await process.waitForLine(within: .milliseconds(Int64(startTimeoutSeconds * 1000))) {
        case .ready:
            return
        case .timedOut:
            stopAll(
                reason: "\(name) did not start", exitCode: 1,
                announce: "\(name) (pid \(pid)) did not print \"\(marker)\" within \(String(format: "%g", startTimeoutSeconds)) s")
        case .ended:
            // Usually the child exited: give its exit status a moment to be the reason reported.
            await process.waitForExit(within: .seconds(1))
            stopAll(
                reason: "\(name) did not start", exitCode: 1,
                announce: "\(name) (pid \(pid)) closed its output without printing \"\(marker)\"")
        }
        throw NotStarted()
    }

    private func exited(_ name: String, pid: pid_t, _ status: Int32) {
        stopAll(reason: "\(name) exited", exitCode: 1, announce: "\(name) (pid \(pid)) exited with status \(status)")
    }

    /// Starts stopping every child; only the first call counts. `announce` (why, when it is not
    /// an operator's request) goes to stderr as one line.
    func stopAll(reason: String, exitCode: Int32 = 0, announce: String? = nil) {
        let toStop = state.withLock { state -> [(name: String, process: ChildProcess)]? in
            if state.stopping { return nil }
            state.stopping = true
            state.exitCode = exitCode
            return state.children.reversed()
        }
        guard let toStop else { return }
        if let announce { FileHandle.standardError.write(Data("paypipe: \(announce); stopping the pipeline\n".utf8)) }
        Task.detached {
            // One role at a time, newest role first (cleeng poller, callbacks, submitters, signers,
            // ledger, sandbox), all copies of a role together, so in-flight work drains towards a
            // ledger still running.
            var roles: [[ChildProcess]] = []
            var lastName = ""
            for child in toStop {
                if child.name != lastName { roles.append([]) }
                lastName = child.name
                roles[roles.count - 1].append(child.process)
            }
            for role in roles { await ChildProcess.stop(role, grace: .seconds(10)) }
            FileHandle.standardError.write(Data("paypipe: stopped (\(reason))\n".utf8))
            let (waiters, code) = self.state.withLock { state in
                state.stopped = true
                defer { state.waiters = [] }
                return (state.waiters, state.exitCode)
            }
            for waiter in waiters { waiter.resume(returning: code) }
        }
    }

    /// The second signal: no more waiting, but no child is left behind holding the ports either.
    func killAllAndExit() -> Never {
        for child in state.withLock({ $0.children }) { child.process.signal(SIGKILL) }
        FileHandle.standardError.write(Data("paypipe: second signal: killed the children still running\n".utf8))
        exit(130)
    }

    func waitUntilStopped() async -> Int32 {
        await withCheckedContinuation { continuation in
            let code = state.withLock { state -> Int32? in
                if state.stopped { return state.exitCode }
                state.waiters.append(continuation)
                return nil
            }
            if let code { continuation.resume(returning: code) }
        }
    }
}

import ArgumentParser
import Foundation
import StageRuntime
import PaypipeCore
import ZeroMQ

@main
struct Paypipe: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "paypipe",
        abstract: "The paypipe operator CLI.",
        subcommands: [Up.self, Send.self, KeysCommand.self])
}

/// Where the sibling executables are: next to this one.
func siblingExecutable(_ name: String) -> String {
    let me = URL(fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0])
    return me.deletingLastPathComponent().appendingPathComponent(name).path
}

struct Up: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Start a whole pipeline on this machine as child processes; Ctrl-C stops them all.",
        discussion: "Without --config it writes a demo config under --state-dir and starts the provider sandbox too.")

    @Option(help: "Config file (PROTOCOL.md §4). Without it: a demo config against the sandbox.") var config: String?
    @Flag(help: "Also start the provider sandbox (implied without --config).") var sandbox = false
    @Option(help: "Signer copies.") var signers = 1
    @Option(help: "Submitter copies.") var submitters = 1
    @Option(help: "Requests in flight per submitter.") var concurrency = 256
    @Option(help: "Directory for the demo config and the ledger database.") var stateDir = ".paypipe"
    @Option(help: "Sandbox port (demo config).") var sandboxPort = 9100
    @Option(help: "Extra arguments for the sandbox, e.g. \"--latency-ms 50\".") var sandboxArgs = ""

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
        let supervisor = Supervisor()
        onTerminationSignal { supervisor.stopAll(reason: "signal") }

        if config == nil || sandbox {
            var args = ["--config", path, "--port", String(sandboxPort), "--nets-webhook-url", "http://\(loaded.endpoints.callbacks)/callbacks/nets"]
            args += sandboxArgs.split(separator: " ").map(String.init)
            try supervisor.start("paypipe-sandbox", args, waitFor: "listening")
        }
        let store = (stateDir as NSString).appendingPathComponent("ledger.sqlite")
        try supervisor.start("paypipe-ledger", ["--config", path, "--store", store], waitFor: "paypipe-ledger ready")
        for _ in 0..<signers { try supervisor.start("paypipe-signer", ["--config", path], waitFor: nil) }
        for _ in 0..<submitters {
            try supervisor.start("paypipe-submitter", ["--config", path, "--concurrency", String(concurrency)], waitFor: nil)
        }
        try supervisor.start("paypipe-callbacks", ["--config", path], waitFor: "paypipe-callbacks listening")
        try supervisor.start("paypipe-cleeng-poller", ["--config", path], waitFor: nil)
        StageProcess.printLine("""
            paypipe is up (\(signers) signer(s), \(submitters) submitter(s), callbacks on \(loaded.endpoints.callbacks), 1 cleeng poller\(config == nil || sandbox ? ", sandbox on :\(sandboxPort)" : "")).
              orders in:    PUSH to  \(loaded.endpoints.intake)
              outcomes out: PULL from \(loaded.endpoints.outcomes)
              config:       \(path)
            Try: paypipe send examples/orders.jsonl      (Ctrl-C here stops everything)
            """)
        let code = await supervisor.waitUntilStopped()
        throw ExitCode(code)
    }
}

/// Child processes of `paypipe up`, stopped by PID (never by name) in reverse start order.
final class Supervisor: @unchecked Sendable {
    private let lock = NSLock()
    private var children: [(name: String, process: Process)] = []
    private var stopping = false
    private var exitCode: Int32 = 0
    private let done = DispatchSemaphore(value: 0)

    func start(_ name: String, _ arguments: [String], waitFor marker: String?) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: siblingExecutable(name))
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.terminationHandler = { [weak self] p in self?.exited(name, p) }
        try process.run()
        lock.lock()
        children.append((name, process))
        lock.unlock()
        let handle = output.fileHandleForReading
        var buffer = Data()
        if let marker {
            let deadline = Date().addingTimeInterval(30)
            while !String(decoding: buffer, as: UTF8.self).contains(marker) {
                let chunk = handle.availableData
                if chunk.isEmpty || Date() > deadline {
                    stopAll(reason: "\(name) did not start")
                    throw ExitCode(1)
                }
                buffer.append(chunk)
            }
        }
        FileHandle.standardOutput.write(buffer)
        // Keep echoing the child's stdout.
        handle.readabilityHandler = { h in
            let data = h.availableData
            if data.isEmpty { h.readabilityHandler = nil } else { FileHandle.standardOutput.write(data) }
        }
    }

    private func exited(_ name: String, _ process: Process) {
        lock.lock()
        let expected = stopping
        lock.unlock()
        if !expected {
            FileHandle.standardError.write(Data("paypipe: \(name) (pid \(process.processIdentifier)) exited with status \(process.terminationStatus); stopping the pipeline\n".utf8))
            lock.lock()
            exitCode = 1
            lock.unlock()
            stopAll(reason: "\(name) exited")
        }
    }

    func stopAll(reason: String) {
        lock.lock()
        if stopping {
            lock.unlock()
            return
        }
        stopping = true
        let toStop = children.reversed()
        lock.unlock()
        DispatchQueue.global().async {
            // One role at a time, newest role first (submitters, signers, ledger, sandbox), all
            // copies of a role together, so in-flight work drains towards a ledger still running.
            var roles: [[Process]] = []
            var lastName = ""
            for child in toStop {
                if child.name != lastName { roles.append([]) }
                lastName = child.name
                roles[roles.count - 1].append(child.process)
            }
            for role in roles {
                for process in role where process.isRunning { kill(process.processIdentifier, SIGTERM) }
                let deadline = Date().addingTimeInterval(10)
                while role.contains(where: \.isRunning) && Date() < deadline { usleep(20_000) }
                for process in role where process.isRunning { kill(process.processIdentifier, SIGKILL) }
            }
            FileHandle.standardError.write(Data("paypipe: stopped (\(reason))\n".utf8))
            self.done.signal()
        }
    }

    func waitUntilStopped() async -> Int32 {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                self.done.wait()
                self.lock.lock()
                let code = self.exitCode
                self.lock.unlock()
                continuation.resume(returning: code)
            }
        }
    }
}

struct Send: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Push JSON-lines orders to the pipeline and print their outcomes as they arrive.",
        discussion: "Waits until every order has a terminal or pending outcome (or --timeout), then prints a summary per status.")

    @Argument(help: "A file of JSON lines, or - for standard input.") var file: String
    @Option(help: "Intake endpoint (default $PAYPIPE_INTAKE or tcp://127.0.0.1:5550).") var intake: String?
    @Option(help: "Outcomes endpoint (default $PAYPIPE_OUTCOMES or tcp://127.0.0.1:5559).") var outcomes: String?
    @Option(help: "Seconds to wait for outcomes after the last order.") var timeout = 30.0
    @Flag(help: "Print only progress and the summary.") var quiet = false
    @Flag(help: "Wait for every order's terminal outcome (succeeded, failed, rejected), not just pending.") var waitTerminal = false

    func run() async throws {
        let environment = ProcessInfo.processInfo.environment
        let intakeEndpoint = intake ?? environment["PAYPIPE_INTAKE"] ?? "tcp://127.0.0.1:5550"
        let outcomesEndpoint = outcomes ?? environment["PAYPIPE_OUTCOMES"] ?? "tcp://127.0.0.1:5559"
        let data: Data
        if file == "-" {
            data = FileHandle.standardInput.readDataToEndOfFile()
        } else {
            guard let contents = FileManager.default.contents(atPath: file) else { StageProcess.fail("cannot read \(file)") }
            data = contents
        }
        let lines = data.split(separator: UInt8(ascii: "\n")).map { Array($0) }.filter { !$0.allSatisfy { $0 == 32 || $0 == 13 || $0 == 9 } }

        // Orders we expect an outcome for: every line that is a JSON object with a string orderId.
        var expected = Set<String>()
        for line in lines {
            if case .object(let o)? = try? JSONValue.parse(line), let id = o["orderId"]?.stringValue {
                expected.insert("\(o["merchant"]?.stringValue ?? "default")/\(id)")
            }
        }

        let context = try ZMQContext()
        let pull = try context.socket(.pull)
        try pull.connect(outcomesEndpoint)
        let push = try context.socket(.push)
        try push.connect(intakeEndpoint)
        let receiver = try ZMQReceiver(socket: pull)
        let sender = try ZMQSender(socket: push)
        try await Task.sleep(for: .milliseconds(200))  // let both connections come up

        let start = Date()
        let total = lines.count
        let quiet = self.quiet
        let timeout = self.timeout
        let expectedKeys = expected
        let waitTerminal = self.waitTerminal
        let collector = Task { () -> [String: Int] in
            var settled = Set<String>()
            var counts: [String: Int] = [:]
            var lastProgress = Date()
            var lastArrival = Date()
            while settled.count < expectedKeys.count {
                let batch = try await receiver.nextBatch(timeoutMilliseconds: 500)
                guard let batch else { break }
                if batch.isEmpty {
                    if Date().timeIntervalSince(lastArrival) > timeout { break }
                    continue
                }
                lastArrival = Date()
                for message in batch {
                    guard let outcome = try? Outcome.parse(message.body) else { continue }
                    if !quiet { StageProcess.printLine(String(decoding: message.body, as: UTF8.self)) }
                    let key = "\(outcome.merchant)/\(outcome.orderId)"
                    let settles = outcome.status.isTerminal || (outcome.status == .pending && !waitTerminal)
                    if settles, expectedKeys.contains(key), settled.insert(key).inserted {
                        counts[outcome.status.rawValue, default: 0] += 1
                    }
                }
                if total >= 1000, Date().timeIntervalSince(lastProgress) >= 1 {
                    lastProgress = Date()
                    FileHandle.standardError.write(Data("progress: \(settled.count)/\(expectedKeys.count) orders settled\n".utf8))
                }
            }
            counts["no outcome", default: 0] += expectedKeys.count - settled.count
            return counts
        }
        let sending = Task {
            var sent = 0
            for line in lines {
                do { try await sender.send(line) } catch { break }
                sent += 1
            }
            return sent
        }
        let counts = try await collector.value
        let elapsed = Date().timeIntervalSince(start)
        receiver.stop()
        // Delivers what is queued; a send still waiting for the pipeline is released and stops.
        let report = await sender.finish(drainTimeoutMilliseconds: 2000)
        let sent = await sending.value
        await receiver.waitUntilClosed()
        context.terminate()

        let settled = counts.filter { $0.key != "no outcome" }.values.reduce(0, +)
        if sent < total || report.undelivered > 0 {
            FileHandle.standardError.write(Data("paypipe send: only \(sent - report.undelivered) of \(total) frame(s) reached \(intakeEndpoint); is the pipeline up (paypipe up)?\n".utf8))
        }
        print("---")
        print("sent \(total) frame(s), \(expected.count) order(s) with an orderId; \(settled) settled in \(String(format: "%.2f", elapsed)) s (\(String(format: "%.0f", Double(settled) / max(elapsed, 0.001))) orders/s)")
        for (status, n) in counts.sorted(by: { $0.key < $1.key }) where n > 0 { print("  \(status): \(n)") }
        if settled == 0 && expected.count > 0 { throw ExitCode(2) }
        if counts["no outcome", default: 0] > 0 { throw ExitCode(2) }
    }
}

/// Calls `stop` on the first SIGTERM or SIGINT; a second one exits at once.
func onTerminationSignal(_ stop: @escaping @Sendable () -> Void) {
    let count = SignalCount()
    for sig in [SIGTERM, SIGINT] {
        signal(sig, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
        source.setEventHandler {
            if count.increment() > 1 { exit(130) }
            stop()
        }
        source.resume()
        signalSources.append(source)
    }
}

nonisolated(unsafe) private var signalSources: [any DispatchSourceSignal] = []

private final class SignalCount: @unchecked Sendable {
    private let lock = NSLock()
    private var value = 0
    func increment() -> Int {
        lock.lock()
        defer { lock.unlock() }
        value += 1
        return value
    }
}

import Foundation
import LedgerStage
import PaypipeCore
import Supervision
import TestSupport
import Testing

/// `paypipe up` as a real process supervising stand-in children (small shell scripts named like
/// the stages, found through the hidden `--executables-dir`). Each stand-in writes its PID next
/// to itself once its SIGTERM trap is set, so the tests can check that every child is gone, and
/// appends its name to `stops.log` when it is asked to stop, so they can check the order.
@Suite("paypipe up supervising stand-in children", .serialized)
struct PaypipeUpTests {
    @Test func aChildThatNeverPrintsItsReadyLineTimesTheStartOut() async throws {
        let up = try StandInPipeline(printing: ["paypipe-sandbox": "paypipe-sandbox listening on http://127.0.0.1:9"])
        defer { up.remove() }
        let clock = ContinuousClock()
        let started = clock.now
        let process = try up.run(startTimeoutSeconds: 2)
        let exited = await waitForExit(process, within: .seconds(25))
        let elapsed = clock.now - started

        #expect(exited)
        #expect(process.exitStatus != 0)
        #expect(elapsed < .seconds(15), "took \(elapsed)")
        let reason = up.stderr.split(separator: "\n").filter { $0.contains("did not print") }
        #expect(
            reason == [
                #"paypipe: paypipe-ledger (pid \#(up.pid("paypipe-ledger") ?? -1)) did not print "paypipe-ledger ready" within 2 s; stopping the pipeline"#
            ], "\(up.stderr)")
        // The child that had started and the one that stayed silent are both stopped.
        for name in ["paypipe-sandbox", "paypipe-ledger"] {
            let pid = try #require(up.pid(name), "\(name) never ran")
            #expect(!isAlive(pid), "\(name) (pid \(pid)) is still running")
        }
        #expect(up.stopOrder == ["paypipe-ledger", "paypipe-sandbox"])
        #expect(up.pid("paypipe-signer") == nil, "nothing starts after a failed start")
    }

    @Test func sigtermStopsEveryChildInReverseStartOrder() async throws {
        let up = try StandInPipeline(printing: [
            "paypipe-sandbox": "paypipe-sandbox listening on http://127.0.0.1:9",
            "paypipe-ledger": "paypipe-ledger ready intake=tcp://127.0.0.1:9",
            "paypipe-callbacks": "paypipe-callbacks listening port=9",
        ])
        defer { up.remove() }
        let process = try up.run(startTimeoutSeconds: 20)
        let isUp = await eventually(within: .seconds(20)) { up.stdout.contains("paypipe is up") && up.allTrapsSet }
        #expect(isUp, "\(up.stdout)\n\(up.stderr)")
        // The stand-ins' ready lines are passed through.
        #expect(up.stdout.contains("paypipe-ledger ready intake=tcp://127.0.0.1:9"))
        // By default every stage but the ledger (and the sandbox, a provider's stand-in) runs at nice +5.
        #expect(
            up.nicenessAboveTheSandbox == [
                "paypipe-ledger": 0, "paypipe-signer": 5, "paypipe-submitter": 5, "paypipe-callbacks": 5, "paypipe-cleeng-poller": 5,
            ])

        process.signal(SIGTERM)
        let exited = await waitForExit(process, within: .seconds(25))
        #expect(exited)
        #expect(process.exitStatus == 0, "\(up.stderr)")
        #expect(up.stderr.contains("paypipe: stopped (signal)"))
        let names = StandInPipeline.names
        for name in names {
            let pid = try #require(up.pid(name), "\(name) never ran")
            #expect(!isAlive(pid), "\(name) (pid \(pid)) is still running")
        }
        #expect(up.stopOrder == names.reversed())
    }

    @Test(arguments: [0, 7])
    func theWorkersRunAtTheirNiceBelowTheLedger(workerNice: Int) async throws {
        let up = try StandInPipeline(printing: [
            "paypipe-sandbox": "paypipe-sandbox listening on http://127.0.0.1:9",
            "paypipe-ledger": "paypipe-ledger ready intake=tcp://127.0.0.1:9",
            "paypipe-callbacks": "paypipe-callbacks listening port=9",
        ])
        defer { up.remove() }
        let process = try up.run(startTimeoutSeconds: 20, ["--worker-nice", String(workerNice)])
        let isUp = await eventually(within: .seconds(20)) { up.stdout.contains("paypipe is up") && up.allTrapsSet }
        #expect(isUp, "\(up.stdout)\n\(up.stderr)")
        #expect(
            up.nicenessAboveTheSandbox == [
                "paypipe-ledger": 0, "paypipe-signer": workerNice, "paypipe-submitter": workerNice, "paypipe-callbacks": workerNice,
                "paypipe-cleeng-poller": workerNice,
            ])
        process.signal(SIGTERM)
        #expect(await waitForExit(process, within: .seconds(25)))
    }

    @Test func aWorkerNiceOutsideZeroToNineteenIsRefused() async throws {
        let up = try StandInPipeline(printing: [:])
        defer { up.remove() }
        let process = try up.run(startTimeoutSeconds: 2, ["--worker-nice", "20"])
        #expect(await waitForExit(process, within: .seconds(10)))
        #expect(process.exitStatus != 0)
        #expect(up.stderr.contains("--worker-nice must be 0 to 19"), "\(up.stderr)")
        #expect(up.pid("paypipe-sandbox") == nil, "nothing starts")
    }

    @Test func aSecondSignalKillsWhatIsStillRunningAndExitsAtOnce() async throws {
        let up = try StandInPipeline(
            printing: [
                "paypipe-sandbox": "paypipe-sandbox listening on http://127.0.0.1:9",
                "paypipe-ledger": "paypipe-ledger ready intake=tcp://127.0.0.1:9",
                "paypipe-callbacks": "paypipe-callbacks listening port=9",
            ],
            ignoringSIGTERM: ["paypipe-ledger"])
        defer { up.remove() }
        let process = try up.run(startTimeoutSeconds: 20)
        let isUp = await eventually(within: .seconds(20)) { up.stdout.contains("paypipe is up") && up.allTrapsSet }
        #expect(isUp, "\(up.stdout)\n\(up.stderr)")

        process.signal(SIGTERM)
        // The ledger stand-in ignores SIGTERM, so the graceful stop waits on it (10 s bound).
        let ledgerAsked = await eventually(within: .seconds(10)) { up.stopOrder.contains("paypipe-ledger") }
        #expect(ledgerAsked, "\(up.stderr)")
        process.signal(SIGINT)
        let exited = await waitForExit(process, within: .seconds(3))
        #expect(exited)
        #expect(process.exitStatus == 130)
        for name in ["paypipe-sandbox", "paypipe-ledger"] {
            let pid = try #require(up.pid(name), "\(name) never ran")
            let gone = await eventually(within: .seconds(2)) { !isAlive(pid) }
            #expect(gone, "\(name) (pid \(pid)) is still running")
        }
    }

    /// `--store postgres`: a cluster of the pipeline's own in the state directory, which the
    /// ledger is pointed at, which takes connections while the pipeline is up, and which stops
    /// with it.
    @Test(.enabled(if: FileManager.default.fileExists(atPath: "/usr/lib/postgresql")))
    func storePostgresRunsAPrivateClusterForTheLedgerAndStopsItWithThePipeline() async throws {
        let up = try StandInPipeline(printing: [
            "paypipe-sandbox": "paypipe-sandbox listening on http://127.0.0.1:9",
            "paypipe-ledger": "paypipe-ledger ready intake=tcp://127.0.0.1:9",
            "paypipe-callbacks": "paypipe-callbacks listening port=9",
        ])
        defer { up.remove() }
        let process = try up.run(startTimeoutSeconds: 20, ["--store", "postgres"])
        let isUp = await eventually(within: .seconds(90)) { up.stdout.contains("paypipe is up") && up.allTrapsSet }
        #expect(isUp, "\(up.stdout)\n\(up.stderr)")
        let cluster = up.directory.appendingPathComponent("state/postgres").path
        #expect(up.stdout.contains("paypipe: started a PostgreSQL of its own in \(cluster)"))
        let url = "postgres://paypipe@:5432/paypipe?host=\(cluster)"
        #expect(up.arguments("paypipe-ledger").hasSuffix("--store \(url)"), "\(up.arguments("paypipe-ledger"))")
        do {
            let db = try PostgresDatabase(settings: try PostgresSettings(url: url, at: "test"), logger: .init(label: "test"))
            #expect(try db.query("SELECT 1", []).first?.first == .integer(1))
        }

        process.signal(SIGTERM)
        let exited = await waitForExit(process, within: .seconds(40))
        #expect(exited)
        #expect(up.stderr.contains("paypipe: stopped the PostgreSQL in \(cluster)"), "\(up.stderr)")
        #expect(!FileManager.default.fileExists(atPath: cluster + "/data/postmaster.pid"))
    }
}

/// A directory of stand-in stage executables and a state directory for one `paypipe up`.
private struct StandInPipeline {
    static let names = ["paypipe-sandbox", "paypipe-ledger", "paypipe-signer", "paypipe-submitter", "paypipe-callbacks", "paypipe-cleeng-poller"]
    let directory: URL
    var bin: URL { directory.appendingPathComponent("bin") }
    private var stdoutFile: URL { directory.appendingPathComponent("up.stdout") }
    private var stderrFile: URL { directory.appendingPathComponent("up.stderr") }

    /// `printing`: the line a stand-in prints once started (none: it prints nothing at all).
    init(printing: [String: String], ignoringSIGTERM: Set<String> = []) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("paypipe-up-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory.appendingPathComponent("bin"), withIntermediateDirectories: true)
        for name in Self.names {
            // `sleep` runs in the background so the trap runs as soon as the signal arrives.
            let onTerm =
                ignoringSIGTERM.contains(name)
                ? "trap 'echo \(name) >> \"$dir/stops.log\"' TERM"
                : "trap 'echo \(name) >> \"$dir/stops.log\"; kill $sleeper; exit 0' TERM"
            let script = """
                #!/bin/sh
                dir="$(dirname "$0")/.."
                sleep 300 & sleeper=$!
                echo $sleeper > "$0.sleeper"
                \(onTerm)
                echo "$@" > "$0.arguments"
                echo $$ > "$0.pid"
                \(printing[name].map { "echo '\($0)'" } ?? ":")
                while kill -0 $sleeper 2>/dev/null; do wait $sleeper; done
                """
            let path = bin.appendingPathComponent(name).path
            try script.write(toFile: path, atomically: true, encoding: .utf8)
            try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: path)
        }
    }

    func run(startTimeoutSeconds: Double, _ extraArguments: [String] = []) throws -> ChildProcess {
        let paypipe = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("paypipe")
        guard FileManager.default.isExecutableFile(atPath: paypipe.path) else {
            throw StandInError("\(paypipe.path) is missing: run `swift build` before `swift test`")
        }
        return try ChildProcess(
            [
                paypipe.path, "up", "--state-dir", directory.appendingPathComponent("state").path,
                "--executables-dir", bin.path, "--start-timeout", String(startTimeoutSeconds),
            ] + extraArguments, stdout: .file(stdoutFile.path, append: false), stderr: .file(stderrFile.path, append: false))
    }

    var stdout: String { (try? String(contentsOf: stdoutFile, encoding: .utf8)) ?? "" }
    var stderr: String { (try? String(contentsOf: stderrFile, encoding: .utf8)) ?? "" }

    func pid(_ name: String) -> Int32? { number(in: "\(name).pid") }

    /// The arguments a stand-in was started with, space separated.
    func arguments(_ name: String) -> String {
        ((try? String(contentsOf: bin.appendingPathComponent("\(name).arguments"), encoding: .utf8)) ?? "").trimmingCharacters(in: .newlines)
    }

    /// Each stage's nice value above the sandbox's (its main thread's). `paypipe up`
    /// starts the sandbox at its own nice value; the test's is no reference, since on Linux a
    /// nice value is a thread's. (Under a test runner at nice 15 or more the kernel would cap
    /// the workers' at 19.)
    var nicenessAboveTheSandbox: [String: Int] {
        func nice(_ name: String) -> Int? {
            guard let pid = pid(name) else { return nil }
            return ProcessThread.all(of: pid).first { $0.id == pid }?.nice
        }
        guard let sandbox = nice("paypipe-sandbox") else { return [:] }
        var above: [String: Int] = [:]
        for name in Self.names where name != "paypipe-sandbox" { above[name] = nice(name).map { $0 - sandbox } }
        return above
    }

    /// Every stand-in has started and will notice SIGTERM: "paypipe is up" comes right after the
    /// last spawn, possibly before that script has run a line.
    var allTrapsSet: Bool { Self.names.allSatisfy { pid($0) != nil } }

    private func number(in file: String) -> Int32? {
        (try? String(contentsOf: bin.appendingPathComponent(file), encoding: .utf8))
            .flatMap { Int32($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
    }

    /// The stand-ins that were asked to stop, in the order they were asked.
    var stopOrder: [String] {
        ((try? String(contentsOf: directory.appendingPathComponent("stops.log"), encoding: .utf8)) ?? "")
            .split(separator: "\n").map(String.init)
    }

    func remove() {
        // Stand-ins that outlived a failing test, and the sleeps of killed ones: stopped by the
        // PIDs they wrote.
        for name in Self.names {
            for pid in [pid(name), number(in: "\(name).sleeper")].compactMap({ $0 }) where isAlive(pid) { kill(pid, SIGKILL) }
        }
        try? FileManager.default.removeItem(at: directory)
    }
}

private struct StandInError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Running, and not a zombie waiting for a parent that has gone.
private func isAlive(_ pid: Int32) -> Bool {
    guard kill(pid, 0) == 0 else { return false }
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
        let afterName = stat.range(of: ") ", options: .backwards)
    else { return true }
    return stat[afterName.upperBound...].first != "Z"
}

import Foundation
import Supervision
import Testing

@Suite("ChildProcess: spawn, ready line, stop, reap")
struct ChildProcessTests {
    @Test func theReadyLineIsTheFirstWholeLineWithTheMarkerAndTheExitStatusFollows() async throws {
        let child = try ChildProcess(
            ["/bin/sh", "-c", "printf 'starting\\nlistening port='; sleep 0.2; printf '4711\\nmore\\n'; exit 3"], stdout: .readyLine(),
            readyMarker: "listening")
        #expect(await child.waitForLine(within: .seconds(10)) == .ready("listening port=4711"))
        #expect(await child.waitForExit(within: .seconds(10)) == 3)
        #expect(!child.isRunning)
    }

    @Test func aChildThatEndsWithoutItsReadyLineSaysSoWithItsStatus() async throws {
        let child = try ChildProcess(["/bin/sh", "-c", "echo nothing here; exit 7"], stdout: .readyLine(), readyMarker: "ready")
        #expect(await child.waitForLine(within: .seconds(10)) == .ended)
        #expect(await child.waitForExit(within: .seconds(10)) == 7)
        #expect(child.printed == "nothing here\n")
    }

    @Test func aSignalEndsItWith128PlusTheSignal() async throws {
        let child = try ChildProcess(["/bin/sleep", "30"])
        child.signal(SIGKILL)
        #expect(await child.waitForExit(within: .seconds(10)) == 128 + SIGKILL)
        // Reaped once: a second signal goes nowhere.
        child.signal(SIGKILL)
    }

    /// Swift's concurrency threads block nearly every signal, and a child inherits its spawner's
    /// mask: spawned from one, a shell script would never see the SIGTERM that stops it.
    @Test func aChildSpawnedFromATaskSeesSigtermAndStopsWithinItsGrace() async throws {
        let child = try ChildProcess(
            ["/bin/sh", "-c", "trap 'exit 42' TERM; echo ready; while :; do sleep 0.05; done"], stdout: .readyLine(), readyMarker: "ready")
        #expect(await child.waitForLine(within: .seconds(10)) == .ready("ready"))
        let started = ContinuousClock.now
        #expect(await child.stop(grace: .seconds(20)) == 42)
        #expect(ContinuousClock.now - started < .seconds(10))
    }

    @Test func aChildThatIgnoresSigtermIsKilledOnceItsGraceHasPassed() async throws {
        let child = try ChildProcess(
            ["/bin/sh", "-c", "trap '' TERM; echo ready; while :; do sleep 0.05; done"], stdout: .readyLine(), readyMarker: "ready")
        #expect(await child.waitForLine(within: .seconds(10)) == .ready("ready"))
        #expect(await child.stop(grace: .milliseconds(300)) == 128 + SIGKILL)
    }

    @Test func noDescriptorOfThisProcessLivesOnInTheChild() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("paypipe-fd-\(UUID().uuidString)").path
        // Opened without O_CLOEXEC, as another thread's file or socket may be.
        let fd = open(path, O_WRONLY | O_CREAT, 0o600)
        defer {
            close(fd)
            unlink(path)
        }
        #expect(fd > 2)
        let listing = try ChildProcess.run(["/bin/ls", "/proc/self/fd"])
        #expect(listing.status == 0)
        let descriptors = listing.output.split(separator: "\n").compactMap { Int32($0) }
        // ls's own: the three standard streams and the directory it reads, at most.
        #expect(!descriptors.contains(fd), "inherited: \(descriptors)")
        #expect(descriptors.filter { $0 > 2 }.count <= 2, "\(descriptors)")
    }

    @Test func outputAfterTheReadyLineGoesWhereItWasAsked() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("paypipe-out-\(UUID().uuidString)").path
        defer { unlink(path) }
        let child = try ChildProcess(
            ["/bin/sh", "-c", "echo before; echo ready; echo after"], stdout: .readyLine(afterReady: .file(path, append: false)),
            readyMarker: "ready")
        #expect(await child.waitForExit(within: .seconds(10)) == 0)
        #expect(child.waitForEndOfOutput(within: .seconds(10)))
        #expect((try? String(contentsOfFile: path, encoding: .utf8)) == "before\nready\nafter\n")
    }

    @Test func aProgramThatCannotStartIsAnErrorNamingIt() {
        #expect(throws: ChildProcessError.self) { try ChildProcess(["/nonexistent/paypipe-stage"]) }
    }
}

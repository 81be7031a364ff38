import Foundation
import FuzzTargets
import TestSupport
import Testing

/// Every fuzz target's seeds and every input kept in `Tests/Fuzz/corpus/TARGET` (inputs the fuzzer
/// found, kept so that they stay fixed) replayed through `paypipe-fuzz`, a process of its own, so a
/// crash fails one test and names its input instead of stopping the suite.
@Suite("Fuzz corpus replay")
struct FuzzCorpusTests {
    static let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fuzz/corpus")

    @Test(arguments: FuzzTarget.allCases)
    func everyKeptInputRunsWithoutACrash(_ target: FuzzTarget) async throws {
        let kept = Self.corpus.appendingPathComponent(target.rawValue)
        let paths = FileManager.default.fileExists(atPath: kept.path) ? [kept.path] : []
        let (status, output) = try await Self.replay(target, paths)
        #expect(status == 0, "\(output.suffix(2000))")
        #expect(output.contains(" inputs, none crashed"), "\(output.suffix(500))")
    }

    /// The authentic-callbacks target signs what the fuzzer writes; if its signing drifted from
    /// what a route checks, every input would stop at authentication and the target would fuzz
    /// nothing past it. Each route's seeds must be believed and settle an outcome.
    @Test func everyAuthenticCallbackSeedIsBelieved() async throws {
        let (status, output) = try await Self.run(["answers", FuzzTarget.authenticCallbacks.rawValue])
        #expect(status == 0, "\(output.suffix(2000))")
        let answers = output.split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
        #expect(Set(answers.compactMap(\.first)) == ["phonepe", "nets", "trustpayments_notification", "trustpayments_jwt", "viva"], "\(output)")
        for answer in answers {
            #expect(answer.dropFirst() == ["200", "applied"], "\(answer.joined(separator: " "))")
        }
    }

    /// The poll-answers seeds, each on time and after its deadline: a grant succeeds, "not yet"
    /// and error 14 run to the deadline, error 4 ends at once. A harness that no longer reached
    /// the receipt's end would fuzz nothing of the poller.
    @Test func everyPollAnswerSeedEndsItsReceipt() async throws {
        let (status, output) = try await Self.run(["answers", FuzzTarget.pollAnswers.rawValue])
        #expect(status == 0, "\(output.suffix(2000))")
        let ends = ["succeeded", "failed ACCESS_NOT_GRANTED", "failed CLEENG_OFFER_NOT_FOUND", "failed ACCESS_NOT_GRANTED"]
        #expect(output.split(separator: "\n").map(String.init) == ends.flatMap { [$0, $0] })
    }

    /// A crash in a target fails the replay and names the input that caused it (the canary
    /// target traps on the bytes `canary`).
    @Test func aCrashFailsTheReplayAndNamesItsInput() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("fuzz-replay-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let input = directory.appendingPathComponent("crash-1")
        try Data("canary".utf8).write(to: input)
        let (status, output) = try await Self.replay(.canary, [input.path])
        #expect(status != 0)
        #expect(output.contains("replaying \(input.path)"))
        #expect(!output.contains("none crashed"))
    }

    static func replay(_ target: FuzzTarget, _ paths: [String]) async throws -> (Int32, String) {
        try await run(["replay", target.rawValue] + paths)
    }

    /// Runs `paypipe-fuzz`; what it wrote to stdout and stderr, one after the other.
    static func run(_ arguments: [String]) async throws -> (Int32, String) {
        var environment = ProcessInfo.processInfo.environment
        environment["SWIFT_BACKTRACE"] = "enable=no"
        let run = try await runCapturing(
            PipelineHarness.buildDirectory().appendingPathComponent("paypipe-fuzz").path, arguments, environment: environment)
        return (run.status, run.output + run.errors)
    }
}

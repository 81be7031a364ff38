import Logging
import StageRuntime
import Testing

@testable import LedgerStage

/// The ledger's store retries run for a window of time since the first failure of a run, with
/// pauses that double up to a cap, spread by jitter.
@Suite("Store retry: a window, backoff and jitter")
struct StoreRetryTests {
    struct Refused: Error {}

    /// Whole milliseconds: the jitter's product need not land on a whole nanosecond.
    static func milliseconds(_ pause: Duration?) -> Int64? {
        pause.map { $0.components.seconds * 1000 + Int64(($0.components.attoseconds + 500_000_000_000_000) / 1_000_000_000_000_000) }
    }

    @Test func pausesDoubleUpToTheCapAndJitterSpreadsThemAboveTheFirstDelay() {
        let policy = StoreRetry.Policy(window: .seconds(60))
        let highest = (1...8).map { Self.milliseconds(policy.pause(afterFailure: $0, elapsed: .zero, jitter: 1)) }
        #expect(highest == [50, 100, 200, 400, 800, 1600, 2000, 2000])
        #expect((1...8).allSatisfy { Self.milliseconds(policy.pause(afterFailure: $0, elapsed: .zero, jitter: 0)) == 50 })
        #expect(Self.milliseconds(policy.pause(afterFailure: 9, elapsed: .seconds(30), jitter: 0.5)) == 1025)
    }

    @Test func theWindowEndsTheRetriesAndNoPauseReachesPastIt() {
        let policy = StoreRetry.Policy(window: .seconds(60))
        #expect(policy.pause(afterFailure: 40, elapsed: .seconds(60), jitter: 0) == nil)
        #expect(policy.pause(afterFailure: 1, elapsed: .seconds(61), jitter: 0) == nil)
        #expect(Self.milliseconds(policy.pause(afterFailure: 40, elapsed: .milliseconds(59_900), jitter: 1)) == 100)
    }

    /// With tries that take no time, the retries last the whole window: a server that is away
    /// for a failover (tens of seconds) is waited for, not given up on after seconds.
    @Test func theRetriesLastTheWholeWindow() {
        let policy = StoreRetry.Policy(window: .seconds(60))
        var elapsed = Duration.zero
        var failures = 0
        while let pause = policy.pause(afterFailure: failures + 1, elapsed: elapsed, jitter: 0.5) {
            failures += 1
            elapsed += pause
        }
        #expect(elapsed == .seconds(60))
        #expect(failures > 30, "\(failures) tries")
    }

    static func retrying(window: Duration, metrics: StageMetrics) -> StoreRetry {
        var policy = StoreRetry.Policy(window: window)
        policy.firstDelay = .milliseconds(10)
        policy.maxDelay = .milliseconds(50)
        policy.notReadyBeforeExit = .zero
        return StoreRetry(policy: policy, metrics: metrics, logger: Logger(label: "test"), jitter: { 0.5 })
    }

    @Test func aStoreBackWithinTheWindowIsNotReadyMeanwhileAndReadyAfter() throws {
        let metrics = StageMetrics()
        let retrying = Self.retrying(window: .seconds(10), metrics: metrics)
        let clock = ContinuousClock()
        let back = clock.now + .milliseconds(300)
        var tries = 0
        var reasons: [String] = []
        let value = try retrying.run("a test") { () throws -> Int in
            tries += 1
            if tries > 1, let reason = metrics.notReady { reasons.append(reason) }
            guard clock.now >= back else { throw Refused() }
            return 7
        }
        #expect(value == 7 && tries > 2)
        #expect(reasons.count == tries - 1 && reasons.allSatisfy { $0.contains("the ledger store is failing (a test), retrying") })
        #expect(metrics.notReady == nil)
    }

    @Test func aStoreFailedForTheWholeWindowIsGivenUpOnceAndForGood() {
        let metrics = StageMetrics()
        let retrying = Self.retrying(window: .milliseconds(400), metrics: metrics)
        let clock = ContinuousClock()
        let started = clock.now
        var tries = 0
        #expect(throws: LedgerStoreFailure.self) {
            try retrying.run("a test") { () throws -> Int in
                tries += 1
                throw Refused()
            }
        }
        #expect(clock.now - started >= .milliseconds(400))
        #expect(tries > 5)
        #expect(metrics.notReady?.contains("failed \(tries) times in a row over 0.4 s (a test)") == true, "\(metrics.notReady ?? "ready")")
        // Given up: the next transaction is not tried at all.
        var tried = false
        #expect(throws: LedgerStoreFailure.self) { try retrying.run("another") { tried = true } }
        #expect(!tried)
    }
}

import Logging
import PaypipeCore
import Prometheus
import StageRuntime
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The store failed for the whole retry window: the ledger stops and exits with `exitStatus`, so
/// that its supervisor restarts it.
package struct LedgerStoreFailure: StageExit, CustomStringConvertible {
    /// EX_TEMPFAIL (sysexits.h): a temporary failure, worth a restart.
    package static let status: Int32 = 75
    package var exitStatus: Int32 { Self.status }
    let operation: String
    let attempts: Int
    /// From the first failure of the run to the last; nil for a store that could not be opened.
    var failingFor: Duration? = nil
    let reason: String
    package var description: String {
        let tenths = failingFor.map { $0.components.seconds * 10 + $0.components.attoseconds / 100_000_000_000_000_000 }
        let over = tenths.map { " over \($0 / 10).\($0 % 10) s" } ?? ""
        return "the ledger store failed \(attempts) times in a row\(over) (\(operation)): \(reason)"
    }
}

/// Runs the ledger's store transactions, retrying a failed one for a window of time. The caller
/// keeps what it read from ZeroMQ until a transaction commits, so a store that is away for less
/// than the window (a lock held from outside, a database server failing over to its standby)
/// loses nothing and costs no restart; one that stays failed makes the ledger stop taking work,
/// report not-ready and exit.
final class StoreRetry: Sendable {
    struct Policy: Sendable {
        /// How long after the first failure of a run of failures the ledger keeps trying
        /// (`store.retryWindowMs`).
        var window: Duration
        var firstDelay: Duration = .milliseconds(50)
        /// The longest pause between two tries: a store that is back is found again soon.
        var maxDelay: Duration = .seconds(2)
        /// How long `/readyz` reports the failure before the process exits, so a probe sees why.
        var notReadyBeforeExit: Duration = .seconds(1)

        init(window: Duration) { self.window = window }

        /// The policy `store` asks for: its configured window, else its backend's default.
        init(_ store: StoreSettings, windowMilliseconds: Int64?) {
            self.init(window: .milliseconds(windowMilliseconds ?? store.defaultRetryWindowMilliseconds))
        }

        /// The pause before the next try after the `failures`th failure in a row, `elapsed` after
        /// the first one; nil once the window has passed. The pauses double up to `maxDelay`,
        /// each drawn between `firstDelay` and that ceiling by `jitter` (from 0 up to 1), so
        /// ledgers that lost the same server at once do not all come back at the same moment.
        /// No pause reaches past the window: the last try is made as it ends.
        func pause(afterFailure failures: Int, elapsed: Duration, jitter: Double) -> Duration? {
            guard elapsed < window else { return nil }
            var ceiling = firstDelay
            for _ in 1..<max(1, failures) where ceiling < maxDelay { ceiling *= 2 }
            ceiling = min(ceiling, maxDelay)
            let pause = firstDelay + (ceiling - firstDelay) * min(max(jitter, 0), 1)
            return min(pause, window - elapsed)
        }
    }

    let policy: Policy
    let metrics: StageMetrics
    let logger: Logger
    /// Draws the jitter of each pause, from 0 up to 1.
    private let jitter: @Sendable () -> Double
    private let failure = Mutex<LedgerStoreFailure?>(nil)

    /// Created with the ledger, so that it reads 0 before the first failure.
    private let errors: Counter

    init(policy: Policy, metrics: StageMetrics, logger: Logger, jitter: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) }) {
        errors = metrics.counter(
            "paypipe_store_errors_total",
            help: "Ledger store transactions that failed (each is retried for store.retryWindowMs, then the ledger exits)")
        self.policy = policy
        self.metrics = metrics
        self.logger = logger
        self.jitter = jitter
    }

    /// `body`'s value once it succeeds; every failure is followed by a growing pause, never a
    /// spin. It blocks the calling thread, the ledger's loop, which has nothing else to do
    /// meanwhile: what it read waits in memory for the store.
    func run<T>(_ operation: String, _ body: () throws -> T) throws -> T {
        let clock = ContinuousClock()
        var failures = 0
        var firstFailure = clock.now
        while true {
            if let failure = failure.withLock({ $0 }) { throw failure }
            do {
                let value = try body()
                if failures > 0 {
                    metrics.setNotReady(nil)
                    logger.notice(
                        "the ledger store recovered",
                        metadata: [
                            "operation": "\(operation)", "attempts": "\(failures + 1)", "failingFor": "\(clock.now - firstFailure)",
                        ])
                }
                return value
            } catch {
                // SQLite's messages name the failure (locked, full, I/O), never a row's contents,
                // and PostgreSQL's are kept to the message and SQLSTATE.
                errors.increment()
                failures += 1
                if failures == 1 { firstFailure = clock.now }
                let elapsed = clock.now - firstFailure
                guard let pause = policy.pause(afterFailure: failures, elapsed: elapsed, jitter: jitter()) else {
                    try giveUp(operation, error, attempts: failures, failingFor: elapsed)
                }
                metrics.setNotReady("the ledger store is failing (\(operation)), retrying: \(error)")
                logger.warning(
                    "a ledger store transaction failed; retrying",
                    metadata: [
                        "operation": "\(operation)", "attempt": "\(failures)", "failingFor": "\(elapsed)", "error": "\(error)",
                    ])
                sleepBlocking(pause)
            }
        }
    }

    private func giveUp(_ operation: String, _ error: any Error, attempts: Int, failingFor: Duration) throws -> Never {
        let failure = LedgerStoreFailure(operation: operation, attempts: attempts, failingFor: failingFor, reason: "\(error)")
        let first = self.failure.withLock { recorded in
            defer { if recorded == nil { recorded = failure } }
            return recorded == nil
        }
        if first {
            metrics.setNotReady(failure.description)
            logger.critical(
                "stopping: no more work is taken; exiting for a restart",
                metadata: [
                    "reason": "\(failure)", "exitStatus": "\(LedgerStoreFailure.status)",
                ])
            sleepBlocking(policy.notReadyBeforeExit)
        }
        throw failure
    }
}

/// Sleeps the calling thread (never a Swift concurrency thread: the ledger's loop).
func sleepBlocking(_ duration: Duration) {
    let (seconds, attoseconds) = duration.components
    guard seconds > 0 || attoseconds > 0 else { return }
    var request = timespec(tv_sec: Int(seconds), tv_nsec: Int(attoseconds / 1_000_000_000))
    var left = timespec()
    while nanosleep(&request, &left) != 0, errno == EINTR { request = left }
}

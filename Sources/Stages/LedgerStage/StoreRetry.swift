import Logging
import Prometheus
import StageRuntime
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The store failed past every retry: the ledger stops and exits with `exitStatus`, so that its
/// supervisor restarts it (a locked or full store is often gone by then).
package struct LedgerStoreFailure: StageExit, CustomStringConvertible {
    /// EX_TEMPFAIL (sysexits.h): a temporary failure, worth a restart.
    package static let status: Int32 = 75
    package var exitStatus: Int32 { Self.status }
    let operation: String
    let attempts: Int
    let reason: String
    package var description: String { "the ledger store failed \(attempts) times in a row (\(operation)): \(reason)" }
}

/// Runs the ledger's store transactions with a bounded retry. The caller keeps what it read from
/// ZeroMQ until a transaction commits, so a store that is briefly locked or full loses nothing;
/// one that stays failed makes the ledger stop taking work, report not-ready and exit.
final class StoreRetry: Sendable {
    struct Policy: Sendable {
        /// Each try may itself wait the connection's busy timeout for a lock.
        var attempts = 5
        var firstDelay: Duration = .milliseconds(50)
        var maxDelay: Duration = .seconds(1)
        /// How long `/healthz` reports the failure before the process exits, so a probe sees why.
        var notReadyBeforeExit: Duration = .seconds(1)

        /// A database server is away while it restarts, longer than a local file stays locked:
        /// the ledger waits about as long for it, holding what it read, before it exits for a
        /// restart. Each try may itself wait the server's lock timeout.
        static var databaseServer: Policy {
            var policy = Policy()
            policy.attempts = 12
            return policy
        }
    }

    let policy: Policy
    let metrics: StageMetrics
    let logger: Logger
    private let failure = Mutex<LedgerStoreFailure?>(nil)

    /// Created with the ledger, so that it reads 0 before the first failure.
    private let errors: Counter

    init(policy: Policy = Policy(), metrics: StageMetrics, logger: Logger) {
        errors = metrics.counter("paypipe_store_errors_total", help: "Ledger store transactions that failed (each is retried, then the ledger exits)")
        self.policy = policy
        self.metrics = metrics
        self.logger = logger
    }

    /// `body`'s value once it succeeds; every failure is followed by a growing pause, never a
    /// spin. It blocks the calling thread, the ledger's loop, which has nothing else to do
    /// meanwhile: what it read waits in memory for the store.
    func run<T>(_ operation: String, _ body: () throws -> T) throws -> T {
        var (delay, attempt) = (policy.firstDelay, 0)
        while true {
            attempt += 1
            if let failure = failure.withLock({ $0 }) { throw failure }
            do {
                let value = try body()
                if attempt > 1 {
                    metrics.setNotReady(nil)
                    logger.notice("the ledger store recovered", metadata: ["operation": "\(operation)", "attempts": "\(attempt)"])
                }
                return value
            } catch {
                // SQLite's messages name the failure (locked, full, I/O), never a row's contents.
                errors.increment()
                guard attempt < policy.attempts else { try giveUp(operation, error) }
                metrics.setNotReady("the ledger store is failing (\(operation)), retrying: \(error)")
                logger.warning(
                    "a ledger store transaction failed; retrying",
                    metadata: [
                        "operation": "\(operation)", "attempt": "\(attempt)", "error": "\(error)",
                    ])
                sleepBlocking(delay)
                delay = min(delay * 2, policy.maxDelay)
            }
        }
    }

    private func giveUp(_ operation: String, _ error: any Error) throws -> Never {
        let failure = LedgerStoreFailure(operation: operation, attempts: policy.attempts, reason: "\(error)")
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

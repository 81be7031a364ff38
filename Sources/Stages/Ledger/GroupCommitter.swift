import Synchronization

/// The ledger's one writer. Work from the intake, results and request readers waits here while
/// a transaction commits, and the next transaction takes all of it (a group commit): the readers
/// share one fsync instead of each queueing a transaction of its own behind the store.
final class GroupCommitter: Sendable {
    private struct Waiting: Sendable {
        var work: [LedgerCore.Work]
        var done: CheckedContinuation<[LedgerService.Turn], any Error>
    }

    private struct State {
        var waiting: [Waiting] = []
        /// Set once the writer has stopped: later work fails at once instead of waiting forever.
        var stopped: (any Error)?
    }

    private let state = Mutex(State())
    /// Transactions committed so far, each holding every piece of work that waited for it.
    let groupsCommitted = Atomic<Int>(0)
    private let wakeups: AsyncStream<Void>
    private let wake: AsyncStream<Void>.Continuation

    init() {
        (wakeups, wake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    /// One `Turn` per piece of `work`, once the transaction holding all of it has committed.
    func commit(_ work: [LedgerCore.Work]) async throws -> [LedgerService.Turn] {
        try await withCheckedThrowingContinuation { done in
            let stopped = state.withLock { state -> (any Error)? in
                if state.stopped == nil { state.waiting.append(Waiting(work: work, done: done)) }
                return state.stopped
            }
            if let stopped { done.resume(throwing: stopped) } else { wake.yield() }
        }
    }

    /// Callers waiting for the next transaction.
    var waitingCount: Int { state.withLock { $0.waiting.count } }

    /// No more work is coming: `run` returns once what waits is committed.
    func finish() {
        wake.finish()
    }

    /// Commits what waits, group by group, until `finish` (or cancellation). A store that fails
    /// past `retrying`'s attempts fails every waiting reader with it, and `run` throws it.
    func run(_ core: LedgerService.Core, retrying: StoreRetry) async throws {
        var failure: any Error = CancellationError()
        defer {
            let left = state.withLock { state in
                state.stopped = failure
                defer { state.waiting = [] }
                return state.waiting
            }
            for waiting in left { waiting.done.resume(throwing: failure) }
        }
        for await _ in wakeups {
            while true {
                let group = state.withLock { state in
                    defer { state.waiting.removeAll(keepingCapacity: true) }
                    return state.waiting
                }
                if group.isEmpty { break }
                do {
                    var turns = try await retrying.run("a store transaction") { try await core.commit(group.flatMap(\.work)) }[...]
                    groupsCommitted.add(1, ordering: .relaxed)
                    for waiting in group {
                        waiting.done.resume(returning: Array(turns.prefix(waiting.work.count)))
                        turns = turns.dropFirst(waiting.work.count)
                    }
                } catch {
                    failure = error
                    for waiting in group { waiting.done.resume(throwing: error) }
                    throw error
                }
            }
        }
    }
}

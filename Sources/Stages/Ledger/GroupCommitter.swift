import Synchronization

/// The ledger's one writer at a time. Work from the intake, results and request readers waits
/// here while a transaction commits, and the next transaction takes all of it (a group commit):
/// the readers share one fsync instead of each queueing a transaction of its own behind the store.
///
/// A reader that finds no transaction under way commits its work itself, with whatever waits,
/// on its own task. Handing it to the writer task and back cost two thread wake-ups per
/// transaction, three transactions per order, which at a low rate were a good part of an
/// order's latency. Work that arrives while a transaction commits waits for the writer task,
/// which the committing reader wakes when it is done, so no reader is kept from its socket to
/// serve the others.
final class GroupCommitter: Sendable {
    private struct Waiting: Sendable {
        var work: [LedgerCore.Work]
        var done: CheckedContinuation<[LedgerService.Turn], any Error>
    }

    private struct State {
        var waiting: [Waiting] = []
        /// A transaction is under way (a reader's or the writer task's).
        var committing = false
        /// Set once the store failed for good or the writer has stopped: later work fails at
        /// once instead of waiting forever.
        var stopped: (any Error)?

        /// Takes what waits for a transaction about to start; nil while one is under way.
        mutating func begin() -> [Waiting]? {
            guard !committing else { return nil }
            committing = true
            defer { waiting.removeAll(keepingCapacity: true) }
            return waiting
        }

        /// The transaction is over; true when work waits for the next one.
        mutating func end() -> Bool {
            committing = false
            return !waiting.isEmpty
        }
    }

    private let core: LedgerService.Core
    private let retrying: StoreRetry
    private let state = Mutex(State())
    /// Transactions committed so far, each holding every piece of work that waited for it.
    let groupsCommitted = Atomic<Int>(0)
    private let wakeups: AsyncStream<Void>
    private let wake: AsyncStream<Void>.Continuation

    init(core: LedgerService.Core, retrying: StoreRetry) {
        self.core = core
        self.retrying = retrying
        (wakeups, wake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    /// One `Turn` per piece of `work`, once the transaction holding all of it has committed.
    func commit(_ work: [LedgerCore.Work]) async throws -> [LedgerService.Turn] {
        let others = try state.withLock { state throws -> [Waiting]? in
            if let stopped = state.stopped { throw stopped }
            return state.begin()
        }
        guard let others else {
            return try await withCheckedThrowingContinuation { done in
                let stopped = state.withLock { state -> (any Error)? in
                    if state.stopped == nil { state.waiting.append(Waiting(work: work, done: done)) }
                    return state.stopped
                }
                if let stopped { done.resume(throwing: stopped) } else { wake.yield() }
            }
        }
        return Array(try await commitGroup(others, with: work))
    }

    /// Runs `body` as if a transaction were under way, so that work committed meanwhile waits
    /// for the writer task (for the tests of that path).
    func whileCommitting<T>(_ body: () async throws -> T) async rethrows -> T {
        state.withLock { $0.committing = true }
        defer { endCommitting() }
        return try await body()
    }

    /// Callers waiting for the next transaction.
    var waitingCount: Int { state.withLock { $0.waiting.count } }

    /// No more work is coming: `run` returns once what waits is committed.
    func finish() {
        wake.finish()
    }

    /// Commits what waited while another transaction was under way, group by group, until
    /// `finish` (or cancellation). A store that fails past `retrying`'s attempts fails every
    /// waiting reader with it, and `run` throws it.
    func run() async throws {
        defer { stop(CancellationError()) }
        for await _ in wakeups {
            while let group = takeWaitingGroup() {
                _ = try await commitGroup(group, with: [])
            }
        }
    }

    private func takeWaitingGroup() -> [Waiting]? {
        state.withLock { state in
            guard state.stopped == nil, !state.waiting.isEmpty else { return nil }
            return state.begin()
        }
    }

    /// Commits `group`'s work and then `own` in one transaction (the caller holds `committing`),
    /// answers the group and returns `own`'s turns, which come last.
    private func commitGroup(_ group: [Waiting], with own: [LedgerCore.Work]) async throws -> ArraySlice<LedgerService.Turn> {
        var turns: ArraySlice<LedgerService.Turn>
        do {
            turns = try await retrying.run("a store transaction") { try await core.commit(group.flatMap(\.work) + own) }[...]
        } catch {
            for waiting in group { waiting.done.resume(throwing: error) }
            stop(error)
            throw error
        }
        groupsCommitted.add(1, ordering: .relaxed)
        for waiting in group {
            waiting.done.resume(returning: Array(turns.prefix(waiting.work.count)))
            turns = turns.dropFirst(waiting.work.count)
        }
        endCommitting()
        return turns
    }

    /// Ends the transaction under way and wakes the writer task for what waited meanwhile.
    private func endCommitting() {
        if state.withLock({ $0.end() }) { wake.yield() }
    }

    /// The first failure stays: every waiting reader fails with it, and so does later work.
    private func stop(_ failure: any Error) {
        let left = state.withLock { state in
            if state.stopped == nil { state.stopped = failure }
            defer { state.waiting = [] }
            return state.waiting
        }
        for waiting in left { waiting.done.resume(throwing: failure) }
    }
}

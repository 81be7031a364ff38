/// A bounded queue from one dedicated thread to async consumers. The thread blocks when the
/// queue holds `capacity` elements or more; a consumer suspends when it is empty.
final class Handoff<Element: Sendable>: @unchecked Sendable {
    private struct State {
        var batches: [[Element]] = []
        var buffered = 0
        var waiter: CheckedContinuation<[Element]?, any Error>?
        /// Identifies the registered waiter, so a timeout only ever releases its own.
        var waiterToken: UInt64 = 0
        var stopping = false
        var finished = false
        var failure: ZMQError?
        var finishWaiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Locked(State())
    private let capacity: Int

    init(capacity: Int) { self.capacity = capacity }

    var isStopping: Bool { state.withLock { $0.stopping } }

    /// Called by the thread. Blocks while the queue is full; false once stopped.
    func put(_ batch: [Element]) -> Bool {
        let waiter: CheckedContinuation<[Element]?, any Error>? = state.wait(until: { s in s.buffered < self.capacity || s.stopping }) { s in
            if s.stopping { return nil }
            if let waiter = s.waiter {
                s.waiter = nil
                return waiter
            }
            s.batches.append(batch)
            s.buffered += batch.count
            return nil
        }
        if let waiter {
            waiter.resume(returning: batch)
            return true
        }
        return !isStopping
    }

    /// Called by a consumer: the next batch, or nil when finished and drained. A cancelled
    /// consumer gets nil too; nothing is lost, since a batch is only handed to a waiter that is
    /// still registered.
    func take(timeoutMilliseconds: Int64? = nil) async throws(ZMQError) -> [Element]? {
        if let ready = takeReady() { return ready.isEmpty ? nil : ready }
        var timer: Task<Void, Never>?
        defer { timer?.cancel() }
        do {
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { continuation in
                    let immediate: Result<[Element]?, ZMQError>? = state.withLock { s in
                        if !s.batches.isEmpty {
                            let batch = s.batches.removeFirst()
                            s.buffered -= batch.count
                            return .success(batch)
                        }
                        if s.finished { return s.failure.map { .failure($0) } ?? .success(nil) }
                        if Task.isCancelled { return .success(nil) }
                        s.waiter = continuation
                        s.waiterToken &+= 1
                        if let timeoutMilliseconds {
                            let token = s.waiterToken
                            timer = Task { [self] in
                                try? await Task.sleep(for: .milliseconds(timeoutMilliseconds))
                                releaseWaiter(token: token)
                            }
                        }
                        return nil
                    }
                    if let immediate {
                        state.broadcast()
                        continuation.resume(with: immediate)
                    }
                }
            } onCancel: {
                let waiter = state.withLock { s in
                    defer { s.waiter = nil }
                    return s.waiter
                }
                waiter?.resume(returning: nil)
            }
        } catch let error as ZMQError {
            throw error
        } catch {
            return nil
        }
    }

    /// A timed-out waiter gets an empty batch, unless a batch or the end reached it first:
    /// both happen under the lock, so a batch is never handed to a waiter that has gone.
    private func releaseWaiter(token: UInt64) {
        let waiter = state.withLock { s -> CheckedContinuation<[Element]?, any Error>? in
            guard s.waiterToken == token, let waiter = s.waiter else { return nil }
            s.waiter = nil
            return waiter
        }
        waiter?.resume(returning: [])
    }

    /// A batch if one is ready, an empty array when finished, nil when the caller must wait.
    private func takeReady() -> [Element]? {
        let result: [Element]? = state.withLock { s in
            if !s.batches.isEmpty {
                let batch = s.batches.removeFirst()
                s.buffered -= batch.count
                return batch
            }
            if s.finished && s.failure == nil { return [] }
            return nil
        }
        if let result, !result.isEmpty { state.broadcast() }
        return result
    }

    func stop() {
        state.withLock { $0.stopping = true }
        state.broadcast()
    }

    /// Called by the thread when it has closed its socket.
    func finish(_ failure: ZMQError?) {
        let (waiter, finishWaiters) = state.withLock { s in
            s.finished = true
            s.failure = failure
            let waiter = s.batches.isEmpty ? s.waiter : nil
            if waiter != nil { s.waiter = nil }
            let finishWaiters = s.finishWaiters
            s.finishWaiters = []
            return (waiter, finishWaiters)
        }
        if let waiter {
            if let failure { waiter.resume(throwing: failure) } else { waiter.resume(returning: nil) }
        }
        for w in finishWaiters { w.resume() }
    }

    func waitUntilFinished() async {
        await state.suspend(until: { $0.finished }, park: { $0.finishWaiters.append($1) })
    }
}

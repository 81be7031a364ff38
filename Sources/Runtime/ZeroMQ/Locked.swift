#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A pthread mutex and condition variable around a value. The bridges between ZeroMQ's
/// dedicated threads and Swift concurrency need a condition variable (a thread must sleep
/// when a queue is full or empty), which `Synchronization.Mutex` does not offer.
final class Locked<Value>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>
    private var value: Value

    init(_ value: Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        condition = .allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(condition, nil)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
        condition.deallocate()
    }

    func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }

    /// Waits, with the lock held around `body`, until `ready` holds or `timeoutNanoseconds` pass.
    func wait<R>(until ready: (inout Value) -> Bool, timeoutNanoseconds: Int64? = nil, _ body: (inout Value) -> R) -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        if let timeoutNanoseconds {
            var deadline = timespec()
            clock_gettime(CLOCK_REALTIME, &deadline)
            let total = Int64(deadline.tv_nsec) + timeoutNanoseconds
            deadline.tv_sec += Int(total / 1_000_000_000)
            deadline.tv_nsec = Int(total % 1_000_000_000)
            while !ready(&value) {
                if pthread_cond_timedwait(condition, mutex, &deadline) == ETIMEDOUT { break }
            }
        } else {
            while !ready(&value) { pthread_cond_wait(condition, mutex) }
        }
        return body(&value)
    }

    func broadcast() { pthread_cond_broadcast(condition) }

    /// Suspends the calling task until `isReady` holds. Otherwise `park` stores the continuation
    /// in the value (under the lock), and whoever later makes it ready resumes it.
    func suspend(until isReady: (inout Value) -> Bool, park: (inout Value, CheckedContinuation<Void, Never>) -> Void) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ready = withLock { value -> Bool in
                if isReady(&value) { return true }
                park(&value, continuation)
                return false
            }
            if ready { continuation.resume() }
        }
    }
}

import Dispatch

/// Runs `body(count)` three times and returns the fastest run's seconds, with the sum of what
/// the runs returned (printed by the caller, so that the work cannot be optimized away).
public func bestOfThree(count: Int, _ body: (Int) -> Int) -> (seconds: Double, checksum: Int) {
    var best = Double.infinity
    var checksum = 0
    for _ in 0..<3 {
        let start = monotonicNanoseconds()
        checksum &+= body(count)
        best = min(best, Double(monotonicNanoseconds() - start) / 1e9)
    }
    return (best, checksum)
}

/// `body`'s value, computed on a task that this thread waits for: the benches counted under
/// callgrind start synchronously, since valgrind 3.19 dies in an async main's start-up.
public func waitingFor<T: Sendable>(_ body: @escaping @Sendable () async -> T) -> T {
    let box = WaitBox<T>()
    Task.detached {
        box.value = await body()
        box.done.signal()
    }
    box.done.wait()
    return box.value!
}

private final class WaitBox<T>: @unchecked Sendable {
    var value: T?
    let done = DispatchSemaphore(value: 0)
}

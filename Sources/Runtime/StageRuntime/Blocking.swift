import Dispatch

/// `body`'s value, computed on a task that this thread waits for: for code that must start
/// synchronously (a fuzz target's entry point; the benches counted under callgrind, since
/// valgrind dies in an async main's start-up). Never call it from Swift's cooperative pool.
package func waitingFor<T: Sendable>(_ body: @escaping @Sendable () async -> T) -> T {
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

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

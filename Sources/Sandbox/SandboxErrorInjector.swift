import Synchronization

/// Decides which provider requests get an injected HTTP 500: the n-th request fails when a
/// SplitMix64 draw for (seed, n) falls below the rate, so a seed replays the same pattern.
package final class SandboxErrorInjector: Sendable {
    private let rate: Double
    private let seed: UInt64
    private let counter = Atomic<UInt64>(0)

    package init(rate: Double, seed: UInt64) {
        self.rate = rate
        self.seed = seed
    }

    package func shouldFail() -> Bool {
        if rate <= 0 { return false }
        if rate >= 1 { return true }
        let n = counter.wrappingAdd(1, ordering: .relaxed).oldValue
        let draw = Self.splitMix64(seed &+ n &* 0x9E37_79B9_7F4A_7C15)
        return Double(draw >> 11) * 0x1p-53 < rate
    }

    package static func splitMix64(_ value: UInt64) -> UInt64 {
        var z = value &+ 0x9E37_79B9_7F4A_7C15
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

import PaypipeCore

/// When to ask getAccessStatus and when to give up (seed 003: every 5 s, fail if access is not
/// granted within 60 s; PROTOCOL.md §4: the first poll is one interval after acceptance).
/// All times are Unix milliseconds supplied by the caller; nothing here reads a clock.
public struct CleengPollingPolicy: Sendable, Equatable {
    public let intervalMs: Int64
    public let deadlineMs: Int64

    public static let defaultIntervalMs: Int64 = 5000
    public static let defaultDeadlineMs: Int64 = 60000
    public static let standard = CleengPollingPolicy(checkedIntervalMs: defaultIntervalMs, deadlineMs: defaultDeadlineMs)

    /// The `failed` code when access never came.
    public static let giveUpCode = "ACCESS_NOT_GRANTED"

    /// nil unless both durations are positive.
    public init?(intervalMs: Int64 = CleengPollingPolicy.defaultIntervalMs, deadlineMs: Int64 = CleengPollingPolicy.defaultDeadlineMs) {
        guard intervalMs > 0, deadlineMs > 0 else { return nil }
        self.init(checkedIntervalMs: intervalMs, deadlineMs: deadlineMs)
    }

    /// From `timers.cleengPollIntervalMs` / `timers.cleengGiveUpMs` (the config loader already
    /// insists on positive values; anything else falls back to the seed's defaults).
    public init(timers: PaypipeConfig.Timers) {
        self = CleengPollingPolicy(intervalMs: timers.cleengPollIntervalMs, deadlineMs: timers.cleengGiveUpMs) ?? .standard
    }

    private init(checkedIntervalMs: Int64, deadlineMs: Int64) {
        self.intervalMs = checkedIntervalMs
        self.deadlineMs = deadlineMs
    }

    public func firstPollAt(acceptedAt: Int64) -> Int64 { acceptedAt.saturatingAdd(intervalMs) }

    /// The slot after `previousPollAt` (slots follow the schedule, not response arrival times).
    public func nextPollAt(after previousPollAt: Int64) -> Int64 { previousPollAt.saturatingAdd(intervalMs) }

    /// The last instant at which a poll may still be sent.
    public func deadline(acceptedAt: Int64) -> Int64 { acceptedAt.saturatingAdd(deadlineMs) }

    /// Whether a poll is still allowed at `time` (polls due at exactly the deadline are sent).
    public func mayPoll(at time: Int64, acceptedAt: Int64) -> Bool { time <= deadline(acceptedAt: acceptedAt) }

    /// The give-up verdict once `now` is past the deadline, else nil.
    public func isExpired(at now: Int64, acceptedAt: Int64) -> ProviderVerdict? {
        now > deadline(acceptedAt: acceptedAt) ? giveUpVerdict : nil
    }

    public var giveUpVerdict: ProviderVerdict {
        .failed(code: CleengPollingPolicy.giveUpCode, message: "access not granted within \(CleengPollingPolicy.spoken(deadlineMs))")
    }

    static func spoken(_ milliseconds: Int64) -> String {
        milliseconds % 1000 == 0 ? "\(milliseconds / 1000) s" : "\(milliseconds) ms"
    }
}

extension Int64 {
    func saturatingAdd(_ other: Int64) -> Int64 {
        let (sum, overflow) = addingReportingOverflow(other)
        return overflow ? (other > 0 ? .max : .min) : sum
    }
}

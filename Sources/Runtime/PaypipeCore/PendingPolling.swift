/// How the poller stage resolves a provider's pending orders, for an operation whose
/// `pendingFollowUp` is `.poll`: the provider is asked on a fixed schedule from the moment the
/// order became pending until it answers for good or the schedule's deadline passes. The
/// poller holds no secrets and keeps only a `PollTarget` per order, never the order.
public protocol PendingPolling: Sendable {
    /// When to ask and when to give up.
    func pollingPolicy(timers: PaypipeConfig.Timers) -> PollingPolicy
    /// What every poll of this pending order needs; a rejection ends the order `failed` with its code.
    func pollTarget(for order: Order) throws(Rejection) -> PollTarget
    /// Poll number `requestId` (1, 2, …) for `target`.
    func pollRequest(_ target: PollTarget, requestId: Int) -> HTTPRequestSpec
    /// What the answer to poll `requestId` says.
    func readPoll(_ response: HTTPResponseSpec, requestId: Int) -> PollAnswer
    /// What a poll that got no answer says.
    func readPollFailure(_ failure: TransportFailure) -> PollAnswer
}

extension PendingPolling {
    public func readPollFailure(_ failure: TransportFailure) -> PollAnswer { .unanswered(reason: failure.reason) }
}

/// The few values a poll needs (a URL, an identifier…), in the connector's own order.
public struct PollTarget: Sendable, Equatable {
    public var values: [String]
    public init(_ values: [String]) { self.values = values }
}

/// One poll's reading.
public enum PollAnswer: Sendable, Equatable {
    /// The provider decided: this verdict ends the order.
    case ended(ProviderVerdict)
    /// Not decided yet: ask again at the next slot.
    case notYet
    /// The answer said nothing about the order (an error status, a malformed body, no answer
    /// at all): ask again at the next slot; it never shortens the schedule.
    case unanswered(reason: String)
}

/// When to poll and when to give up. All times are Unix milliseconds supplied by the caller;
/// nothing here reads a clock.
public struct PollingPolicy: Sendable, Equatable {
    public let intervalMs: Int64
    public let deadlineMs: Int64
    /// The `failed` code when the provider never decided.
    public let giveUpCode: OutcomeErrorCode
    /// What never happened, for the give-up message ("access not granted").
    public let giveUpReason: String

    /// nil unless both durations are positive.
    public init?(intervalMs: Int64, deadlineMs: Int64, giveUpCode: OutcomeErrorCode, giveUpReason: String) {
        guard intervalMs > 0, deadlineMs > 0 else { return nil }
        self.intervalMs = intervalMs
        self.deadlineMs = deadlineMs
        self.giveUpCode = giveUpCode
        self.giveUpReason = giveUpReason
    }

    /// The first poll is one interval after the order became pending.
    public func firstPollAt(startedAt: Int64) -> Int64 { startedAt.saturatingAdd(intervalMs) }

    /// The slot after `previousPollAt` (slots follow the schedule, not response arrival times).
    public func nextPollAt(after previousPollAt: Int64) -> Int64 { previousPollAt.saturatingAdd(intervalMs) }

    /// The last instant at which a poll may still be sent.
    public func deadline(startedAt: Int64) -> Int64 { startedAt.saturatingAdd(deadlineMs) }

    public var giveUpVerdict: ProviderVerdict {
        .failed(code: giveUpCode, message: "\(giveUpReason) within \(Self.spoken(deadlineMs))")
    }

    static func spoken(_ milliseconds: Int64) -> String {
        milliseconds % 1000 == 0 ? "\(milliseconds / 1000) s" : "\(milliseconds) ms"
    }
}

/// The life of one polled order as a plain state machine: accepted → polling → ended | expired.
///
/// The edge feeds it events (`tick(at:)` when its timer fires, `receive(_:requestId:at:)` when
/// a poll completes or fails) and performs the one action each returns. At most one poll is in
/// flight. The whole schedule derives from `startedAt`, so a restarted poller rebuilt from the
/// stored time keeps the same deadline.
public struct PollSchedule: Sendable, Equatable {
    public enum Phase: Sendable, Equatable {
        case accepted, polling, ended, expired
        public var isTerminal: Bool { self == .ended || self == .expired }
    }

    public enum Action: Sendable, Equatable {
        /// Send poll number `requestId`.
        case sendPoll(requestId: Int)
        /// Nothing to do until this time (Unix ms), unless a poll's answer arrives first.
        case wait(until: Int64)
        /// Emit this verdict as the order's outcome, then stop.
        case emit(ProviderVerdict)
        /// Already finished: nothing more to do.
        case stop
    }

    public let startedAt: Int64
    public let policy: PollingPolicy
    public private(set) var phase: Phase = .accepted
    public private(set) var nextPollAt: Int64
    public private(set) var inFlightRequestId: Int?
    public private(set) var pollsSent = 0
    /// The latest reason a poll said nothing (kept for logs; it never shortens the schedule).
    public private(set) var lastUnansweredReason: String?
    public private(set) var verdict: ProviderVerdict?

    public init(startedAt: Int64, policy: PollingPolicy) {
        self.startedAt = startedAt
        self.policy = policy
        self.nextPollAt = policy.firstPollAt(startedAt: startedAt)
    }

    private var deadline: Int64 { policy.deadline(startedAt: startedAt) }

    /// A poll sent before the deadline is awaited this much longer before giving up without it
    /// (the edge's HTTP timeout normally reports it well before).
    private var inFlightGraceMs: Int64 { policy.intervalMs }

    public mutating func tick(at now: Int64) -> Action {
        if phase.isTerminal { return .stop }
        if inFlightRequestId != nil {
            let giveUpAt = deadline.saturatingAdd(inFlightGraceMs)
            return now > giveUpAt ? finish(.expired, policy.giveUpVerdict) : .wait(until: giveUpAt.saturatingAdd(1))
        }
        if now > deadline { return finish(.expired, policy.giveUpVerdict) }
        guard now >= nextPollAt else { return .wait(until: min(nextPollAt, deadline.saturatingAdd(1))) }
        pollsSent += 1
        inFlightRequestId = pollsSent
        phase = .polling
        // A late tick skips the slots it missed rather than firing them back to back.
        repeat { nextPollAt = policy.nextPollAt(after: nextPollAt) } while nextPollAt <= now
        return .sendPoll(requestId: pollsSent)
    }

    /// The answer to poll `requestId`. Answers for any other id are stale and ignored.
    public mutating func receive(_ answer: PollAnswer, requestId: Int, at now: Int64) -> Action {
        if phase.isTerminal { return .stop }
        guard requestId == inFlightRequestId else { return tick(at: now) }
        inFlightRequestId = nil
        switch answer {
        case .ended(let verdict):
            return finish(.ended, verdict)
        case .notYet:
            lastUnansweredReason = nil
            return tick(at: now)
        case .unanswered(let reason):
            lastUnansweredReason = reason
            return tick(at: now)
        }
    }

    private mutating func finish(_ terminal: Phase, _ outcome: ProviderVerdict) -> Action {
        phase = terminal
        verdict = outcome
        inFlightRequestId = nil
        return .emit(outcome)
    }
}

extension Int64 {
    func saturatingAdd(_ other: Int64) -> Int64 {
        let (sum, overflow) = addingReportingOverflow(other)
        return overflow ? (other > 0 ? .max : .min) : sum
    }
}

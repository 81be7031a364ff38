import PaypipeCore

/// The life of one accepted receipt as a plain state machine:
/// accepted → polling → granted | failed | expired.
///
/// The edge feeds it events (`tick(at:)` when its timer fires, `receive(_:requestId:at:)` when a
/// getAccessStatus call completes or fails) and performs the one action each returns. At most one
/// poll is in flight. The whole schedule derives from `acceptedAt`, so a restarted poller rebuilt from
/// the stored acceptance time keeps the same deadline.
public struct CleengReceiptPoller: Sendable, Equatable {
    public enum Phase: Sendable, Equatable {
        case accepted, polling, granted, failed, expired
        public var isTerminal: Bool { self == .granted || self == .failed || self == .expired }
    }

    public enum Action: Sendable, Equatable {
        /// Send getAccessStatus with this JSON-RPC id (`CleengAccessStatusCall.request(..., requestId:)`).
        case sendPoll(requestId: Int)
        /// Nothing to do until this time (Unix ms), unless a poll result arrives first.
        case wait(until: Int64)
        /// Emit this terminal verdict as the order's outcome, then stop.
        case emit(ProviderVerdict)
        /// Already finished: nothing more to do.
        case stop
    }

    public let acceptedAt: Int64
    public let policy: CleengPollingPolicy
    public private(set) var phase: Phase = .accepted
    public private(set) var nextPollAt: Int64
    public private(set) var inFlightRequestId: Int?
    public private(set) var pollsSent = 0
    /// The latest reason a poll said nothing (kept for logs; it never shortens the schedule).
    public private(set) var lastTransientReason: String?
    public private(set) var verdict: ProviderVerdict?

    public init(acceptedAt: Int64, policy: CleengPollingPolicy = .standard) {
        self.acceptedAt = acceptedAt
        self.policy = policy
        self.nextPollAt = policy.firstPollAt(acceptedAt: acceptedAt)
    }

    private var deadline: Int64 { policy.deadline(acceptedAt: acceptedAt) }

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

    /// A getAccessStatus result (or its transport failure, as `.transient`) for `requestId`.
    /// Results for any other id are stale and ignored.
    public mutating func receive(_ status: CleengAccessStatus, requestId: Int, at now: Int64) -> Action {
        if phase.isTerminal { return .stop }
        guard requestId == inFlightRequestId else { return tick(at: now) }
        inFlightRequestId = nil
        switch status {
        case .granted(let grant):
            return finish(.granted, .succeeded(grant.result))
        case .fatalError:
            return finish(.failed, status.verdict ?? policy.giveUpVerdict)
        case .notGranted:
            lastTransientReason = nil
            return tick(at: now)
        case .transient(let reason):
            lastTransientReason = reason
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

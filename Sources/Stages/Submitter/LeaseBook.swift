import PaypipeCore
import StageRuntime
import StageWire

/// The leases this submitter holds and the claims it waits on (issue 11: leases instead of a
/// fixed redelivery timer). Work is claimed in one ledger request per batch before anything is
/// sent, and every held lease is renewed while the work waits or runs, so the ledger
/// redelivers an order only when its holder died.
///
/// A state machine: the submitter's loop sends the requests it returns, and feeds it the
/// ledger's replies and the time. A request unanswered is sent again every
/// `resendAfterMilliseconds` (a request the old connection took dies with a restarting ledger,
/// and claiming again is idempotent), and given up after `timeoutMilliseconds`: that work is
/// not sent, and the ledger dispatches it again after its redelivery delay.
struct LeaseBook {
    /// A ledger RPC request: its id frame and the request.
    struct Request: Equatable {
        let id: UInt64
        let body: [UInt8]
        var frames: [[UInt8]] { [LedgerRequestID.frame(id), body] }
    }

    enum Verdict: Equatable {
        /// Granted: send it.
        case granted
        /// Refused: an older dispatch, or the order has ended.
        case stale
        /// The ledger did not answer in time, or failed.
        case unclaimed
    }

    private struct Pending {
        var claims: [LeaseClaim]
        /// The work waiting for these claims, or nil for a renewal.
        var work: [SubmitWork]?
        var body: [UInt8]
        var firstSentAt: Int64
        var lastSentAt: Int64
    }

    let timeoutMilliseconds: Int64
    let resendAfterMilliseconds: Int64
    let renewEveryMilliseconds: Int64
    private(set) var held: Set<LeaseClaim> = []
    private var pending: [UInt64: Pending] = [:]
    private var nextId: UInt64 = 1
    private var nextRenewalAt: Int64

    /// The ledger calls' budgets of the other stages (`LedgerClient`).
    init(
        leaseMilliseconds: Int64, now: Int64, timeoutMilliseconds: Int64 = LedgerClient.defaultTimeoutMilliseconds,
        resendAfterMilliseconds: Int64 = LedgerClient.defaultResendAfterMilliseconds
    ) {
        self.timeoutMilliseconds = timeoutMilliseconds
        self.resendAfterMilliseconds = max(1, resendAfterMilliseconds)
        renewEveryMilliseconds = max(100, leaseMilliseconds / 3)
        nextRenewalAt = now + renewEveryMilliseconds
    }

    /// Work with a lease waits for its claim, in one request per `LeaseClaim.maxPerRequest`;
    /// work with none (a status check, which sends only a read) is ready at once.
    mutating func claim(_ work: [SubmitWork], now: Int64) -> (ready: [SubmitWork], requests: [Request]) {
        let ready = work.filter { $0.lease == nil }
        let leased = work.filter { $0.lease != nil }
        var requests: [Request] = []
        for start in stride(from: 0, to: leased.count, by: LeaseClaim.maxPerRequest) {
            let chunk = Array(leased[start..<min(start + LeaseClaim.maxPerRequest, leased.count)])
            requests.append(ask(chunk.compactMap(\.lease), for: chunk, now: now))
        }
        return (ready, requests)
    }

    /// A reply from the ledger: the work it decides, each with its verdict, and how many held
    /// leases a renewal lost (the order ended by a callback, or was redelivered after a lapse),
    /// which are forgotten. A reply to nothing pending (a late copy of a resent request) is
    /// ignored.
    mutating func reply(_ frames: [[UInt8]]) -> (decided: [(work: SubmitWork, verdict: Verdict)], lost: Int) {
        guard frames.count == 2, let id = LedgerRequestID.parse(frames[0]), let request = pending.removeValue(forKey: id) else { return ([], 0) }
        var granted: [Bool]?
        if case .claimed(let answers)? = try? LedgerReply.parse(frames[1], for: .claim(request.claims)), answers.count == request.claims.count {
            granted = answers
        }
        guard let work = request.work else {
            let lost = zip(request.claims, granted ?? []).filter { !$0.1 }.map(\.0)
            for claim in lost { held.remove(claim) }
            return ([], lost.count)
        }
        guard let granted else { return (work.map { ($0, .unclaimed) }, 0) }
        for (claim, isGranted) in zip(request.claims, granted) where isGranted { held.insert(claim) }
        return (zip(work, granted).map { ($0, $1 ? .granted : .stale) }, 0)
    }

    /// The work's outcome is out: its lease is no longer renewed.
    mutating func release(_ claim: LeaseClaim) {
        held.remove(claim)
    }

    /// What is due at `now`: requests to send again, work whose claim went unanswered for
    /// `timeoutMilliseconds` (unclaimed), and the renewal of every held lease. An unanswered
    /// renewal is asked again at the next one.
    mutating func tick(now: Int64) -> (send: [Request], unclaimed: [SubmitWork]) {
        var send: [Request] = []
        var unclaimed: [SubmitWork] = []
        for (id, request) in pending {
            if now - request.firstSentAt >= timeoutMilliseconds {
                pending[id] = nil
                unclaimed += request.work ?? []
            } else if now - request.lastSentAt >= resendAfterMilliseconds {
                pending[id]?.lastSentAt = now
                send.append(Request(id: id, body: request.body))
            }
        }
        if now >= nextRenewalAt {
            nextRenewalAt = now + renewEveryMilliseconds
            pending = pending.filter { $0.value.work != nil }
            let claims = Array(held)
            for start in stride(from: 0, to: claims.count, by: LeaseClaim.maxPerRequest) {
                send.append(ask(Array(claims[start..<min(start + LeaseClaim.maxPerRequest, claims.count)]), for: nil, now: now))
            }
        }
        return (send, unclaimed)
    }

    /// When `tick` next has something to do.
    var nextDeadline: Int64 {
        pending.values.reduce(nextRenewalAt) { soonest, request in
            min(soonest, request.lastSentAt + resendAfterMilliseconds, request.firstSentAt + timeoutMilliseconds)
        }
    }

    /// Claims waiting for the ledger's answer.
    var waitingCount: Int { pending.values.reduce(0) { $0 + ($1.work?.count ?? 0) } }

    private mutating func ask(_ claims: [LeaseClaim], for work: [SubmitWork]?, now: Int64) -> Request {
        let id = nextId
        nextId += 1
        let body = LedgerRequest.claim(claims).json.bytes
        pending[id] = Pending(claims: claims, work: work, body: body, firstSentAt: now, lastSentAt: now)
        return Request(id: id, body: body)
    }
}

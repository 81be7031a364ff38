import PaypipeCore
import StageRuntime
import StageWire
import Synchronization

/// Until when each held lease is known to hold, shared by the submitter's thread (which
/// `LeaseBook` keeps it current from) and the event loops that send: every send asks it first.
/// A grant holds from the moment its request was first sent, for a lease; a send is allowed
/// only while a whole request (`requestTimeoutMilliseconds`) fits before that, so a holder whose
/// renewals stopped being answered stops sending before the ledger could give the order to
/// another submitter, and one whose renewal was refused stops at once.
final class LeaseWindow: Sendable {
    private let validUntil = Mutex<[LeaseClaim: Int64]>([:])
    let requestTimeoutMilliseconds: Int64
    let now: @Sendable () -> Int64
    /// Allows every send (for runs without leases: tests of the runner alone).
    static let unchecked = LeaseWindow(requestTimeoutMilliseconds: 0, now: { 0 }, checks: false)
    private let checks: Bool

    init(requestTimeoutMilliseconds: Int64, now: @escaping @Sendable () -> Int64 = steadyMilliseconds, checks: Bool = true) {
        self.requestTimeoutMilliseconds = requestTimeoutMilliseconds
        self.now = now
        self.checks = checks
    }

    /// Whether `work` may send a request now: it needs no lease (a status check), or its lease
    /// holds for a whole request more.
    func allowsSend(_ work: SubmitWork) -> Bool {
        guard checks, let claim = work.lease else { return true }
        guard let until = validUntil.withLock({ $0[claim] }) else { return false }
        return until - now() > requestTimeoutMilliseconds
    }

    func hold(_ claims: some Sequence<LeaseClaim>, until: Int64) {
        validUntil.withLock { held in for claim in claims { held[claim] = until } }
    }

    func drop(_ claims: some Sequence<LeaseClaim>) {
        validUntil.withLock { held in for claim in claims { held[claim] = nil } }
    }

    var count: Int { validUntil.withLock { $0.count } }
}

/// The leases this submitter holds and the claims it waits on, in place of a fixed redelivery
/// timer. Work is claimed in one ledger request per batch before anything is
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
    let leaseMilliseconds: Int64
    /// Where the leases held, and until when, are published for the sends.
    let window: LeaseWindow
    private(set) var held: Set<LeaseClaim> = []
    private var pending: [UInt64: Pending] = [:]
    private var nextId: UInt64 = 1
    private var nextRenewalAt: Int64

    /// The ledger calls' budgets of the other stages (`LedgerClient`).
    init(
        leaseMilliseconds: Int64, now: Int64, window: LeaseWindow = .unchecked, timeoutMilliseconds: Int64 = LedgerClient.defaultTimeoutMilliseconds,
        resendAfterMilliseconds: Int64 = LedgerClient.defaultResendAfterMilliseconds
    ) {
        self.leaseMilliseconds = leaseMilliseconds
        self.window = window
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

    /// A reply from the ledger: the work it decides, each with its verdict, and the held
    /// leases a renewal lost (the order ended by a callback, was redelivered after a lapse, or
    /// was held too long), which are forgotten: the work on them sends nothing more. A reply to
    /// nothing pending (a late copy of a resent request) is ignored.
    mutating func reply(_ frames: [[UInt8]]) -> (decided: [(work: SubmitWork, verdict: Verdict)], lost: [LeaseClaim]) {
        guard frames.count == 2, let id = LedgerRequestID.parse(frames[0]), let request = pending.removeValue(forKey: id) else { return ([], []) }
        var granted: [Bool]?
        if case .claimed(let answers)? = try? LedgerReply.parse(frames[1], for: .claim(request.claims)), answers.count == request.claims.count {
            granted = answers
        }
        // A grant holds from when the ledger may first have seen the request.
        let until = request.firstSentAt + leaseMilliseconds
        guard let work = request.work else {
            guard let granted else { return ([], []) }
            let renewed = zip(request.claims, granted).filter { $0.1 && held.contains($0.0) }.map(\.0)
            let lost = zip(request.claims, granted).filter { !$0.1 && held.contains($0.0) }.map(\.0)
            for claim in lost { held.remove(claim) }
            window.hold(renewed, until: until)
            window.drop(lost)
            return ([], lost)
        }
        guard let granted else { return (work.map { ($0, .unclaimed) }, []) }
        let taken = zip(request.claims, granted).filter(\.1).map(\.0)
        held.formUnion(taken)
        window.hold(taken, until: until)
        return (zip(work, granted).map { ($0, $1 ? .granted : .stale) }, [])
    }

    /// The work's outcome is out (or it stopped): its lease is no longer renewed.
    mutating func release(_ claim: LeaseClaim) {
        held.remove(claim)
        window.drop([claim])
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

import PaypipeCore
import StageWire

/// What the ledger asks of its durable store, so that the rules it applies (dedupe, leases,
/// result authority, retention) stay the same whichever database keeps the orders. Opening a
/// store and its schema are left to each store: only the running ledger's needs are shared.
///
/// Not `Sendable`: a store has one owner at a time (the ledger's core, behind its lock), and a
/// transaction's bookkeeping lives in the store between its statements, where no other caller
/// may see it half done.
package protocol LedgerStorage: AnyObject {
    typealias State = OrderState
    typealias Admission = LedgerAdmission
    typealias RejectionAdmission = LedgerRejectionAdmission
    typealias Recorded = LedgerRecorded
    typealias Pending = LedgerPending
    typealias Redispatch = LedgerRedispatch
    typealias Exhausted = LedgerExhausted
    typealias PendingDispatch = LedgerPendingDispatch

    // MARK: Transactions

    /// One commit has to serve a whole batch of frames, and a failure has to undo the batch and
    /// whatever the store counts in memory with it, so that the caller can retry it unchanged.
    /// Nested calls join the outer transaction for the same reason. Every other requirement
    /// that writes expects to run inside one.
    /// `logsOutcomes`: whether it may append to the outcome log, whose order across several
    /// ledgers it then takes part in from its first statement; false only for claims and reads.
    func transaction<T>(logsOutcomes: Bool, _ body: () throws -> T) throws -> T

    // MARK: Meta

    /// Tickets must check the same in a restarted ledger and in every ledger over one store, so
    /// their key is kept with the orders rather than in the process.
    var tickets: DispatchTickets { get }

    // MARK: Intake

    /// Dedupe and recording are one step, and the order's callback references are claimed in
    /// it too, so that a callback finds the order before any request leaves and two orders of a
    /// merchant never answer to one reference.
    func admit(_ order: Order, json: String, references: [String], now: Int64) throws -> Admission

    /// A rejection is filed as its key's terminal outcome, so that a repeat of the order gets the
    /// same answer instead of a second, different one.
    func admitRejection(_ key: OrderKey, outcome: String, now: Int64) throws -> RejectionAdmission

    // MARK: Leases and claims

    /// Only a ticket the ledger issued may claim, and only one generation is held at a time, so
    /// that a dispatch reaches a provider through one submitter at most.
    func claim(_ claims: [LeaseClaim], until: Int64, now: Int64, maxLife: Int64) throws -> [Bool]

    /// Leases are timed on a clock that restarts with the process, so a restarted ledger gives
    /// their holders back the time it was down instead of taking its own outage for their death,
    /// and no more, so that a dead holder's lease still lapses however often the ledger restarts.
    func resumeHeldLeases(now: Int64, lease: Int64) throws

    /// Where a restarted ledger measures its outage from.
    func recordAlive(now: Int64) throws

    /// Work nobody holds has to go out again, but never past the dispatch cap or a lease's
    /// longest life, where an operator decides instead.
    func stalled(
        dispatchedBefore cutoff: Int64, now: Int64, limit: Int, maxDispatches: Int64, maxLeaseLife: Int64
    ) throws -> (redispatch: [Redispatch], exhausted: [Exhausted])

    // MARK: Outcomes and the outcome log

    /// The store decides, in the same step that writes, whether the sender may give the outcome
    /// (`ResultAuthority`) and whether the order's state allows it, so that no outcome is applied
    /// on facts that changed since they were read.
    func record(
        _ outcome: Outcome, serialized: String, references: [String], polled: Bool, now: Int64, from source: ResultSource
    ) throws -> Recorded

    /// Upstream replays by seq, so an outcome that belongs to no stored order still needs its
    /// place in the log.
    func logOutcome(_ serialized: String, key: OrderKey, now: Int64) throws -> String

    /// Each opening of the store is an epoch, named by every outcome it logs beside its seq, so
    /// that upstream can tell a store that went back in time (restored from a copy).
    var epoch: String { get }

    /// Whether the log still holds everything an upstream saw up to `seq` of `epoch`.
    func replayContinues(epoch: String, after seq: Int64) throws -> Bool

    /// Upstream catches up on what it missed from the log rather than from the live push.
    func outcomes(after since: Int64, limit: Int) throws -> (outcomes: [(seq: Int64, text: String)], more: Bool)

    /// Operators act on orders the ledger could not resolve, and on outcomes a callback corrected.
    func reviewOutcomes(limit: Int) throws -> [String]

    // MARK: Callbacks, references and pending orders

    /// The callback validators check a callback against the order it names.
    func lookup(_ key: OrderKey) throws -> StoredOrder?

    /// Some providers' callbacks name only their own reference, scoped to a merchant.
    func lookup(provider: Provider, ref: String, merchant: String) throws -> StoredOrder?

    /// Providers redeliver callbacks: the event id, kept in the outcome's transaction, makes a
    /// redelivery change nothing.
    func recordCallbackEvent(_ event: String, for key: OrderKey, now: Int64) throws -> Bool

    /// A callback that turned out not to be the order's must not block a genuine one with the
    /// same event id.
    func forgetCallbackEvent(_ event: String, of merchant: String) throws

    /// Pending orders are resolved by status checks or pollers, each dispatch a new generation so
    /// that a late answer to an older one is refused.
    func pendingToDispatch(
        operation: Operation, pendingBefore: Int64, dispatchedBefore: Int64, now: Int64, limit: Int
    ) throws -> [PendingDispatch]

    // MARK: Retention and counts

    /// The log only has to cover how far upstream may fall behind; orders keep their latest
    /// outcome, so repeats are still answered.
    func pruneOutcomes(recordedBefore cutoff: Int64, limit: Int) throws -> Int

    /// Ended orders' contents are the bulk of the store and are needed no more, while their key
    /// and outcome still answer repeats.
    func compactOrders(endedBefore cutoff: Int64, limit: Int) throws -> Int

    /// Keys are kept only as long as upstream may repeat an order.
    func forgetOrders(endedBefore cutoff: Int64, limit: Int) throws -> Int

    /// The gauges are read on every tick, so they must not cost a scan of the orders.
    func counts() throws -> [State: Int]
}

/// What intake found for one order key.
package enum LedgerAdmission: Sendable, Equatable {
    /// First time seen: now recorded; dispatch it.
    case new
    /// Seen before: send its latest outcome again (a terminal one is identical bytes every time).
    case duplicate(replay: String)
    /// Seen before, still in progress, no outcome yet: nothing to do.
    case duplicateInFlight
    /// New, but a provider reference it names belongs to another order of its merchant: not
    /// recorded.
    case referenceInUse(String)
}

/// What intake made of a rejected order whose key could be read.
package enum LedgerRejectionAdmission: Sendable, Equatable {
    /// The key was new: the rejection is its terminal outcome, logged; emit these bytes.
    case recorded(String)
    /// The key was known: what a repeated order gets.
    case known(LedgerAdmission)
}

/// What recording an outcome led to.
package struct LedgerRecorded: Sendable, Equatable {
    /// The bytes to send upstream, or nil when the order was already terminal (a second
    /// terminal outcome from a redelivery is dropped: the first one stands, so every copy
    /// upstream sees is identical) or the outcome was refused.
    package var emit: String?
    /// Set when a Cleeng order has just become pending.
    package var becamePending: LedgerPending?
    /// Why the outcome was not the sender's to give (`ResultAuthority`); nothing changed.
    package var refused: String?
    /// The outcome superseded a terminal one that said no money was taken (a correction).
    package var corrected = false
}

/// An order that has just become pending, for the pollers, which work from the order itself.
package struct LedgerPending: Sendable, Equatable {
    package var json: String
    package var since: Int64
    package var key: OrderKey
    package var generation: Int64
}

/// A stalled order dispatched again, as its new generation.
package struct LedgerRedispatch: Sendable, Equatable {
    package var json: String
    package var acceptedAt: Int64
    package var key: OrderKey
    package var generation: Int64
}

/// A stalled order that has had its dispatches: it goes to review instead.
package struct LedgerExhausted: Sendable, Equatable {
    package var key: OrderKey
    package var provider: String
    package var operation: String
    /// Dispatches a submitter claimed and then lost (it died, or never answered).
    package var attempts: Int64
    /// Why it goes to review.
    package var reason: String
}

/// A pending order sent out again: to the signers for a status check, or to the pollers.
package struct LedgerPendingDispatch: Sendable, Equatable {
    package var json: String
    package var pendingAt: Int64
    /// The `result` of its stored pending outcome.
    package var result: [String: JSONValue]
    package var key: OrderKey
    /// The new generation this dispatch is.
    package var generation: Int64
}

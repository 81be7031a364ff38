import PaypipeCore
import StageRuntime
import StageWire

/// The ledger's core: frames in, effects out. It owns the store (durable dedupe and state) and
/// nothing else; sockets and clocks stay in the executable.
package struct LedgerCore {
    package enum Effect: Sendable, Equatable {
        /// An order for the signers: `{"order":…,"acceptedAt":ms}`.
        case dispatch([UInt8])
        /// An outcome for upstream.
        case emit([UInt8])
        /// A frame that was not a JSON object: counted and logged without content, no outcome.
        case drop(Rejection)
        /// An accepted Cleeng receipt for the pollers: `{"order":…,"acceptedAt":ms}` with the
        /// time the receipt was accepted, from which its whole polling schedule derives.
        case poll([UInt8])
        /// A stage's outcome that was not its to give (`ResultAuthority`): nothing changed; logged
        /// and counted.
        case refuse(String)
    }

    package struct Counters: Sendable, Equatable {
        package var ordersIn = 0
        package var duplicates = 0
        package var dropped: [String: Int] = [:]
        /// Outcomes sent upstream, by status, provider and operation.
        package var outcomesOut: [OutcomeLabels: Int] = [:]
        package var redelivered = 0
        package var callbacksApplied = 0
        package var callbacksDuplicate = 0
        package var statusChecks = 0
        /// Orders sent to review after `timers.maxDispatches` claimed dispatches.
        package var dispatchCapReached = 0
        /// Stage outcomes refused because their sender may not give them (forged, stale, wrong role).
        package var resultsRefused = 0
        /// Terminal outcomes that said no money was taken, superseded by a genuine callback.
        package var corrections = 0
        /// Subscription events newly recorded, by type.
        package var subscriptionEvents: [String: Int] = [:]
        /// Subscription events reported again (a provider's redelivery).
        package var subscriptionEventDuplicates = 0
        /// Orders the schedules made (a step of an attempt at a cycle).
        package var scheduledOrders = 0
        /// Orders in review that operators resolved, by the status they gave.
        package var resolvedByOperators: [String: Int] = [:]

        package init() {}

        /// One more outcome sent upstream.
        package mutating func countOut(_ labels: OutcomeLabels) { outcomesOut[labels, default: 0] += 1 }
    }

    /// The labels an outcome is counted under. A provider or operation that no connector
    /// registers (a rejected order's own words) is counted as "unknown", so that no order can
    /// make a new series.
    func labels(_ status: Outcome.Status, provider: String, operation: String) -> OutcomeLabels {
        guard registry.catalog.operation(named: operation, of: Provider(provider)) != nil else {
            let knownProvider = registry.connector(for: Provider(provider)) != nil
            return OutcomeLabels(status: status.rawValue, provider: knownProvider ? provider : "unknown", operation: "unknown")
        }
        return OutcomeLabels(status: status.rawValue, provider: provider, operation: operation)
    }

    func labels(_ outcome: Outcome) -> OutcomeLabels { labels(outcome.status, provider: outcome.provider, operation: outcome.operation) }

    /// The concrete store rather than a generic parameter or `any LedgerStorage`: every store
    /// call on the per-order path stays statically dispatched and open to inlining, also from the
    /// modules that drive the core directly (tests, benchmarks), and `LedgerCore` stays a type
    /// its users can name. The core asks only what `LedgerStorage` declares, so another store is
    /// a change of this alias.
    package typealias Store = LedgerStore

    package let store: Store
    let registry: ConnectorRegistry
    package internal(set) var counters = Counters()
    /// An order dispatched this long ago that nobody claimed is dispatched again.
    package var redeliverAfterMilliseconds: Int64
    /// A pending order's status check at or after this long is its last (`expiryCheck`).
    let pendingExpireAfterMilliseconds: Int64
    /// How long a claim holds without renewal.
    let leaseMilliseconds: Int64
    /// The longest one dispatch may be held, renewals included.
    let leaseMaxMilliseconds: Int64
    let maxDispatches: Int64
    /// What the connectors want done with each operation's pending orders.
    let followUps: [(operation: Operation, followUp: PendingFollowUp)]
    /// Puts withheld secrets back into outcomes on their way upstream; nil when no connector
    /// withholds any.
    package let revealer: OutcomeRevealer?

    /// Merchants whose order systems are sent subscription events (`subscriptionEvents`).
    let eventMerchants: Set<String>
    /// How often at least a checked subscription's entitlement is checked.
    let entitlementRecheckMilliseconds: Int64
    /// How long after each decline a scheduled cycle is tried again (`schedules.retryAfterDays`).
    let retryAfterMilliseconds: [Int64]
    /// Each merchant's dunning (`merchants.<name>.dunning`); a merchant not here has the defaults.
    let dunning: [String: PaypipeConfig.Dunning]
    /// Due schedule steps one tick turns into orders at most.
    let scheduleBatch: Int
    /// Cycles already due a schedule charges back to back at most (`schedules.maxCatchUpCycles`).
    let maxCatchUpCycles: Int64
    /// How far the schedules' clock runs ahead of the ledger's (tests and demos only).
    package var scheduleClockOffset: Int64 = 0

    package init(
        store: Store, registry: ConnectorRegistry, timers: PaypipeConfig.Timers = PaypipeConfig.Timers(),
        redeliverAfterMilliseconds: Int64 = 60_000, eventMerchants: Set<String> = [],
        schedules: PaypipeConfig.Schedules = PaypipeConfig.Schedules(), dunning: [String: PaypipeConfig.Dunning] = [:]
    ) {
        self.store = store
        retryAfterMilliseconds = schedules.retryAfterDays.map { $0 * 86_400_000 }
        self.dunning = dunning
        scheduleBatch = Int(schedules.batch)
        maxCatchUpCycles = schedules.maxCatchUpCycles
        self.registry = registry
        self.eventMerchants = eventMerchants
        entitlementRecheckMilliseconds = timers.entitlementRecheckMs
        self.redeliverAfterMilliseconds = redeliverAfterMilliseconds
        pendingExpireAfterMilliseconds = timers.pendingExpireAfterMs
        leaseMilliseconds = timers.leaseMs
        leaseMaxMilliseconds = timers.leaseMaxMs
        maxDispatches = timers.maxDispatches
        revealer = OutcomeRevealer(registry: registry)
        followUps = registry.connectors.flatMap { connector in
            type(of: connector).operations.compactMap { spec in
                connector.pendingFollowUp(for: spec.operation, timers: timers).map { (spec.operation, $0) }
            }
        }
    }

    /// Called once when the ledger starts: held leases get back the time the ledger was down, so
    /// live holders renew them before anything is redelivered, and dead holders' leases lapse.
    package func resumeLeases(now: Int64) throws {
        try store.transaction(logsOutcomes: false) { try store.resumeHeldLeases(now: now, lease: leaseMilliseconds) }
    }

    /// Called on every tick, so that a restart measures the outage it has to give back.
    package func recordAlive(now: Int64) throws {
        try store.transaction(logsOutcomes: false) { try store.recordAlive(now: now) }
    }

    /// The operations whose pending orders the pollers own.
    var polledOperations: [Operation] {
        followUps.compactMap { if case .poll = $0.followUp { $0.operation } else { nil } }
    }

    /// Decodes frames for `intake` and `results` without the store.
    package var decoder: FrameDecoder { FrameDecoder(registry: registry, polledOperations: polledOperations) }

    /// The part of taking in orders and outcomes that needs no store: parsing, validating and
    /// serializing. The ledger runs it before its store's turn, so that it overlaps the store's
    /// work (and its fsync) instead of adding to it.
    package struct FrameDecoder: Sendable {
        package enum IntakeItem: Sendable {
            case dropped(Rejection)
            case rejected(Rejection, identity: OrderIdentity)
            /// Rejected without being stored: the key is not one a valid order could have, or the
            /// sender may not use it, so it must not be filed where it could shadow a real order.
            case refused(Rejection, identity: OrderIdentity)
            case order(Order, json: String, references: [String])
            /// A `schedule` order: the ledger's own to apply (docs/protocol.md, "Schedules").
            case scheduleChange(Order, ScheduleChange)
            /// A `cancel` order: checked against its subscription's record before it is stored
            /// with that record and dispatched (docs/protocol.md, "Cancelling a subscription").
            case cancel(Order, SubscriptionCancel)
            /// A refund: admitted only once the ledger has checked what it gives back against
            /// the original order's captures (`LedgerCore.refundRejection`).
            case refund(Order, json: String, references: [String], target: RefundTarget)
        }

        package struct Result: Sendable {
            let outcome: Outcome
            let serialized: String
            let references: [String]
            /// The order's operation is the pollers' (its order is read back when it becomes pending).
            let polled: Bool
            let answering: StageResult.Answering
            let ticket: DispatchTicket
            /// The sender's role, as its CURVE key proved it; nil without CURVE.
            let role: CurveConfig.Role?
        }

        let registry: ConnectorRegistry
        let polledOperations: [Operation]

        package func intake(_ frames: [[UInt8]]) -> [IntakeItem] {
            intake(frames.map { ($0, .anyMerchant) })
        }

        /// Frames with their sender: an order for a merchant its sender may not use is dropped
        /// (counted and logged), never answered, since its outcome would reach that merchant's
        /// upstream as if about its own order.
        package func intake(_ frames: [(frame: [UInt8], sender: StageLinks.UpstreamSender)]) -> [IntakeItem] {
            frames.map { frame, sender in
                let decoded = Order.decode(frame: frame, catalog: registry.catalog)
                if sender != .anyMerchant {
                    let merchant: String? =
                        switch decoded {
                        case .dropped: nil
                        case .rejected(_, let identity): identity.merchant
                        case .order(let order): order.merchant
                        }
                    if let merchant, !sender.allows(merchant) {
                        return .dropped(
                            Rejection(.merchantNotAllowed, field: "merchant", "the sender may not send orders for merchant \(merchant.prefix(64))"))
                    }
                }
                // A schedule's id is refused, not filed under its key: filed, the rejection would
                // be what the schedule's own order under that id got.
                switch decoded {
                case .rejected(_, let identity):
                    if let reserved = ScheduledAttempt.reservation(ofOrderId: identity.orderId)
                        ?? ReconciliationWatch.reservation(ofOrderId: identity.orderId)
                    {
                        return .refused(reserved, identity: identity)
                    }
                case .order(let order):
                    if let reserved = ScheduledAttempt.reservation(ofOrderId: order.orderId)
                        ?? ReconciliationWatch.reservation(ofOrderId: order.orderId)
                    {
                        return .refused(reserved, identity: order.identity)
                    }
                    if let param = registry.connector(for: order.provider)?.scheduledCharging?.reservedReferenceParam(in: order) {
                        let rule =
                            "must not start with \(ScheduledAttempt.attemptReferencePrefix) (in any case): that prefix is reserved for the references schedules make"
                        return .rejected(Rejection.invalidParam(param, rule), identity: order.identity)
                    }
                case .dropped: break
                }
                switch decoded {
                case .dropped(let rejection): return .dropped(rejection)
                case .rejected(let rejection, let identity): return .rejected(rejection, identity: identity)
                case .order(let order) where order.operation.rawValue == ScheduleChange.operationName || order.params["schedule"] != nil:
                    return scheduling(order, json: String(decoding: frame, as: UTF8.self))
                case .order(let order) where order.operation.rawValue == SubscriptionCancel.operationName:
                    do throws(Rejection) {
                        return .cancel(order, try SubscriptionCancel(order: order, fromUpstream: true))
                    } catch {
                        return .rejected(error, identity: order.identity)
                    }
                case .order(let order):
                    // Stored and dispatched as upstream sent it: every stage that reads it again
                    // decodes it to this same order, so writing it anew would buy nothing.
                    let connector = registry.connector(for: order.provider)
                    let json = String(decoding: frame, as: UTF8.self)
                    let references = connector?.callbackReferences(for: order) ?? []
                    if let target = connector?.refunding?.refundTarget(of: order) {
                        return .refund(order, json: json, references: references, target: target)
                    }
                    return .order(order, json: json, references: references)
                }
            }
        }

        /// A `schedule` order, or a first order that attaches a schedule: its schedule is read
        /// here, so that a broken one is rejected before anything is sent.
        func scheduling(_ order: Order, json: String) -> IntakeItem {
            let identity = order.identity
            guard let connector = registry.connector(for: order.provider), connector.scheduledCharging != nil else {
                return .rejected(
                    Rejection(.invalidParam, field: "params.schedule", "\(order.provider.rawValue) subscriptions are not charged on schedule"),
                    identity: identity)
            }
            do throws(Rejection) {
                if order.operation.rawValue == ScheduleChange.operationName { return .scheduleChange(order, try ScheduleChange(order: order)) }
                guard connector.opensSubscription(order.operation) else {
                    throw Rejection.invalidParam("schedule", "is only taken by an order that opens a subscription")
                }
                _ = try ChargeSchedule(
                    json: order.params["schedule"]!, field: "schedule", defaultAmount: order.amount, defaultCurrency: order.currency)
            } catch {
                return .rejected(error, identity: identity)
            }
            return .order(order, json: json, references: connector.callbackReferences(for: order))
        }

        /// Result frames (`StageResult`) with their sender's role; anything else is skipped.
        package func results(_ frames: [(frame: [UInt8], role: CurveConfig.Role?)]) -> [Result] {
            frames.compactMap { frame, role in
                guard let (answering, ticket, bytes, _) = StageResult.decode(frame), var outcome = try? Outcome.parse(bytes) else { return nil }
                let provider = Provider(outcome.provider)
                let operation = registry.catalog.operation(named: outcome.operation, of: provider)?.operation
                var serialized = String(decoding: bytes, as: UTF8.self)
                // Secrets the outcome carries for the app are not stored (`OutcomeRevealer`).
                if let withheld = registry.connector(for: provider)?.withholdingSecrets(in: outcome) {
                    outcome = withheld
                    serialized = withheld.serialized
                }
                return Result(
                    outcome: outcome, serialized: serialized,
                    references: registry.connector(for: provider)?.callbackReferences(in: outcome) ?? [],
                    polled: operation.map(polledOperations.contains) ?? false, answering: answering, ticket: ticket, role: role)
            }
        }
    }

    /// Store work from one of the ledger's readers, committed with whatever else is waiting.
    package enum Work: Sendable {
        case intake([FrameDecoder.IntakeItem])
        case results([FrameDecoder.Result])
        case request(LedgerRequest)

        /// Whether the work is expected to append to the outcome log (`LedgerStore.transaction`):
        /// results and settles, and an intake with rejections. Valid new orders log nothing
        /// unless one names a reference another order holds; that rare intake takes the log's
        /// lock when it logs (`LedgerStore.stamped`).
        var mayLog: Bool {
            switch self {
            case .intake(let items):
                items.contains { item in
                    switch item {
                    case .rejected, .refused, .scheduleChange, .cancel, .refund: true
                    case .dropped, .order: false
                    }
                }
            case .results, .request(.settle), .request(.subscriptionEvents), .request(.checked): true
            case .request(.lookup), .request(.lookupRef), .request(.claim), .request(.resumePolls), .request(.dueChecks), .request(.subscription):
                false
            }
        }
    }

    /// What one `Work` asks for: its effects and, for a request, the reply (sent only after the
    /// commit).
    package struct Done: Sendable {
        package var effects: [Effect]
        package var reply: LedgerReply?
    }

    /// Every piece of `work` in one transaction, so one commit (one fsync) serves all of them: a
    /// group commit. Each piece's effects are performed by its caller, and only once `commit`
    /// has returned. A failure rolls back the whole group, counters included, so that the
    /// caller can retry it as it was.
    package mutating func commit(_ work: [Work], now: Int64) throws -> [Done] {
        let before = counters
        do {
            return try store.transaction(logsOutcomes: work.contains(where: \.mayLog)) {
                try work.map { piece in
                    switch piece {
                    case .intake(let items): return Done(effects: try intake(items, now: now))
                    case .results(let items): return Done(effects: try results(items, now: now))
                    case .request(let request):
                        let (reply, effects) = try answer(request, now: now)
                        return Done(effects: effects, reply: reply)
                    }
                }
            }
        } catch {
            counters = before
            throw error
        }
    }

    /// Upstream orders: validated, deduplicated and recorded in one transaction; dispatched only
    /// once that transaction has committed (the caller performs effects in order after return).
    package mutating func intake(_ frames: [[UInt8]], now: Int64) throws -> [Effect] {
        try intake(decoder.intake(frames), now: now)
    }

    /// `intake` of frames already decoded (`FrameDecoder.intake`).
    package mutating func intake(_ decoded: [FrameDecoder.IntakeItem], now: Int64) throws -> [Effect] {
        let items = decoded.map { lateStartRejected($0, now: now) }
        var effects: [Effect] = []
        var counters = self.counters
        /// A first sighting gets `firstTime`; a repeat gets its latest outcome again, if any.
        func admitted(_ admission: Store.Admission, firstTime: Effect?) {
            switch admission {
            case .new: if let firstTime { effects.append(firstTime) }
            case .duplicate(let stored):
                counters.duplicates += 1
                effects.append(.emit(Array(stored.utf8)))
            case .duplicateInFlight: counters.duplicates += 1
            case .referenceInUse: break
            }
        }
        /// Logs a rejection that is not filed under its key, and emits it.
        func refuse(_ rejection: Rejection, _ identity: OrderIdentity) throws {
            let outcome = Outcome.rejected(rejection, identity: identity, at: Timestamp.iso8601(milliseconds: now))
            effects.append(
                .emit(
                    Array(
                        try store.logOutcome(outcome.serialized, key: OrderKey(merchant: outcome.merchant, orderId: outcome.orderId), now: now).utf8))
            )
            counters.countOut(labels(outcome))
        }
        /// Files a rejection as its key's terminal outcome, unless the key is known.
        func fileRejection(_ text: String, _ key: OrderKey) throws {
            switch try store.admitRejection(key, outcome: text, now: now) {
            case .recorded(let logged): effects.append(.emit(Array(logged.utf8)))
            case .known(let admission): admitted(admission, firstTime: .emit(Array(text.utf8)))
            }
        }
        /// Admits a valid order and dispatches it, or rejects it when another order holds a
        /// reference it names. Returns what the store said.
        @discardableResult
        func admit(_ order: Order, json: String, references: [String]) throws -> Store.Admission {
            let admission = try store.admit(order, json: json, references: references, now: now)
            if case .referenceInUse(let reference) = admission {
                let rejection = Rejection(
                    .referenceInUse, field: "params",
                    "the \(order.provider.rawValue) reference \(reference.prefix(64)) is already another order's of merchant \(order.merchant.prefix(64))"
                )
                try fileRejection(
                    Outcome.rejected(rejection, identity: order.identity, at: Timestamp.iso8601(milliseconds: now)).serialized, order.key)
                counters.countOut(labels(.rejected, provider: order.provider.rawValue, operation: order.operation.rawValue))
                return admission
            }
            let ticket = store.tickets.ticket(for: order.key, generation: 1)
            admitted(admission, firstTime: .dispatch(DispatchFrame.encode(orderJSON: json, acceptedAt: now, token: ticket.token)))
            return admission
        }
        try store.transaction {
            try store.prepareAdmissions(Self.onceKeyed(items), now: now)
            for item in items {
                counters.ordersIn += 1
                switch item {
                case .dropped(let rejection):
                    counters.dropped[rejection.code.rawValue, default: 0] += 1
                    effects.append(.drop(rejection))
                case .rejected(let rejection, let identity):
                    let outcome = Outcome.rejected(rejection, identity: identity, at: Timestamp.iso8601(milliseconds: now))
                    let text = outcome.serialized
                    // Stored under its key only when the key is one a valid order could have;
                    // otherwise logged and emitted, never filed under a key it could collide with.
                    guard Order.isValidOrderId(identity.orderId), Order.isValidMerchant(identity.merchant) else {
                        try refuse(rejection, identity)
                        continue
                    }
                    try fileRejection(text, OrderKey(merchant: identity.merchant, orderId: identity.orderId))
                    counters.countOut(labels(outcome))
                case .refused(let rejection, let identity):
                    try refuse(rejection, identity)
                case .scheduleChange(let order, let change):
                    if let admission = try store.known(order.key) {
                        admitted(admission, firstTime: nil)
                        continue
                    }
                    let outcome = try applyScheduleChange(change, of: order, now: now)
                    try fileRejection(outcome.serialized, order.key)
                    counters.countOut(labels(outcome))
                    if outcome.status == .succeeded { effects += try liftDunningPause(change, of: order, counters: &counters, now: now) }
                case .cancel(let order, let cancel):
                    if let admission = try store.known(order.key) {
                        admitted(admission, firstTime: nil)
                        continue
                    }
                    switch try recordedCancel(order, cancel) {
                    case .failure(let rejection):
                        let outcome = Outcome.rejected(rejection, identity: order.identity, at: Timestamp.iso8601(milliseconds: now))
                        try fileRejection(outcome.serialized, order.key)
                        counters.countOut(labels(outcome))
                    case .success(let recorded) where registry.connector(for: order.provider)?.cancelsWithoutProviderCall == true:
                        let outcome = cancelWithoutProviderCall(recorded, cancel, now: now)
                        try fileRejection(outcome.serialized, order.key)
                        counters.countOut(labels(outcome))
                        effects += try cancelSubscription(
                            merchant: order.merchant, provider: order.provider, reference: cancel.subscription, at: cancel.at,
                            providerPeriodEnd: nil, reason: "cancel order \(order.orderId)", counters: &counters, now: now)
                    case .success(let recorded):
                        let json = recorded.serialized
                        let admission = try store.admit(recorded, json: json, references: [], now: now)
                        let ticket = store.tickets.ticket(for: order.key, generation: 1)
                        admitted(admission, firstTime: .dispatch(DispatchFrame.encode(orderJSON: json, acceptedAt: now, token: ticket.token)))
                    }
                case .refund(let order, let json, let references, let target):
                    if let admission = try store.known(order.key) {
                        admitted(admission, firstTime: nil)
                        continue
                    }
                    let refund: RefundRecord
                    switch try checkRefund(order, target: target) {
                    case .success(let checked): refund = checked
                    case .failure(let rejection):
                        try fileRejection(
                            Outcome.rejected(rejection, identity: order.identity, at: Timestamp.iso8601(milliseconds: now)).serialized, order.key)
                        counters.countOut(labels(.rejected, provider: order.provider.rawValue, operation: order.operation.rawValue))
                        continue
                    }
                    if try admit(order, json: json, references: references) == .new {
                        try store.recordRefund(refund, merchant: order.merchant, now: now)
                    }
                case .order(let order, let json, let references):
                    try admit(order, json: json, references: references)
                }
            }
        }
        self.counters = counters
        return effects
    }

    /// The valid orders among `items` whose key no other item names: those an intake pass may
    /// take in together (`LedgerStore.prepareAdmissions`).
    static func onceKeyed(_ items: [FrameDecoder.IntakeItem]) -> [(order: Order, json: String, references: [String])] {
        var uses: [OrderKey: Int] = [:]
        for item in items {
            switch item {
            case .order(let order, _, _), .scheduleChange(let order, _), .cancel(let order, _), .refund(let order, _, _, _):
                uses[order.key, default: 0] += 1
            case .rejected(_, let identity): uses[OrderKey(merchant: identity.merchant, orderId: identity.orderId), default: 0] += 1
            case .dropped, .refused: break
            }
        }
        return items.compactMap { item in
            guard case .order(let order, let json, let references) = item, uses[order.key] == 1 else { return nil }
            return (order, json, references)
        }
    }

    /// Outcomes from the stages: recorded if their sender may give them, then forwarded upstream
    /// unless superseded. `role`: the senders' role (nil without CURVE).
    package mutating func results(_ frames: [[UInt8]], role: CurveConfig.Role? = nil, now: Int64) throws -> [Effect] {
        try results(decoder.results(frames.map { ($0, role) }), now: now)
    }

    /// `results` of frames already decoded (`FrameDecoder.results`).
    package mutating func results(_ items: [FrameDecoder.Result], now: Int64) throws -> [Effect] {
        var effects: [Effect] = []
        var counters = self.counters
        let sources = items.map { item in
            ResultSource.stage(
                item.role, answering: item.answering, ticket: item.ticket,
                ticketIsValid: store.tickets.isValid(item.ticket, for: OrderKey(merchant: item.outcome.merchant, orderId: item.outcome.orderId)))
        }
        try store.transaction {
            try store.prepareRecords(items.indices.map { (items[$0].outcome, sources[$0], items[$0].polled) }, now: now)
            for (item, source) in zip(items, sources) {
                let recorded = try store.record(
                    item.outcome, serialized: item.serialized, references: item.references, polled: item.polled, now: now, from: source)
                if let refusal = recorded.refused {
                    counters.resultsRefused += 1
                    effects.append(
                        .refuse(
                            "\(item.outcome.status.rawValue) outcome for \(item.outcome.merchant.prefix(64))/\(item.outcome.orderId.prefix(64)) refused: \(refusal)"
                        ))
                }
                if let text = recorded.emit {
                    counters.countOut(labels(item.outcome))
                    effects.append(.emit(Array(text.utf8)))
                    if item.outcome.status == .succeeded {
                        effects += try openSubscription(after: item.outcome, corrected: recorded.corrected, counters: &counters, now: now)
                        effects += try cancelSubscription(after: item.outcome, counters: &counters, now: now)
                    }
                    effects += try advanceSchedule(after: item.outcome, counters: &counters, now: now)
                    effects += try reconcile(after: item.outcome, counters: &counters, now: now)
                    effects += try reportRefund(after: item.outcome, counters: &counters, now: now)
                    effects += try changeSubscription(after: item.outcome, counters: &counters, now: now)
                }
                if let pending = recorded.becamePending {
                    effects.append(.poll(pollFrame(json: pending.json, pendingAt: pending.since, key: pending.key, generation: pending.generation)))
                }
            }
            try store.finishRecords(now: now)
        }
        self.counters = counters
        return effects
    }

    /// A request from a callback validator or a poller. The reply is sent only after this
    /// returns, so a `settle` is answered after its transaction has committed.
    package mutating func handle(_ request: LedgerRequest, now: Int64) -> (LedgerReply, [Effect]) {
        do {
            return try answer(request, now: now)
        } catch {
            return (.failure("the ledger store failed"), [])
        }
    }

    /// `handle`, with a store failure thrown for a caller that retries the request.
    package mutating func answer(_ request: LedgerRequest, now: Int64) throws -> (LedgerReply, [Effect]) {
        switch request {
        case .lookup(let key):
            return (.order(try store.lookup(key)), [])
        case .lookupRef(let provider, let ref, let merchant):
            return (.order(try store.lookup(provider: provider, ref: ref, merchant: merchant)), [])
        case .settle(let key, let event, let outcome):
            if let outcome {
                guard outcome.status.isTerminal, OrderKey(merchant: outcome.merchant, orderId: outcome.orderId) == key else {
                    return (.failure("settle takes the order's own terminal outcome"), [])
                }
            }
            var effects: [Effect] = []
            var refusal: String?
            // Counted in a copy, kept only once the transaction has committed.
            var updated = self.counters
            let (applied, duplicate, corrected) = try store.transaction { () throws -> (Bool, Bool, Bool) in
                if let event, try !store.recordCallbackEvent(event, for: key, now: now) { return (false, true, false) }
                guard let outcome else { return (false, false, false) }
                let recorded = try store.record(outcome, serialized: outcome.serialized, references: [], polled: false, now: now, from: .callback)
                refusal = recorded.refused
                // Nothing is kept, the event id included: the callback is not this order's.
                if refusal != nil, let event { try store.forgetCallbackEvent(event, of: key.merchant) }
                guard refusal == nil, let text = recorded.emit else { return (false, false, false) }
                effects.append(.emit(Array(text.utf8)))
                if outcome.status == .succeeded {
                    effects += try openSubscription(after: outcome, corrected: recorded.corrected, counters: &updated, now: now)
                    effects += try cancelSubscription(after: outcome, counters: &updated, now: now)
                }
                effects += try advanceSchedule(after: outcome, counters: &updated, now: now)
                effects += try reconcile(after: outcome, counters: &updated, now: now)
                effects += try reportRefund(after: outcome, counters: &updated, now: now)
                effects += try changeSubscription(after: outcome, counters: &updated, now: now)
                return (true, false, recorded.corrected)
            }
            if let refusal { return (.failure("refused: \(refusal)"), []) }
            counters = updated
            if applied {
                counters.callbacksApplied += 1
                if let outcome { counters.countOut(labels(outcome)) }
            }
            if corrected { counters.corrections += 1 }
            if duplicate { counters.callbacksDuplicate += 1 }
            return (.settled(applied: applied, duplicate: duplicate, corrected: corrected), effects)
        case .claim(let claims):
            let (until, maxLife) = (now + leaseMilliseconds, leaseMaxMilliseconds)
            return (.claimed(try store.transaction(logsOutcomes: false) { try store.claim(claims, until: until, now: now, maxLife: maxLife) }), [])
        case .subscriptionEvents(let events):
            return try recordSubscriptionEvents(events, now: now)
        case .dueChecks(let limit):
            // A check handed out and not answered (its poller died, its answer was lost or came
            // under a stale ticket) is offered again after this lapse: no longer than a minute,
            // and for short recheck intervals a few of them, so one lost answer costs little.
            let retryAt = now + min(60_000, max(2_000, 5 * entitlementRecheckMilliseconds))
            return (
                .dueChecks(
                    try store.transaction(logsOutcomes: false) {
                        try store.dueEntitlementChecks(providers: checkedProviders, now: now, retryAt: retryAt, limit: limit)
                    }),
                []
            )
        case .checked(let results):
            return try recordChecks(results, now: now)
        case .subscription(let merchant, let provider, let reference):
            return (.subscription(try store.subscription(merchant: merchant, provider: provider, reference: reference)), [])
        case .resumePolls:
            let operations = polledOperations
            let pending = try store.transaction(logsOutcomes: false) {
                try operations.flatMap { operation in
                    try store.pendingToDispatch(operation: operation, pendingBefore: .max, dispatchedBefore: .max, now: now, limit: 1_000_000)
                }
            }
            return (
                .resumed(count: pending.count),
                pending.map { .poll(pollFrame(json: $0.json, pendingAt: $0.pendingAt, key: $0.key, generation: $0.generation)) }
            )
        }
    }

    /// Orders that stalled (their holder died and its lease lapsed, nobody claimed their
    /// dispatch, or their outcome stayed unknown) go out again as a new generation, which the
    /// submitter resolves before sending anything again; past `maxDispatches` claimed ones they go
    /// to review.
    /// Pending orders get what their connector asked for: a status check once their callback
    /// is overdue and again every wait, the last one once they are pending
    /// `pendingExpireAfterMilliseconds`; or the pollers again once they were lost with a poller.
    package mutating func redeliver(now: Int64, limit: Int = 1000) throws -> [Effect] {
        let followUps = self.followUps
        let cutoff = now - redeliverAfterMilliseconds
        let expiredBefore = now - pendingExpireAfterMilliseconds
        var redelivered = 0, statusChecks = 0, capped = 0
        // Counted in a copy, kept only once the transaction has committed.
        var updated = counters
        let (maxDispatches, leaseMaxMilliseconds) = (self.maxDispatches, self.leaseMaxMilliseconds)
        let effects = try store.transaction { () throws -> [Effect] in
            let stalled = try store.stalled(
                dispatchedBefore: cutoff, now: now, limit: limit, maxDispatches: maxDispatches, maxLeaseLife: leaseMaxMilliseconds)
            redelivered += stalled.redispatch.count
            var effects = stalled.redispatch.map {
                Effect.dispatch(
                    DispatchFrame.encode(
                        orderJSON: $0.json, acceptedAt: $0.acceptedAt, generation: $0.generation,
                        token: store.tickets.token(for: $0.key, generation: $0.generation)))
            }
            for order in stalled.exhausted {
                let outcome = Outcome(
                    orderId: order.key.orderId, merchant: order.key.merchant, provider: order.provider, operation: order.operation,
                    status: .unknown, error: .init(code: .needsReview, message: order.reason),
                    attempts: 0, at: Timestamp.iso8601(milliseconds: now))
                let recorded = try store.record(outcome, serialized: outcome.serialized, references: [], polled: false, now: now, from: .ledger)
                if let text = recorded.emit {
                    capped += 1
                    updated.countOut(labels(outcome))
                    effects.append(.emit(Array(text.utf8)))
                }
            }
            for (operation, followUp) in followUps {
                switch followUp {
                case .statusCheck(let wait):
                    // Expired ones first: marked dispatched, the regular sweep below skips them.
                    for (purpose, pendingBefore) in [(DispatchPurpose.expiryCheck, expiredBefore), (.statusCheck, now - wait)] {
                        let due = try store.pendingToDispatch(
                            operation: operation, pendingBefore: pendingBefore, dispatchedBefore: now - wait, now: now, limit: limit)
                        statusChecks += due.count
                        effects += due.map {
                            .dispatch(
                                DispatchFrame.encode(
                                    orderJSON: $0.json, acceptedAt: $0.pendingAt, purpose: purpose, pending: $0.result, generation: $0.generation,
                                    token: store.tickets.token(for: $0.key, generation: $0.generation)))
                        }
                    }
                case .poll(let lostAfter):
                    let lost = try store.pendingToDispatch(
                        operation: operation, pendingBefore: now - lostAfter, dispatchedBefore: now - lostAfter, now: now, limit: limit)
                    redelivered += lost.count
                    effects += lost.map { .poll(pollFrame(json: $0.json, pendingAt: $0.pendingAt, key: $0.key, generation: $0.generation)) }
                }
            }
            effects += try endSubscriptions(counters: &updated, now: now, limit: limit)
            effects += try chargeDueSchedules(counters: &updated, now: now, limit: scheduleBatch)
            effects += try reconcileDuePayments(counters: &updated, now: now, limit: scheduleBatch)
            return effects
        }
        counters = updated
        counters.redelivered += redelivered
        counters.statusChecks += statusChecks
        counters.dispatchCapReached += capped
        return effects
    }
}

extension LedgerCore {
    /// A pending order for the pollers, with the ticket of the generation it goes out as.
    func pollFrame(json: String, pendingAt: Int64, key: OrderKey, generation: Int64) -> [UInt8] {
        DispatchFrame.encode(
            orderJSON: json, acceptedAt: pendingAt, generation: generation, token: store.tickets.token(for: key, generation: generation))
    }
}

/// Puts the secrets a connector withheld from the store (`ProviderConnector.withholdingSecrets`)
/// back into an outcome on its way upstream, live or replayed. Outcomes without a withheld mark
/// pass as they are.
package struct OutcomeRevealer: Sendable {
    let registry: ConnectorRegistry

    /// nil when no connector withholds anything.
    init?(registry: ConnectorRegistry) {
        guard registry.connectors.contains(where: { !type(of: $0).outcomeSecretSettings.isEmpty }) else { return nil }
        self.registry = registry
    }

    package func reveal(_ bytes: [UInt8]) -> [UInt8] {
        // Every outcome upstream gets passes here: the bytes are searched before anything is built.
        guard Self.hasMark(bytes), let outcome = try? Outcome.parse(bytes),
            let connector = registry.connector(for: Provider(outcome.provider)),
            let revealed = Outcome.revealing(
                String(decoding: bytes, as: UTF8.self), value: { connector.withheldSecret(named: $0, merchant: outcome.merchant) })
        else { return bytes }
        return Array(revealed.utf8)
    }

    static let mark = Array("!withheld:".utf8)

    static func hasMark(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBufferPointer { buffer in
            var index = 0
            let last = buffer.count - mark.count
            while index <= last {
                if buffer[index] == UInt8(ascii: "!"), mark.indices.allSatisfy({ buffer[index + $0] == mark[$0] }) { return true }
                index += 1
            }
            return false
        }
    }
}

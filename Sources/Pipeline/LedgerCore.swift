import PaypipeCore

/// The ledger's core: frames in, effects out. It owns the store (durable dedupe and state) and
/// nothing else; sockets and clocks stay in the executable.
public struct LedgerCore {
    public enum Effect: Sendable, Equatable {
        /// An order for the signers: `{"order":…,"acceptedAt":ms}`.
        case dispatch([UInt8])
        /// An outcome for upstream.
        case emit([UInt8])
        /// A frame that was not a JSON object: counted and logged without content, no outcome.
        case drop(Rejection)
        /// An accepted Cleeng receipt for the pollers: `{"order":…,"acceptedAt":ms}` with the
        /// time the receipt was accepted, from which its whole polling schedule derives.
        case poll([UInt8])
    }

    /// When the asynchronous flows need the ledger to act.
    public struct AsyncTimers: Sendable, Equatable {
        /// A PhonePe authInit pending this long without a callback is resolved with the auth status call.
        public var phonepeCallbackWaitMs: Int64
        /// A Cleeng receipt still pending this long after acceptance was lost with a poller:
        /// it goes to the pollers again (they make one last check, then end it).
        public var cleengLostAfterMs: Int64

        public init(phonepeCallbackWaitMs: Int64 = 900_000, cleengLostAfterMs: Int64 = 90_000) {
            self.phonepeCallbackWaitMs = phonepeCallbackWaitMs
            self.cleengLostAfterMs = cleengLostAfterMs
        }

        public init(_ timers: PaypipeConfig.Timers) {
            self.init(
                phonepeCallbackWaitMs: timers.phonepeCallbackWaitMs,
                cleengLostAfterMs: timers.cleengGiveUpMs + max(2 * timers.cleengPollIntervalMs, 30_000))
        }
    }

    public struct Counters: Sendable, Equatable {
        public var ordersIn = 0
        public var duplicates = 0
        public var dropped: [String: Int] = [:]
        public var outcomesOut: [String: Int] = [:]
        public var redelivered = 0
        public var callbacksApplied = 0
        public var callbacksDuplicate = 0
        public var statusChecks = 0
    }

    public let store: LedgerStore
    public private(set) var counters = Counters()
    /// Orders without a terminal or pending outcome are dispatched again after this long.
    public var redeliverAfterMilliseconds: Int64
    public var timers: AsyncTimers

    public init(store: LedgerStore, redeliverAfterMilliseconds: Int64 = 60_000, timers: AsyncTimers = AsyncTimers()) {
        self.store = store
        self.redeliverAfterMilliseconds = redeliverAfterMilliseconds
        self.timers = timers
    }

    /// Upstream orders: validated, deduplicated and recorded in one transaction; dispatched only
    /// once that transaction has committed (the caller performs effects in order after return).
    public mutating func intake(_ frames: [[UInt8]], now: Int64) throws -> [Effect] {
        var effects: [Effect] = []
        var counters = self.counters
        /// A first sighting gets `firstTime`; a repeat gets its latest outcome again, if any.
        func admitted(_ admission: LedgerStore.Admission, firstTime: Effect) {
            switch admission {
            case .new: effects.append(firstTime)
            case .duplicate(let stored):
                counters.duplicates += 1
                effects.append(.emit(Array(stored.utf8)))
            case .duplicateInFlight: counters.duplicates += 1
            }
        }
        try store.transaction {
            for frame in frames {
                counters.ordersIn += 1
                switch Order.decode(frame: frame) {
                case .dropped(let rejection):
                    counters.dropped[rejection.code.rawValue, default: 0] += 1
                    effects.append(.drop(rejection))
                case .rejected(let rejection, let identity):
                    let outcome = Outcome.rejected(rejection, identity: identity, at: Timestamp.iso8601(milliseconds: now))
                    let text = outcome.serialized
                    if Order.isValidOrderId(identity.orderId) {
                        let admission = try store.admitRejection(OrderKey(merchant: identity.merchant, orderId: identity.orderId), outcome: text, now: now)
                        admitted(admission, firstTime: .emit(Array(text.utf8)))
                    } else {
                        effects.append(.emit(Array(text.utf8)))
                    }
                    counters.outcomesOut["rejected", default: 0] += 1
                case .order(let order):
                    let json = order.json.serialized
                    admitted(try store.admit(order, json: json, now: now), firstTime: .dispatch(LedgerCore.dispatchFrame(orderJSON: json, acceptedAt: now)))
                }
            }
        }
        self.counters = counters
        return effects
    }

    /// Outcomes from the stages: recorded, then forwarded upstream unless superseded.
    public mutating func results(_ frames: [[UInt8]], now: Int64) throws -> [Effect] {
        var effects: [Effect] = []
        var counters = self.counters
        try store.transaction {
            for frame in frames {
                guard let outcome = try? Outcome.parse(frame) else { continue }
                let recorded = try store.record(outcome, serialized: String(decoding: frame, as: UTF8.self), now: now)
                if let text = recorded.emit {
                    counters.outcomesOut[outcome.status.rawValue, default: 0] += 1
                    effects.append(.emit(Array(text.utf8)))
                }
                if let pending = recorded.becamePending, outcome.provider == Provider.cleeng.rawValue {
                    effects.append(.poll(LedgerCore.dispatchFrame(orderJSON: pending.json, acceptedAt: pending.since)))
                }
            }
        }
        self.counters = counters
        return effects
    }

    /// A request from a callback validator or a poller. The reply is sent only after this
    /// returns, so a `settle` is answered after its transaction has committed.
    public mutating func handle(_ request: LedgerRequest, now: Int64) -> (LedgerReply, [Effect]) {
        do {
            switch request {
            case .lookup(let key):
                return (.order(try store.lookup(key)), [])
            case .lookupRef(let provider, let ref):
                return (.order(try store.lookup(provider: provider, ref: ref)), [])
            case .settle(let key, let event, let outcome):
                if let outcome {
                    guard outcome.status.isTerminal, outcome.merchant == key.merchant, outcome.orderId == key.orderId else {
                        return (.failure("settle takes the order's own terminal outcome"), [])
                    }
                }
                var effects: [Effect] = []
                let (applied, duplicate) = try store.transaction { () throws -> (Bool, Bool) in
                    if let event, try !store.recordCallbackEvent(event, for: key, now: now) { return (false, true) }
                    guard let outcome, let text = try store.record(outcome, serialized: outcome.serialized, now: now).emit else { return (false, false) }
                    effects.append(.emit(Array(text.utf8)))
                    return (true, false)
                }
                if applied {
                    counters.callbacksApplied += 1
                    counters.outcomesOut[outcome?.status.rawValue ?? "", default: 0] += 1
                }
                if duplicate { counters.callbacksDuplicate += 1 }
                return (.settled(applied: applied, duplicate: duplicate), effects)
            case .resumePolls:
                let pending = try store.transaction {
                    try store.pendingToDispatch(
                        provider: .cleeng, operation: .appleReceipt, pendingBefore: .max, dispatchedBefore: .max, now: now, limit: 1_000_000)
                }
                return (.resumed(count: pending.count), pending.map { .poll(LedgerCore.dispatchFrame(orderJSON: $0.json, acceptedAt: $0.pendingAt)) })
            }
        } catch {
            return (.failure("the ledger store failed"), [])
        }
    }

    /// Orders that stalled (a stage crashed with them, a TCP reset dropped them, or their
    /// outcome stayed unknown) go out again; every provider reference is idempotent.
    /// Also: PhonePe authInits whose callback never came go to the signers for a status
    /// check, and Cleeng receipts lost with a poller go to the pollers again.
    public mutating func redeliver(now: Int64, limit: Int = 1000) throws -> [Effect] {
        let timers = self.timers
        let (stalled, overdue, lost) = try store.transaction {
            let stalled = try store.stalled(dispatchedBefore: now - redeliverAfterMilliseconds, now: now, limit: limit)
            let waitCutoff = now - timers.phonepeCallbackWaitMs
            let overdue = try store.pendingToDispatch(
                provider: .phonepe, operation: .authInit, pendingBefore: waitCutoff, dispatchedBefore: waitCutoff, now: now, limit: limit)
            let lostCutoff = now - timers.cleengLostAfterMs
            let lost = try store.pendingToDispatch(
                provider: .cleeng, operation: .appleReceipt, pendingBefore: lostCutoff, dispatchedBefore: lostCutoff, now: now, limit: limit)
            return (stalled, overdue, lost)
        }
        counters.redelivered += stalled.count + lost.count
        counters.statusChecks += overdue.count
        return stalled.map { .dispatch(LedgerCore.dispatchFrame(orderJSON: $0.0, acceptedAt: $0.1)) }
            + overdue.map { .dispatch(LedgerCore.dispatchFrame(orderJSON: $0.json, acceptedAt: $0.pendingAt, statusCheck: true)) }
            + lost.map { .poll(LedgerCore.dispatchFrame(orderJSON: $0.json, acceptedAt: $0.pendingAt)) }
    }

    /// `statusCheck`: the order was submitted and its confirmation never came; ask the
    /// provider's status call instead of submitting (PhonePe missed callbacks).
    static func dispatchFrame(orderJSON: String, acceptedAt: Int64, statusCheck: Bool = false) -> [UInt8] {
        Array("{\"acceptedAt\":\(acceptedAt),\(statusCheck ? "\"statusCheck\":true," : "")\"order\":\(orderJSON)}".utf8)
    }

    /// A dispatch or poll frame read back by a signer or a poller.
    public struct Dispatch: Sendable, Equatable {
        public var order: Order
        public var acceptedAt: Int64
        public var statusCheck: Bool
    }

    public static func readDispatch(_ frame: [UInt8]) -> Dispatch? {
        guard case .object(let object) = try? JSONValue.parse(frame), let orderObject = object["order"]?.objectValue,
            let order = try? Order(validating: orderObject)
        else { return nil }
        return Dispatch(order: order, acceptedAt: object["acceptedAt"]?.integerValue ?? 0, statusCheck: object["statusCheck"]?.boolValue ?? false)
    }
}

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
    }

    public struct Counters: Sendable, Equatable {
        public var ordersIn = 0
        public var duplicates = 0
        public var dropped: [String: Int] = [:]
        public var outcomesOut: [String: Int] = [:]
        public var redelivered = 0
    }

    public let store: LedgerStore
    public private(set) var counters = Counters()
    /// Orders without a terminal or pending outcome are dispatched again after this long.
    public var redeliverAfterMilliseconds: Int64

    public init(store: LedgerStore, redeliverAfterMilliseconds: Int64 = 60_000) {
        self.store = store
        self.redeliverAfterMilliseconds = redeliverAfterMilliseconds
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
    public mutating func results(_ frames: [[UInt8]]) throws -> [Effect] {
        var effects: [Effect] = []
        var counters = self.counters
        try store.transaction {
            for frame in frames {
                guard let outcome = try? Outcome.parse(frame) else { continue }
                if let text = try store.record(outcome, serialized: String(decoding: frame, as: UTF8.self)) {
                    counters.outcomesOut[outcome.status.rawValue, default: 0] += 1
                    effects.append(.emit(Array(text.utf8)))
                }
            }
        }
        self.counters = counters
        return effects
    }

    /// Orders that stalled (a stage crashed with them, a TCP reset dropped them, or their
    /// outcome stayed unknown) go out again; every provider reference is idempotent.
    public mutating func redeliver(now: Int64, limit: Int = 1000) throws -> [Effect] {
        let stalled = try store.transaction { try store.stalled(dispatchedBefore: now - redeliverAfterMilliseconds, now: now, limit: limit) }
        counters.redelivered += stalled.count
        return stalled.map { .dispatch(LedgerCore.dispatchFrame(orderJSON: $0.0, acceptedAt: $0.1)) }
    }

    static func dispatchFrame(orderJSON: String, acceptedAt: Int64) -> [UInt8] {
        Array("{\"acceptedAt\":\(acceptedAt),\"order\":\(orderJSON)}".utf8)
    }

    /// Reads a dispatch frame back (signer side).
    public static func readDispatch(_ frame: [UInt8]) -> (Order, Int64)? {
        guard case .object(let object) = try? JSONValue.parse(frame), let orderObject = object["order"]?.objectValue,
            let order = try? Order(validating: orderObject)
        else { return nil }
        return (order, object["acceptedAt"]?.integerValue ?? 0)
    }
}

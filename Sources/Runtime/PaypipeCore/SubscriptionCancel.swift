/// A `cancel` order (docs/protocol.md, "Cancelling a subscription"): the subscription is
/// stopped at its provider (Trust Payments' engine, PhonePe's mandate), or, where the provider
/// has nothing to stop (Nets), paypipe simply charges it no more. Its `succeeded` outcome
/// cancels the subscription in the ledger: schedule, state and `paidThrough` together.
///
/// The ledger checks the subscription against its own record before anything is sent, and adds
/// what the record holds (`params.record`) for the signer, which has no store.
public struct SubscriptionCancel: Sendable, Equatable {
    /// Until when the customer keeps what was paid for.
    public enum When: String, Sendable, CaseIterable {
        /// Paid through the moment the cancellation succeeds.
        case now
        /// Paid through the end of the period already paid (the default: nothing was refunded).
        case atPeriodEnd
    }

    /// What the ledger knew of the subscription when it took the order in.
    public struct Record: Sendable, Equatable {
        /// The order that opened the subscription.
        public var orderId: String
        /// What charging it on schedule takes (`ScheduledCharging.target`); nil for a provider
        /// that charges by itself.
        public var target: JSONValue?

        public init(orderId: String, target: JSONValue?) {
            self.orderId = orderId
            self.target = target
        }

        public var json: JSONValue { ["orderId": .string(orderId), "target": target ?? .null] }
    }

    /// The operation name every subscription provider declares.
    public static let operationName = "cancel"
    /// The param the ledger writes; upstream may not.
    public static let recordParam = "record"
    public static let defaultWhen = When.atPeriodEnd

    /// The provider's reference of the subscription, as its events name it.
    public var subscription: String
    public var at: When
    /// nil until the ledger has taken the order in.
    public var record: Record?

    public init(subscription: String, at: When = defaultWhen, record: Record? = nil) {
        self.subscription = subscription
        self.at = at
        self.record = record
    }

    /// Reads a `cancel` order. `fromUpstream`: the order as upstream sent it, which may not
    /// carry `params.record`; otherwise as the ledger stored it, which must.
    public init(order: Order, fromUpstream: Bool) throws(Rejection) {
        let params = order.params
        if fromUpstream, params[Self.recordParam] != nil {
            throw Rejection(.unknownField, field: "params.record", "params.record is written by the ledger, not by upstream")
        }
        for key in params.keys where !["subscription", "at", Self.recordParam].contains(key) {
            throw Rejection(.unknownField, field: "params.\(key)", "params.\(key) is not a field of a cancel order (allowed: at, subscription)")
        }
        guard let value = params["subscription"] else { throw Rejection.missingParam("subscription") }
        guard let subscription = value.stringValue else { throw Rejection.invalidParam("subscription", "must be a string, got \(value.typeName)") }
        guard !subscription.isEmpty, subscription.utf8.count <= 256 else { throw Rejection.invalidParam("subscription", "must be 1-256 bytes") }
        var at = Self.defaultWhen
        if let value = params["at"] {
            guard let name = value.stringValue, let when = When(rawValue: name) else {
                throw Rejection.invalidParam("at", "must be one of \(When.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            at = when
        }
        var record: Record?
        if !fromUpstream {
            guard let stored = params[Self.recordParam], let orderId = stored["orderId"]?.stringValue else {
                throw Rejection(.unreadableWork, field: "params.record", "params.record is missing: the ledger did not take this order in")
            }
            let target = stored["target"]
            record = Record(orderId: orderId, target: target == .null ? nil : target)
        }
        self.init(subscription: subscription, at: at, record: record)
    }

    /// The order as the ledger stores and dispatches it: upstream's, with `record` added.
    public static func recorded(_ order: Order, record: Record) -> Order {
        var recorded = order
        recorded.params[recordParam] = record.json
        return recorded
    }

    /// What a connector's `succeeded` outcome of a cancel may carry: when the period already
    /// paid ends (epoch ms), as the provider counts it, for a subscription paypipe does not
    /// schedule.
    public static let periodEndsAtResult = "periodEndsAt"
}

/// Something a provider reported about a subscription after its first payment (docs/protocol.md,
/// "Subscription events"): a renewal charged or declined, the subscription or mandate changing
/// state, an entitlement granted or lapsing. A connector reads it from an authentic callback (or
/// an entitlement check); the ledger records it once per `eventId`, against the subscription
/// record its first order opened, and logs it beside the outcomes for merchants that asked for
/// events.
public struct SubscriptionEvent: Sendable, Equatable {
    public enum Kind: String, Sendable, CaseIterable {
        case renewalScheduled = "renewal.scheduled"
        case renewalSucceeded = "renewal.succeeded"
        case renewalSettled = "renewal.settled"
        case renewalFailed = "renewal.failed"
        /// A scheduled cycle was declined and is tried again at `dueAt` (the retry policy).
        case renewalRetrying = "renewal.retrying"
        /// A scheduled cycle was declined on every attempt the policy allows: it is given up.
        case renewalAbandoned = "renewal.abandoned"
        /// Scheduled cycles `cycle` to `lastCycle` fell due beyond the catch-up limit: they are
        /// not charged.
        case renewalSkipped = "renewal.skipped"
        /// A schedule stopped for an operator's word (`reason`): nothing is charged until a
        /// `schedule` order resumes, sets or cancels it.
        case scheduleReview = "schedule.review"
        case subscriptionActivated = "subscription.activated"
        case subscriptionSuspended = "subscription.suspended"
        /// The merchant's dunning paused the schedule after its unpaid cycles (`onExhausted: pause`).
        case subscriptionPaused = "subscription.paused"
        /// The merchant resumed (a `schedule` order) a schedule its dunning had paused.
        case subscriptionResumed = "subscription.resumed"
        case subscriptionCancelled = "subscription.cancelled"
        case subscriptionEnded = "subscription.ended"
        /// The series was made longer (Trust Payments: a raised `subscriptionfinalnumber`); one
        /// that had ended on its old last payment is active again.
        case subscriptionExtended = "subscription.extended"
        case mandateRevoked = "mandate.revoked"
        case mandatePaused = "mandate.paused"
        case mandateResumed = "mandate.resumed"
        case entitlementGranted = "entitlement.granted"
        case entitlementExpired = "entitlement.expired"
        case correction
        /// A refund of one of the subscription's payments (its first, or a cycle's) gave the
        /// money back; `providerReference` is the refunded order's id.
        case refundSucceeded = "refund.succeeded"
        /// A refund of one of the subscription's payments ended without giving money back.
        case refundFailed = "refund.failed"

        /// The subscription's state once this event is recorded; nil: the state does not change.
        public var state: SubscriptionState? {
            switch self {
            case .renewalSucceeded, .subscriptionActivated, .mandateResumed, .entitlementGranted, .subscriptionExtended, .subscriptionResumed: .active
            case .renewalFailed, .renewalAbandoned: .pastDue
            case .subscriptionSuspended: .suspended
            case .subscriptionCancelled: .cancelled
            case .subscriptionEnded: .ended
            case .mandateRevoked: .revoked
            case .mandatePaused, .subscriptionPaused: .paused
            case .entitlementExpired: .expired
            case .renewalScheduled, .renewalSettled, .renewalRetrying, .renewalSkipped, .scheduleReview, .correction, .refundSucceeded, .refundFailed:
                nil
            }
        }

        /// The result of one charge (its success, its decline, the cycle given up), as opposed
        /// to the provider's word about the subscription or mandate itself.
        public var isChargeResult: Bool { self == .renewalSucceeded || self == .renewalFailed || self == .renewalAbandoned }
    }

    public var merchant: String
    public var provider: Provider
    /// The provider's reference of the subscription (Trust Payments: the first AUTH's
    /// transactionreference; Nets: subscriptionId; PhonePe: subscriptionId; Cleeng: offerId and
    /// customer).
    public var subscription: String
    /// What makes this report one event: the provider's own id of it, so that a redelivery, or
    /// the same fact seen twice, is one event.
    public var dedupeKey: String
    public var kind: Kind
    /// Minor units, where money moved or was asked for.
    public var amount: Int64?
    public var currency: String?
    /// The provider's reference of this charge or change (a transaction, a charge, a notification).
    public var providerReference: String?
    /// The renewal's number in the series, where the provider counts (the first payment is 1).
    public var cycle: Int64?
    /// The last of a run of cycles that starts at `cycle` (`renewal.skipped`).
    public var lastCycle: Int64?
    /// When the entitlement now ends (epoch ms), where the provider says.
    public var expiresAt: Int64?
    /// The provider's code when a charge was declined, or why the state changed.
    public var reason: String?
    /// When the next attempt is due (epoch ms): a retry's time.
    public var dueAt: Int64?
    /// Until when the customer has paid (epoch ms): a cancellation's, so that access can end
    /// then rather than at once.
    public var paidThrough: Int64?

    public init(
        merchant: String, provider: Provider, subscription: String, dedupeKey: String, kind: Kind, amount: Int64? = nil,
        currency: String? = nil, providerReference: String? = nil, cycle: Int64? = nil, lastCycle: Int64? = nil, expiresAt: Int64? = nil,
        reason: String? = nil, dueAt: Int64? = nil, paidThrough: Int64? = nil
    ) {
        self.merchant = merchant
        self.provider = provider
        self.subscription = subscription
        self.dedupeKey = dedupeKey
        self.kind = kind
        self.amount = amount
        self.currency = currency
        self.providerReference = providerReference
        self.cycle = cycle
        self.lastCycle = lastCycle
        self.expiresAt = expiresAt
        self.reason = reason
        self.dueAt = dueAt
        self.paidThrough = paidThrough
    }

    /// Stable for the same provider fact, whichever copy of the pipeline sees it and however
    /// often the provider sends it.
    public var eventId: String {
        "evt_" + Digest.sha256Hex(Array("\(merchant)\u{0}\(provider.rawValue)\u{0}\(subscription)\u{0}\(dedupeKey)".utf8)).prefix(32)
    }

    /// The message upstream gets (without `seq` and `epoch`, which the log adds). `origin`: the
    /// order that opened the subscription; `state`: the subscription's state after this event.
    public func message(origin: OrderKey, state: SubscriptionState, at: String) -> JSONValue {
        var o: [String: JSONValue] = [
            "kind": "event", "eventId": .string(eventId), "type": .string(kind.rawValue), "merchant": .string(merchant),
            "provider": .string(provider.rawValue),
            "subscription": ["reference": .string(subscription), "orderId": .string(origin.orderId), "state": .string(state.rawValue)],
            "at": .string(at),
        ]
        o.merge(details(expiry: .string(expiresAt.map { Timestamp.iso8601(milliseconds: $0) } ?? ""))) { first, _ in first }
        if let dueAt { o["dueAt"] = .string(Timestamp.iso8601(milliseconds: dueAt)) }
        if let paidThrough { o["paidThrough"] = .string(Timestamp.iso8601(milliseconds: paidThrough)) }
        return .object(o)
    }

    /// The report as the ledger RPC carries it.
    public var json: JSONValue {
        var o: [String: JSONValue] = [
            "merchant": .string(merchant), "provider": .string(provider.rawValue), "subscription": .string(subscription),
            "dedupeKey": .string(dedupeKey), "kind": .string(kind.rawValue),
        ]
        o.merge(details(expiry: .integer(expiresAt ?? 0))) { first, _ in first }
        if let dueAt { o["dueAt"] = .integer(dueAt) }
        return .object(o)
    }

    /// The optional facts, each only when known; `expiry`: how `expiresAt` is written.
    private func details(expiry: JSONValue) -> [String: JSONValue] {
        var o: [String: JSONValue] = [:]
        if let amount { o["amount"] = .integer(amount) }
        if let currency { o["currency"] = .string(currency) }
        if let providerReference { o["providerReference"] = .string(providerReference) }
        if let cycle { o["cycle"] = .integer(cycle) }
        if let lastCycle { o["lastCycle"] = .integer(lastCycle) }
        if expiresAt != nil { o["expiresAt"] = expiry }
        if let reason { o["reason"] = .string(reason) }
        return o
    }

    public init?(json: JSONValue) {
        guard let merchant = json["merchant"]?.stringValue, let provider = json["provider"]?.stringValue,
            let subscription = json["subscription"]?.stringValue, let dedupeKey = json["dedupeKey"]?.stringValue,
            let kind = json["kind"]?.stringValue.flatMap(Kind.init(rawValue:)), !subscription.isEmpty, subscription.utf8.count <= 256,
            !dedupeKey.isEmpty, dedupeKey.utf8.count <= 512
        else { return nil }
        self.init(
            merchant: merchant, provider: Provider(provider), subscription: subscription, dedupeKey: dedupeKey, kind: kind,
            amount: json["amount"]?.integerValue, currency: json["currency"]?.stringValue,
            providerReference: json["providerReference"]?.stringValue, cycle: json["cycle"]?.integerValue,
            lastCycle: json["lastCycle"]?.integerValue, expiresAt: json["expiresAt"]?.integerValue, reason: json["reason"]?.stringValue,
            dueAt: json["dueAt"]?.integerValue)
    }
}

/// Where a subscription stands, as its events left it.
public enum SubscriptionState: String, Sendable, CaseIterable {
    case active
    /// The last renewal was declined.
    case pastDue = "past_due"
    case suspended, paused, expired
    case cancelled, ended, revoked

    /// No provider charges it again.
    public var isFinal: Bool { self == .cancelled || self == .ended || self == .revoked }

    /// Where a subscription that stood here stands once an event of `kind` is recorded: the one
    /// rule of precedence between states (docs/protocol.md, "Subscription events"). A final state
    /// is left only for another final one: a late renewal report changes the history, not the
    /// state. A paused mandate is not resumed or made `past_due` by the result of a charge (one
    /// attempted before the pause and reported after it): only the provider's word about the
    /// mandate or subscription moves it.
    public func after(_ kind: SubscriptionEvent.Kind) -> SubscriptionState {
        guard let next = kind.state else { return self }
        // A series that ended on its last payment goes on when the provider is told to make more.
        if self == .ended && kind == .subscriptionExtended { return next }
        if isFinal { return next.isFinal ? next : self }
        if self == .paused && kind.isChargeResult { return self }
        return next
    }
}

/// A change an order's success makes to a subscription the ledger already keeps (Trust
/// Payments: a `transactionUpdate` that raises `subscriptionfinalnumber`).
public struct SubscriptionChange: Sendable, Equatable {
    /// The subscription's reference, as its events name it.
    public var reference: String
    /// The series' new last payment number; nil: no end.
    public var finalCycle: Int64?

    public init(reference: String, finalCycle: Int64?) {
        self.reference = reference
        self.finalCycle = finalCycle
    }
}

/// What a first order's success opens: the subscription record events are recorded against,
/// which outlives the order's compaction.
public struct SubscriptionOpening: Sendable, Equatable {
    /// The provider's reference of the subscription, as its later events name it.
    public var reference: String
    /// The last payment's number in the series, when the provider stops there by itself
    /// (Trust Payments' `subscriptionfinalnumber`).
    public var finalCycle: Int64?
    /// When the subscription ends (epoch ms), when the order says (Nets' `endDate`).
    public var endsAt: Int64?
    /// What an entitlement check needs (Cleeng's offer and customer token); nil: not checked.
    public var check: JSONValue?
    /// When the entitlement runs out, where the first order's result says (epoch ms).
    public var expiresAt: Int64?

    public init(reference: String, finalCycle: Int64? = nil, endsAt: Int64? = nil, check: JSONValue? = nil, expiresAt: Int64? = nil) {
        self.reference = reference
        self.finalCycle = finalCycle
        self.endsAt = endsAt
        self.check = check
        self.expiresAt = expiresAt
    }
}

/// How the pollers check a subscription's entitlement, for a provider that pushes nothing when
/// access lapses (Cleeng): each check is one request built from what the subscription's
/// opening kept (`SubscriptionOpening.check`), and its answer decides the event, if any.
public protocol EntitlementChecking: Sendable {
    /// How long after a check the next one is due at the latest; a check is also due at the
    /// entitlement's expiry.
    func recheckInterval(timers: PaypipeConfig.Timers) -> Int64
    func checkRequest(_ check: JSONValue) -> HTTPRequestSpec?
    /// What the answer says about access; nil when it says nothing (an error, an unreadable body).
    func readCheck(_ response: HTTPResponseSpec) -> EntitlementReading?
}

/// One entitlement check's answer.
public struct EntitlementReading: Sendable, Equatable {
    public var granted: Bool
    /// Epoch ms, when the provider says.
    public var expiresAt: Int64?

    public init(granted: Bool, expiresAt: Int64?) {
        self.granted = granted
        self.expiresAt = expiresAt
    }

    /// The event this reading makes of a subscription that stood at `state` since `stateSince`
    /// (epoch ms, when its record last changed), its entitlement known to run until
    /// `knownExpiry`: access newly granted, extended (a renewal) or lapsed. A renewal is keyed by
    /// the expiry it reports. A grant or a lapse is a change away from the state the subscription
    /// was in, so it is keyed by that state's start too: a lapse after a re-grant is a new fact
    /// even when both lapses report no expiry, while two readings of one lapse, both taken from
    /// the same record, make one event.
    public func event(
        merchant: String, provider: Provider, subscription: String, state: SubscriptionState, stateSince: Int64?, knownExpiry: Int64?
    ) -> SubscriptionEvent? {
        let expiry = expiresAt.map(String.init) ?? "none"
        func event(_ kind: SubscriptionEvent.Kind, from since: Int64?) -> SubscriptionEvent {
            let key = since.map { "\(kind.rawValue)|\(expiry)|since \($0)" } ?? "\(kind.rawValue)|\(expiry)"
            return SubscriptionEvent(
                merchant: merchant, provider: provider, subscription: subscription, dedupeKey: key, kind: kind, expiresAt: expiresAt)
        }
        if !granted { return state == .expired || state.isFinal ? nil : event(.entitlementExpired, from: stateSince) }
        if state != .active { return event(.entitlementGranted, from: stateSince) }
        if let expiresAt, let knownExpiry, expiresAt > knownExpiry { return event(.renewalSucceeded, from: nil) }
        return nil
    }
}

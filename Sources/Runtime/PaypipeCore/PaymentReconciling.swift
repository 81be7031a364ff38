/// How the ledger finds a subscription payment the provider took by itself but whose report
/// never arrived (docs/protocol.md, "Reconciliation"), for a provider that charges on its own
/// schedule and reports each payment only by callback (Trust Payments' subscription engine). The
/// ledger keeps when the next payment falls due; once its report is late by `window`, it makes a
/// query order (signed and sent as any order, so no stage without the provider's secrets asks),
/// and reads the events from the query's outcome with the same dedupe keys the callback would
/// have carried, so that whichever comes second records nothing.
public protocol PaymentReconciling: Sendable {
    /// How long after a payment falls due its report may take before it is asked for (ms).
    var window: Int64 { get }
    /// How long after an ask that found nothing it is asked again (ms).
    var retryInterval: Int64 { get }
    /// How many asks find nothing before the payment is handed to a person.
    var maxAsks: Int64 { get }
    /// What watching the payments of the subscription that `order` opened (at `openedAt`,
    /// epoch ms on the schedules' clock) takes, and the number of its first payment after the
    /// order's own; nil when its payments are not watched.
    func plan(for order: Order, opening: SubscriptionOpening, openedAt: Int64) -> (plan: JSONValue, firstPayment: Int64)?
    /// When payment `payment` of a plan falls due (epoch ms, the start of its day); nil when the
    /// series has no such payment.
    func dueAt(payment: Int64, plan: JSONValue) -> Int64?
    /// `plan` with the series' last payment moved to `finalPayment` (nil: the series has no
    /// end), once the provider has taken the change (`ProviderConnector.subscriptionChange`).
    func plan(_ plan: JSONValue, endingAt finalPayment: Int64?) -> JSONValue
    /// The query order that asks the provider for payment `payment` of the subscription.
    func query(orderId: String, merchant: String, subscription: String, payment: Int64, plan: JSONValue) -> Order
    /// The events a query order's outcome reports about its subscription, each keyed as the
    /// provider's callback of the same fact is.
    func events(of query: Order, outcome: Outcome) -> [SubscriptionEvent]
}

/// Where the watch of one subscription's payments stands, as the ledger keeps it.
public struct ReconciliationWatch: Sendable, Equatable {
    public var plan: JSONValue
    /// The next payment's number in the series.
    public var payment: Int64
    /// Asks made for it so far.
    public var asks: Int64

    public init(plan: JSONValue, payment: Int64, asks: Int64 = 0) {
        self.plan = plan
        self.payment = payment
        self.asks = asks
    }

    public var json: JSONValue { ["reconcile": plan, "payment": .integer(payment), "asks": .integer(asks)] }

    public init?(json: JSONValue) {
        guard let plan = json["reconcile"], let payment = json["payment"]?.integerValue, let asks = json["asks"]?.integerValue else { return nil }
        self.init(plan: plan, payment: payment, asks: asks)
    }

    /// Every query order's id starts so, and no upstream order's may.
    public static let orderIdPrefix = "rcn-"

    /// The query order's id for this ask: derived from the subscription, the payment and the
    /// ask, so every copy of the pipeline makes the same one.
    public func orderId(merchant: String, provider: Provider, subscription: String) -> String {
        let digest = ScheduledAttempt.subscriptionDigest(merchant: merchant, provider: provider, subscription: subscription)
        return "\(Self.orderIdPrefix)\(digest)-\(payment)-\(asks + 1)"
    }

    /// The parts of a query order's id; nil for any other id.
    public static func ask(ofOrderId orderId: String) -> (digest: String, payment: Int64, ask: Int64)? {
        guard orderId.hasPrefix(orderIdPrefix) else { return nil }
        let parts = orderId.dropFirst(orderIdPrefix.count).split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0].utf8.count == 20, let payment = Int64(parts[1]), let ask = Int64(parts[2]) else { return nil }
        return (String(parts[0]), payment, ask)
    }

    /// The rejection of an upstream order whose id is reserved for the query orders.
    public static func reservation(ofOrderId orderId: String) -> Rejection? {
        guard orderId.hasPrefix(orderIdPrefix) else { return nil }
        return Rejection(
            .invalidOrderId, field: "orderId", "orderId must not start with \(orderIdPrefix): that prefix is reserved for the reconciliation queries")
    }
}

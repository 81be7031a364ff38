/// The one seam between the pipeline's stages and a provider (compare hyperswitch's
/// connectors). Each provider module implements it once; `ConnectorRegistry` maps provider →
/// connector, and no stage ever branches on the provider.
///
/// - the signer calls `sign`;
/// - the submitter follows `read`, `readFailure` and `resolution` (retry, query or fail),
///   and asks `redelivery` before a redelivered order is sent again;
/// - the callback validator serves `callbackRoutes`;
/// - the ledger indexes `callbackReferences` and schedules `pendingFollowUp`;
/// - the poller asks `pendingPolling` for the orders it polls.
public protocol ProviderConnector: Sendable {
    /// What the submitter needs to read this provider's responses beyond the order itself
    /// (e.g. PhonePe's authRequestId), carried from the signer in the signed work.
    associatedtype Context: ConnectorContext = NoContext

    static var provider: Provider { get }
    static var operations: [OperationSpec] { get }
    /// The type of a merchant's section for this provider (`merchants.<name>.<provider>`),
    /// which reads and checks it; the config knows no provider itself.
    static var settingsSection: any MerchantSection.Type { get }

    /// Built once per stage process from the whole config; a connector keeps per-merchant
    /// objects that are costly to build (HMAC keys, JWT verifiers). Stages that hold no secrets
    /// pass a config whose secrets are empty and never call `sign`.
    init(config: PaypipeConfig) async

    /// Validates and signs an order: the provider request (and the request that resolves an
    /// unknown outcome), or an outcome when no HTTP call is needed (a JWT or URL for the app).
    func sign(_ order: Order, purpose: DispatchPurpose, nowSeconds: Int64) throws(Rejection) -> Signed<Context>
    /// Signs the provider's status call for an order that stayed `pending` (`purpose` is
    /// `statusCheck` or `expiryCheck`); `pending` is the result of its stored pending outcome
    /// (the references the provider assigned, e.g. the Nets paymentId). nil: this provider has
    /// no call that can tell what became of the order. Read the answer in the `resolving` phase:
    /// `pending` there means the provider confirms nothing was taken (yet); `unknown` that it
    /// cannot tell; `succeeded`/`failed` are its final word about the order, never about the call.
    func signStatusCheck(
        _ order: Order, pending: [String: JSONValue], purpose: DispatchPurpose, nowSeconds: Int64
    ) throws(Rejection) -> Signed<Context>?

    /// Reads a provider response to `current` (the request last sent in `exchange`).
    func read(_ response: HTTPResponseSpec, to current: HTTPRequestSpec, in exchange: Exchange<Context>) -> ProviderReading
    /// Reads a transport failure of `current`: `retry` only when the request cannot have had an effect.
    func readFailure(_ failure: TransportFailure, of current: HTTPRequestSpec, in exchange: Exchange<Context>) -> ProviderVerdict
    /// The request that resolves an unknown outcome, or nil when nothing can resolve it safely.
    func resolution(forUnknown exchange: Exchange<Context>) -> HTTPRequestSpec?
    /// What a redelivered order (its dispatch after the first) takes before anything is sent
    /// again (resolved first by its deterministic reference).
    func redelivery(of exchange: Exchange<Context>) -> Redelivery

    /// The HTTP callbacks this provider sends.
    var callbackRoutes: [CallbackRoute] { get }

    /// Provider references a callback may name instead of the orderId, known from the order
    /// alone (before any request leaves), so a callback that races the pending outcome finds it.
    func callbackReferences(for order: Order) -> [String]
    /// Provider references the provider assigned, read from a `pending` outcome's result.
    func callbackReferences(in outcome: Outcome) -> [String]

    /// What the ledger does with an order of `operation` that stays `pending`.
    func pendingFollowUp(for operation: Operation, timers: PaypipeConfig.Timers) -> PendingFollowUp?
    /// How the poller stage polls the pending orders of the operations whose follow-up is
    /// `.poll`; nil for a provider whose pending orders are never polled.
    var pendingPolling: (any PendingPolling)? { get }

    /// Whether a `succeeded` outcome of `operation` opens a subscription whose later events the
    /// provider reports (`subscriptionOpening`); the ledger reads the order only for those.
    func opensSubscription(_ operation: Operation) -> Bool
    /// The subscription a first order's `succeeded` outcome opened, as the provider's later
    /// events will name it; nil when the outcome carries no reference.
    func subscriptionOpening(for order: Order, outcome: Outcome) -> SubscriptionOpening?
    /// Whether a succeeded order of `operation` may change a subscription already open.
    func changesSubscription(_ operation: Operation) -> Bool
    /// The change a succeeded order makes to a subscription already open; nil for none.
    func subscriptionChange(after order: Order, outcome: Outcome) -> SubscriptionChange?
    /// How the pollers check a subscription's entitlement around its expiry, for a provider that
    /// sends nothing when access lapses; nil for the others.
    var entitlementChecking: (any EntitlementChecking)? { get }
    /// How paypipe charges this provider's subscriptions on schedule, for a provider that never
    /// charges by itself; nil for the others.
    var scheduledCharging: (any ScheduledCharging)? { get }
    /// How the ledger finds the payments this provider takes by itself when their callbacks do
    /// not arrive; nil for a provider that takes none, or whose payments paypipe asks for anyway.
    var reconciling: (any PaymentReconciling)? { get }
    /// This provider's refunds; nil when paypipe makes none for it.
    var refunding: (any Refunding)? { get }
    /// How a failed charge's `error.code` of this provider counts for dunning (its table in its
    /// Connector folder); nil for a code it does not classify (the pipeline's own, or one no
    /// source names), which `DeclineClass.of` then reads.
    func declineClass(of code: String) -> DeclineClass?
    /// Whether a `cancel` of this provider's subscriptions has no provider call (Nets: paypipe
    /// simply charges it no more), so the ledger applies it when it takes the order in.
    var cancelsWithoutProviderCall: Bool { get }
    /// The order the pipeline makes for itself once a first order (`opensSubscription`)
    /// succeeded, e.g. the charge of what a Nets checkout only reserved; nil for none. The
    /// ledger admits it in the transaction that records the outcome, under an id derived from
    /// the first order's (`ScheduledAttempt.followingOrderId`), so it is made once.
    func followingOrder(after order: Order, outcome: Outcome) -> Order?

    /// The secret settings (merchant config keys) whose values this provider's outcomes carry
    /// for the app, e.g. Viva's `isvClientSecret` in the sale URL. The ledger loads these and
    /// no other secret: it stores such outcomes with the values withheld and puts them back
    /// whenever it sends one upstream, live or replayed.
    static var outcomeSecretSettings: [String] { get }
    /// `outcome` with each such value replaced by `Outcome.withheldMark(named:)`; nil when it
    /// carries none.
    func withholdingSecrets(in outcome: Outcome) -> Outcome?
    /// The text a mark named `setting` stood for in an outcome of `merchant`; nil when that
    /// merchant has no such value.
    func withheldSecret(named setting: String, merchant: String) -> String?
}

/// Why the signer is asked to sign an order.
public enum DispatchPurpose: String, Sendable {
    /// First dispatch, or a redelivery.
    case submit
    /// The order was submitted and its confirmation never came: only the provider's status call.
    case statusCheck
    /// The order stayed pending past `timers.pendingExpireAfterMs`: the last status call, whose
    /// answer ends it (`failed` EXPIRED when the provider confirms nothing was taken, `unknown`
    /// NEEDS_REVIEW when it cannot tell).
    case expiryCheck

    /// Both kinds of status check: only the provider's status call leaves.
    public var isStatusCheck: Bool { self != .submit }
}

/// How a redelivered order is handled: its first copy may have reached the provider.
public enum Redelivery: Sendable, Equatable {
    /// Sending the same request again is safe: the provider replays its first answer (Nets'
    /// Idempotency-Key) or the request has no effect (reads).
    case resubmit
    /// Ask this status/query call first: the order is submitted again only on a `neverSeen`
    /// reading; any other verdict is the order's.
    case resolveFirst(HTTPRequestSpec)
    /// Nothing can tell whether the provider saw it: the order ends `unknown` NEEDS_REVIEW
    /// rather than moving money twice.
    case review
}

/// What signing an order produced.
public enum Signed<Context: ConnectorContext>: Sendable {
    case request(SignedRequest<Context>)
    /// No HTTP call from the pipeline: this outcome is the order's answer for now.
    case outcome(Outcome.Status, result: [String: JSONValue])
}

public struct SignedRequest<Context: ConnectorContext>: Sendable {
    public var request: HTTPRequestSpec
    /// The status or query call that resolves an unknown outcome, signed in advance because
    /// the submitter holds no secrets.
    public var resolve: HTTPRequestSpec?
    public var context: Context

    public init(request: HTTPRequestSpec, resolve: HTTPRequestSpec? = nil, context: Context) {
        self.request = request
        self.resolve = resolve
        self.context = context
    }
}

extension SignedRequest where Context == NoContext {
    public init(request: HTTPRequestSpec, resolve: HTTPRequestSpec? = nil) {
        self.init(request: request, resolve: resolve, context: NoContext())
    }
}

/// A connector's own context type, carried as JSON between signer and submitter.
public protocol ConnectorContext: Sendable, Equatable {
    var json: JSONValue { get }
    init?(json: JSONValue)
}

public struct NoContext: ConnectorContext {
    public init() {}
    public init?(json: JSONValue) {}
    public var json: JSONValue { .null }
}

/// Which half of a submission a request belongs to.
public enum ExchangePhase: Sendable, Equatable {
    case submitting
    /// Asking the provider's status/query call what became of the submitted request.
    case resolving
}

/// One submission as its connector sees it.
public struct Exchange<Context: ConnectorContext>: Sendable {
    public var order: Order
    public var signed: SignedRequest<Context>
    public var purpose: DispatchPurpose
    public var phase: ExchangePhase
    /// In the `resolving` phase: the call decides whether a redelivered order is submitted
    /// again, so a reading that the provider never saw it is `ProviderVerdict.neverSeen`.
    public var resolvingBeforeResubmit: Bool
    /// How many follow-up requests (`ProviderReading.followUp`) this submission has sent.
    public var followUps: Int
    /// How long ago (ms) the pipeline accepted the order: a provider that forgets its
    /// idempotency keys after a while cannot answer for an older order.
    public var orderAgeMilliseconds: Int64

    public init(
        order: Order, signed: SignedRequest<Context>, purpose: DispatchPurpose, phase: ExchangePhase, resolvingBeforeResubmit: Bool = false,
        followUps: Int = 0, orderAgeMilliseconds: Int64 = 0
    ) {
        self.order = order
        self.signed = signed
        self.purpose = purpose
        self.phase = phase
        self.resolvingBeforeResubmit = resolvingBeforeResubmit
        self.followUps = followUps
        self.orderAgeMilliseconds = orderAgeMilliseconds
    }
}

/// A connector's reading of one response.
public enum ProviderReading: Sendable, Equatable {
    case verdict(ProviderVerdict)
    /// The operation takes another request (Nets getSubscription: payment, then subscription).
    case followUp(HTTPRequestSpec)
}

/// What the ledger does with an order that stays `pending`.
public enum PendingFollowUp: Sendable, Equatable {
    /// After this long without a callback, and again every this long, the signers sign the
    /// provider's status call (`DispatchPurpose.statusCheck`) and the submitters ask it; once the
    /// order is pending `timers.pendingExpireAfterMs`, the check is the last (`expiryCheck`).
    case statusCheck(afterMilliseconds: Int64)
    /// The pollers own it from the moment it is pending; one still pending this long after was
    /// lost with a poller and goes to the pollers again.
    case poll(lostAfterMilliseconds: Int64)
}

extension ProviderConnector {
    public var provider: Provider { Self.provider }

    public func readFailure(_ failure: TransportFailure, of current: HTTPRequestSpec, in exchange: Exchange<Context>) -> ProviderVerdict {
        // A status or query call has no effect, so asking again is always safe.
        if exchange.phase == .resolving { return .unknown(reason: failure.reason) }
        return failure.mayHaveBeenSent ? .unknown(reason: failure.reason) : .retry(reason: failure.reason)
    }

    public func resolution(forUnknown exchange: Exchange<Context>) -> HTTPRequestSpec? { exchange.signed.resolve }

    public func signStatusCheck(
        _ order: Order, pending: [String: JSONValue], purpose: DispatchPurpose, nowSeconds: Int64
    ) throws(Rejection) -> Signed<Context>? {
        try sign(order, purpose: purpose, nowSeconds: nowSeconds)
    }

    /// Safe by default: an operation that moves no money is simply sent again; one that does
    /// goes to review unless its connector knows how to resolve it.
    public func redelivery(of exchange: Exchange<Context>) -> Redelivery {
        let spec = Self.operations.first { $0.operation == exchange.order.operation }
        return spec?.movesMoney(exchange.order.params) == false ? .resubmit : .review
    }

    public static var outcomeSecretSettings: [String] { [] }
    public func withholdingSecrets(in outcome: Outcome) -> Outcome? { nil }
    public func withheldSecret(named setting: String, merchant: String) -> String? { nil }

    public var callbackRoutes: [CallbackRoute] { [] }
    public func callbackReferences(for order: Order) -> [String] { [] }
    public func callbackReferences(in outcome: Outcome) -> [String] { [] }
    public func pendingFollowUp(for operation: Operation, timers: PaypipeConfig.Timers) -> PendingFollowUp? { nil }
    public var pendingPolling: (any PendingPolling)? { nil }
    public func opensSubscription(_ operation: Operation) -> Bool { false }
    public func subscriptionOpening(for order: Order, outcome: Outcome) -> SubscriptionOpening? { nil }
    public func changesSubscription(_ operation: Operation) -> Bool { false }
    public func subscriptionChange(after order: Order, outcome: Outcome) -> SubscriptionChange? { nil }
    public var entitlementChecking: (any EntitlementChecking)? { nil }
    public var scheduledCharging: (any ScheduledCharging)? { nil }
    public var reconciling: (any PaymentReconciling)? { nil }
    public var refunding: (any Refunding)? { nil }
    public func declineClass(of code: String) -> DeclineClass? { nil }
    public var cancelsWithoutProviderCall: Bool { false }
    public func followingOrder(after order: Order, outcome: Outcome) -> Order? { nil }
}

/// Why an HTTP exchange produced no response.
public enum TransportFailure: Error, Sendable, Equatable {
    /// The request certainly did not reach the provider (connection refused, connect timeout).
    case notSent(String)
    /// It may have reached the provider (timeout or reset after sending).
    case mayHaveBeenSent(String)

    public var reason: String {
        switch self {
        case .notSent(let reason), .mayHaveBeenSent(let reason): reason
        }
    }

    public var mayHaveBeenSent: Bool {
        if case .mayHaveBeenSent = self { return true }
        return false
    }
}

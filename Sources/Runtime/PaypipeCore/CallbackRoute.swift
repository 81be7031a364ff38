extension CallbackRejection {
    public static func orderNotFound(_ provider: Provider, merchant: String) -> CallbackRejection {
        CallbackRejection(status: 404, code: .orderNotFound, "no \(provider.rawValue) order of merchant \(merchant) matches this callback")
    }

    /// A forwarded body names a merchant without this provider's settings.
    public static func unknownMerchant(_ merchant: String, _ provider: Provider) -> CallbackRejection {
        CallbackRejection(status: 404, code: .unknownMerchant, "merchant \(merchant) has no \(provider.rawValue) configuration")
    }

    /// 503, so the provider retries.
    public static func ledgerUnavailable(_ detail: String = "the order store did not answer; retry later") -> CallbackRejection {
        CallbackRejection(status: 503, code: .ledgerUnavailable, detail)
    }
}

/// One callback as it arrived over HTTP.
public struct CallbackRequest: Sendable {
    public var headers: [HTTPHeader]
    public var body: [UInt8]

    public init(headers: [HTTPHeader], body: [UInt8]) {
        self.headers = headers
        self.body = body
    }

    public func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }
}

/// How a connector finds the order a callback names; the callback validator answers it from
/// the ledger. Both throw 404 when there is no such order of `provider` and `merchant`, and
/// 503 when the ledger does not answer (so the provider retries).
public protocol CallbackOrderLookup: Sendable {
    func order(_ key: OrderKey, provider: Provider) async throws(CallbackRejection) -> Order
    func order(reference: String, provider: Provider, merchant: String) async throws(CallbackRejection) -> Order
}

/// An authentic callback's meaning: handed to the ledger, which records `event` (so a
/// redelivery changes nothing) and the terminal outcome `verdict` leads to, if any.
public struct CallbackDecision: Sendable, Equatable {
    /// The order the callback is about; nil for a callback about a subscription after its first
    /// order (`subscriptionEvents`).
    public var order: Order?
    /// What an authentic callback reports about a subscription (a renewal, a revoke, a state
    /// change): recorded once each per `eventId` against the subscription's record.
    public var subscriptionEvents: [SubscriptionEvent] = []
    /// The provider's event id; nil when the provider gives none worth deduplicating.
    public var event: String?
    /// nil: authentic, but nothing changes (e.g. a notification about another operation).
    public var verdict: ProviderVerdict?
    /// The `result` of the outcome a `failed` verdict leads to, when something was taken
    /// all the same (a Trust Payments payment whose subscription was not scheduled).
    public var failureResult: [String: JSONValue]?
    /// Why an authentic callback without a verdict changes no order, as a short label (e.g.
    /// `recorded_notify`): counted in `paypipe_callbacks_total` instead of `no_change` when its
    /// event is newly recorded. Keep the set of values small (it is a metrics label).
    public var recordedAs: String?

    public init(
        order: Order, event: String?, verdict: ProviderVerdict?, failureResult: [String: JSONValue]? = nil, recordedAs: String? = nil
    ) {
        self.order = order
        self.event = event
        self.verdict = verdict
        self.failureResult = failureResult
        self.recordedAs = recordedAs
    }

    /// An authentic callback about a subscription rather than an order.
    public init(subscriptionEvents: [SubscriptionEvent]) {
        order = nil
        event = nil
        verdict = nil
        self.subscriptionEvents = subscriptionEvents
    }
}

extension CallbackRejection {
    /// 404, so the provider retries: no subscription of `merchant` has this reference (yet: its
    /// first order's outcome may still be on its way).
    public static func subscriptionNotFound(_ provider: Provider, merchant: String) -> CallbackRejection {
        CallbackRejection(
            status: 404, code: .subscriptionNotFound, "no \(provider.rawValue) subscription of merchant \(merchant) matches this callback")
    }
}

/// Sends one HTTP request for a callback handler that must ask the provider before it believes
/// a callback (Viva's server-side confirmation). The callback validator passes its pooled client.
public protocol ProviderHTTPTransport: Sendable {
    func execute(_ request: HTTPRequestSpec) async -> Result<HTTPResponseSpec, TransportFailure>
}

/// What a route's handler gets besides the request: the order lookups, an HTTP transport to the
/// provider, and the sender's address. It is itself a `CallbackOrderLookup`, so a handler that
/// only looks orders up passes it on as one.
public struct CallbackContext: CallbackOrderLookup {
    public let orders: any CallbackOrderLookup
    public let http: any ProviderHTTPTransport
    /// The peer's IP address as the callback validator saw it (nil when unknown).
    public let remoteAddress: String?

    public init(orders: any CallbackOrderLookup, http: any ProviderHTTPTransport, remoteAddress: String?) {
        self.orders = orders
        self.http = http
        self.remoteAddress = remoteAddress
    }

    public func order(_ key: OrderKey, provider: Provider) async throws(CallbackRejection) -> Order {
        try await orders.order(key, provider: provider)
    }

    public func order(reference: String, provider: Provider, merchant: String) async throws(CallbackRejection) -> Order {
        try await orders.order(reference: reference, provider: provider, merchant: merchant)
    }
}

/// Token buckets for one route: per sender address, `burst` requests at once, refilled at
/// `perSecond`; and, for a route whose body is forwarded by an app's backend (which sends every
/// customer's result from one address), per order the body names (`perOrder`). Over either,
/// the callback validator answers 429 before the handler runs, so such a route cannot be used
/// to hammer one order, or to probe many, faster than the limits.
public struct CallbackRateLimit: Sendable, Equatable {
    public var burst: Int
    public var perSecond: Double
    /// The limit for each (merchant, orderId) a forwarded body names; nil: none.
    public var perOrder: Rate?

    public struct Rate: Sendable, Equatable {
        public var burst: Int
        public var perSecond: Double
        public init(burst: Int, perSecond: Double) {
            self.burst = burst
            self.perSecond = perSecond
        }
    }

    public init(burst: Int, perSecond: Double, perOrder: Rate? = nil) {
        self.burst = burst
        self.perSecond = perSecond
        self.perOrder = perOrder
    }
}

/// One HTTP callback route (docs/protocol.md, "Callbacks in").
public struct CallbackRoute: Sendable {
    /// e.g. `/callbacks/trustpayments/jwt`.
    public let path: String
    /// The `route` label in `paypipe_callbacks_total`.
    public let label: String
    /// Header names the handler reads (everything else is not passed on).
    public let headers: [String]
    /// nil: no per-address limit (provider webhooks, which retry on their own schedule).
    public let rateLimit: CallbackRateLimit?
    public let handle: @Sendable (CallbackRequest, CallbackContext) async throws(CallbackRejection) -> CallbackDecision

    public init(
        path: String, label: String, headers: [String] = [], rateLimit: CallbackRateLimit? = nil,
        handle: @escaping @Sendable (CallbackRequest, CallbackContext) async throws(CallbackRejection) -> CallbackDecision
    ) {
        self.path = path
        self.label = label
        self.headers = headers
        self.rateLimit = rateLimit
        self.handle = handle
    }
}

/// A body forwarded by the app's backend (`trustpayments/jwt`, `viva`): `{"orderId", <field>,
/// "merchant"?}`, merchant defaulting to "default".
public struct ForwardedCallback: Sendable {
    /// The order a forwarded body names, read without any other check; nil when it names none.
    public static func orderKey(in body: [UInt8]) -> OrderKey? {
        guard body.count <= Order.maxFrameBytes, case .object(let object)? = try? JSONValue.parse(body),
            let orderId = object["orderId"]?.stringValue, Order.isValidOrderId(orderId)
        else { return nil }
        switch object["merchant"] {
        case nil, .null?: return OrderKey(merchant: "default", orderId: orderId)
        case .string(let merchant)? where !merchant.isEmpty && merchant.utf8.count <= 64: return OrderKey(merchant: merchant, orderId: orderId)
        default: return nil
        }
    }

    public let merchant: String
    public let orderId: String
    public let value: String
    public var key: OrderKey { OrderKey(merchant: merchant, orderId: orderId) }

    public init(_ body: [UInt8], field: String) throws(CallbackRejection) {
        guard body.count <= Order.maxFrameBytes else {
            throw .tooLarge("the body is larger than 64 KiB")
        }
        guard case .object(let object)? = try? JSONValue.parse(body) else {
            throw .malformed("the body is not a JSON object")
        }
        guard let orderId = object["orderId"]?.stringValue, Order.isValidOrderId(orderId) else {
            throw .malformed("orderId must be 1-64 characters of [A-Za-z0-9._:-]", code: .invalidField)
        }
        switch object["merchant"] {
        case nil, .null?: merchant = "default"
        case .string(let name)? where !name.isEmpty && name.utf8.count <= 64: merchant = name
        default: throw .malformed("merchant must be a string of 1-64 characters", code: .invalidField)
        }
        guard let value = object[field]?.stringValue, !value.isEmpty else {
            throw .malformed("\(field) must be a non-empty string", code: .missingField)
        }
        self.orderId = orderId
        self.value = value
    }
}

import PaypipeCore

/// What a callback about an order must agree with: the merchant's site, the
/// order's reference, for money-moving orders its amount and currency, and for a
/// `subscriptionJwt` order the subscription it asked for.
public struct TPExpectedOrder: Sendable, Equatable {
    public var orderId: String
    public var siteReference: String
    public var amount: Int64?
    public var currency: String?
    /// The subscription as signed into the SDK JWT; nil: the SUBSCRIPTION entry's fields are not compared.
    public var subscription: TPSubscriptionRequest?

    public init(orderId: String, siteReference: String, amount: Int64?, currency: String?, subscription: TPSubscriptionRequest? = nil) {
        self.orderId = orderId
        self.siteReference = siteReference
        self.amount = amount
        self.currency = currency
        self.subscription = subscription
    }

    public init(order: Order, config: TrustPaymentsConfig) {
        // issuedAt 0: the begin date was checked against the signing day when the JWT was made;
        // re-reading the params later must not refuse it for being past by now.
        let subscription = order.operation == .subscriptionJwt ? try? TPSubscriptionRequest(order: order, issuedAt: 0) : nil
        self.init(
            orderId: order.orderId, siteReference: config.siteReference, amount: order.amount, currency: order.currency,
            subscription: subscription)
    }

    /// What a response JWT or URL notification must be about: a `subscriptionJwt` order whose
    /// params still read as the request that was signed. Anything else never got an SDK JWT, so
    /// a callback naming it is refused (409 `OPERATION_MISMATCH`) and changes nothing.
    public static func forCallback(order: Order, config: TrustPaymentsConfig) throws(CallbackRejection) -> TPExpectedOrder {
        guard order.operation == .subscriptionJwt else {
            throw CallbackRejection(
                status: 409, code: .operationMismatch,
                "order \(order.orderId) is a \(order.operation.rawValue.prefix(32)) order; only subscriptionJwt orders are settled by a response JWT or notification"
            )
        }
        let expected = TPExpectedOrder(order: order, config: config)
        guard expected.subscription != nil else {
            throw CallbackRejection(
                status: 409, code: .operationMismatch, "order \(order.orderId) has no signed subscription request to compare with")
        }
        return expected
    }

    /// Binds a response JWT to this order: the payment entry (AUTH or
    /// ACCOUNTCHECK; the first entry when the sequence stopped before it) must carry
    /// `orderreference` equal to the orderId, and no entry may name another order. Otherwise the
    /// JWT is refused, so an authentic JWT for another order with the same amount can neither
    /// settle nor fail this one.
    public func checkOrderReference(in entries: [[String: JSONValue]]) throws(CallbackRejection) {
        let binding =
            entries.first { ["AUTH", "ACCOUNTCHECK"].contains($0["requesttypedescription"]?.stringValue) } ?? entries.first
        let type = binding?["requesttypedescription"]?.stringValue.map { String($0.prefix(32)) } ?? "response"
        guard let stated = binding?["orderreference"], stated != .string("") else {
            throw CallbackRejection(status: 400, code: .missingOrderReference, "the \(type) entry carries no orderreference")
        }
        for entry in entries {
            switch entry["orderreference"] {
            case nil: continue
            case .string(let named)? where named == orderId: continue
            case .string(let named)?:
                let type = entry["requesttypedescription"]?.stringValue.map { String($0.prefix(32)) } ?? "response"
                throw CallbackRejection(
                    status: 409, code: .orderReferenceMismatch,
                    "\(type) orderreference \"\(named.prefix(64))\" is not order \"\(orderId)\"")
            case let other?:
                throw CallbackRejection(status: 400, code: .invalidField, "orderreference is \(other.typeName), not a string")
            }
        }
    }

    /// Why `entry` does not belong to this order, or nil. A present `sitereference` or
    /// `orderreference` must be ours; `requireSite` makes a missing `sitereference` a mismatch too.
    func referenceMismatch(in entry: [String: JSONValue], requireSite: Bool) -> String? {
        let type = entry["requesttypedescription"]?.stringValue ?? "response"
        switch entry["sitereference"] {
        case .string(let site)?:
            if site != siteReference { return "\(type) sitereference \"\(site.prefix(64))\" is not this merchant's site \"\(siteReference)\"" }
        case nil:
            if requireSite { return "\(type) carries no sitereference" }
        case let other?:
            return "\(type) sitereference is \(other.typeName)"
        }
        switch entry["orderreference"] {
        case .string(let reference)?:
            if reference != orderId { return "\(type) orderreference \"\(reference.prefix(64))\" is not order \"\(orderId)\"" }
        case nil: break
        case let other?: return "\(type) orderreference is \(other.typeName)"
        }
        return nil
    }

    /// Why `entry`'s `baseamount` / `currencyiso3a` differ from the order's, or nil.
    /// `requireAmount` makes their absence a mismatch (a successful AUTH must state what it took).
    func amountMismatch(in entry: [String: JSONValue], requireAmount: Bool) -> String? {
        let type = entry["requesttypedescription"]?.stringValue ?? "response"
        if let amount {
            switch entry["baseamount"].flatMap(TPErrorCode.read) {
            case let text?:
                guard let received = Int64(text), String(received) == text else {
                    return "\(type) baseamount \"\(text.prefix(20))\" is not an integer amount"
                }
                if received != amount { return "\(type) baseamount \(received) != order amount \(amount)" }
            case nil:
                if requireAmount { return "\(type) carries no baseamount (order amount \(amount))" }
            }
        }
        if let currency {
            switch entry["currencyiso3a"]?.stringValue {
            case let received?:
                if received != currency { return "\(type) currencyiso3a \(received.prefix(8)) != order currency \(currency)" }
            case nil:
                if requireAmount { return "\(type) carries no currencyiso3a (order currency \(currency))" }
            }
        }
        return nil
    }

    /// Why a SUBSCRIPTION entry does not reflect what was requested (Trust Payments: "The
    /// subscription-specific fields … should reflect the values submitted in the request"), or nil.
    /// Compared: frequency, unit, final number, amount, and the begin date when one was sent.
    /// `requireFields`: an absent field is a mismatch too (response JWTs echo them all).
    func subscriptionMismatch(in entry: [String: JSONValue], requireFields: Bool) -> String? {
        guard let subscription else { return nil }
        var wanted: [(field: String, value: String, numeric: Bool)] = [
            ("subscriptionfrequency", String(subscription.frequency), true),
            ("subscriptionunit", subscription.unit.rawValue, false),
            ("subscriptionfinalnumber", String(subscription.finalNumber), true),
            ("baseamount", String(subscription.baseAmount), true),
        ]
        if let beginDate = subscription.beginDate { wanted.append(("subscriptionbegindate", beginDate.iso8601, false)) }
        for (field, value, numeric) in wanted {
            guard let received = entry[field].flatMap(TPErrorCode.read) else {
                if requireFields { return "SUBSCRIPTION carries no \(field) (requested \(value))" }
                continue
            }
            // Numbers travel as strings; "012" and "12" are the same schedule.
            let same = numeric ? Int64(received).map { String($0) == value } ?? false : received == value
            if !same { return "SUBSCRIPTION \(field) \"\(received.prefix(20))\" != requested \(value)" }
        }
        return nil
    }
}

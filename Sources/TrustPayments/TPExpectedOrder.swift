import PaypipeCore

/// What a callback about an order must agree with (PROTOCOL.md §3): the merchant's site, the
/// order's reference, and for money-moving orders its amount and currency.
public struct TPExpectedOrder: Sendable, Equatable {
    public var orderId: String
    public var siteReference: String
    public var amount: Int64?
    public var currency: String?

    public init(orderId: String, siteReference: String, amount: Int64?, currency: String?) {
        self.orderId = orderId
        self.siteReference = siteReference
        self.amount = amount
        self.currency = currency
    }

    public init(order: Order, config: TrustPaymentsConfig) {
        self.init(orderId: order.orderId, siteReference: config.siteReference, amount: order.amount, currency: order.currency)
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
}

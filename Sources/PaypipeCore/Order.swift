/// A payment provider, by the name orders use (`"nets"`). Open, not an enum: each provider
/// module declares its own (`extension Provider { static let nets = ... }`) and registers a
/// connector, so adding a provider changes no shared type.
public struct Provider: RawRepresentable, Sendable, Hashable, Comparable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(_ rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }
    public static func < (a: Provider, b: Provider) -> Bool { a.rawValue < b.rawValue }
    // Byte for byte: Swift's String `==` would also match canonically equivalent spellings.
    public static func == (a: Provider, b: Provider) -> Bool { a.rawValue.utf8.elementsEqual(b.rawValue.utf8) }
    public func hash(into hasher: inout Hasher) { for byte in rawValue.utf8 { hasher.combine(byte) } }
}

/// One operation of one provider (`nets` `createSubscription`). Declared by the provider
/// module next to its `Provider`; the order catalog says which ones exist.
public struct Operation: Sendable, Hashable, CustomStringConvertible {
    public let provider: Provider
    public let rawValue: String
    public init(_ provider: Provider, _ name: String) {
        self.provider = provider
        self.rawValue = name
    }
    public var description: String { "\(provider.rawValue) \(rawValue)" }
    public static func == (a: Operation, b: Operation) -> Bool { a.provider == b.provider && a.rawValue.utf8.elementsEqual(b.rawValue.utf8) }
    public func hash(into hasher: inout Hasher) {
        hasher.combine(provider)
        for byte in rawValue.utf8 { hasher.combine(byte) }
    }
}

/// An order as PROTOCOL.md §1 defines it, already validated: a value of this type always
/// has a supported version, a well-formed orderId, a known provider/operation pair and,
/// where the operation moves money, a positive integer amount and an alpha-3 currency.
public struct Order: Sendable, Equatable {
    public static let version: Int64 = 1
    public static let maxFrameBytes = 64 * 1024

    public var orderId: String
    public var merchant: String
    public var provider: Provider
    public var operation: Operation
    public var amount: Int64?
    public var currency: String?
    public var params: [String: JSONValue]

    public init(
        orderId: String, merchant: String = "default", operation: Operation,
        amount: Int64? = nil, currency: String? = nil, params: [String: JSONValue] = [:]
    ) {
        self.orderId = orderId
        self.merchant = merchant
        self.provider = operation.provider
        self.operation = operation
        self.amount = amount
        self.currency = currency
        self.params = params
    }

    /// The idempotency key at the edge (DESIGN.md): every provider reference is derived from it.
    public var key: OrderKey { OrderKey(merchant: merchant, orderId: orderId) }

    public var json: JSONValue {
        var object: [String: JSONValue] = [
            "v": .integer(Order.version), "orderId": .string(orderId), "merchant": .string(merchant),
            "provider": .string(provider.rawValue), "operation": .string(operation.rawValue),
            "params": .object(params),
        ]
        if let amount { object["amount"] = .integer(amount) }
        if let currency { object["currency"] = .string(currency) }
        return .object(object)
    }
}

public struct OrderKey: Sendable, Hashable, CustomStringConvertible {
    public let merchant: String
    public let orderId: String
    public init(merchant: String, orderId: String) {
        self.merchant = merchant
        self.orderId = orderId
    }
    public var description: String { "\(merchant)/\(orderId)" }

    /// Byte for byte, like the store and every idempotency key derived from the key: Swift's
    /// own String equality is canonical equivalence ("\u{212A}iosk" == "Kiosk").
    public static func == (lhs: OrderKey, rhs: OrderKey) -> Bool {
        lhs.merchant.utf8.elementsEqual(rhs.merchant.utf8) && lhs.orderId.utf8.elementsEqual(rhs.orderId.utf8)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(merchant.utf8.count)
        for byte in merchant.utf8 { hasher.combine(byte) }
        for byte in orderId.utf8 { hasher.combine(byte) }
    }
}

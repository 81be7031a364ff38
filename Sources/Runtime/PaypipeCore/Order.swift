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
    public static func == (a: Provider, b: Provider) -> Bool { a.rawValue.hasSameUTF8(as: b.rawValue) }
    public func hash(into hasher: inout Hasher) { rawValue.hashUTF8(into: &hasher) }
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
    public static func == (a: Operation, b: Operation) -> Bool { a.provider == b.provider && a.rawValue.hasSameUTF8(as: b.rawValue) }
    public func hash(into hasher: inout Hasher) {
        hasher.combine(provider)
        rawValue.hashUTF8(into: &hasher)
    }
}

/// An order as docs/protocol.md ("Orders in") defines it, already validated: a value of this
/// type always has a supported version, a well-formed orderId, a known provider/operation
/// pair and, where the operation moves money, a positive integer amount and an alpha-3
/// currency.
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

    /// The idempotency key at the edge: every provider reference is derived from it.
    public var key: OrderKey { OrderKey(merchant: merchant, orderId: orderId) }

    /// What an outcome about this order echoes (a rejection's, say).
    public var identity: OrderIdentity {
        OrderIdentity(orderId: orderId, merchant: merchant, provider: provider.rawValue, operation: operation.rawValue)
    }

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

    /// `json`'s members, written straight into `writer` (the ledger stores this text and the
    /// signer forwards it with every order).
    package func write(into writer: inout JSONObjectWriter) {
        if let amount { writer.integer("amount", amount) }
        if let currency { writer.string("currency", currency) }
        writer.string("merchant", merchant)
        writer.string("operation", operation.rawValue)
        writer.string("orderId", orderId)
        writer.value("params", .object(params))
        writer.string("provider", provider.rawValue)
        writer.integer("v", Order.version)
    }

    /// `json.serialized`, written without building the `JSONValue`.
    public var serialized: String {
        var writer = JSONObjectWriter(capacity: 320)
        write(into: &writer)
        return String(decoding: writer.finish(), as: UTF8.self)
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
        lhs.merchant.hasSameUTF8(as: rhs.merchant) && lhs.orderId.hasSameUTF8(as: rhs.orderId)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(merchant.utf8.count)
        merchant.hashUTF8(into: &hasher)
        orderId.hashUTF8(into: &hasher)
    }
}

public enum Provider: String, Sendable, CaseIterable, Hashable {
    case trustpayments, nets, phonepe, cleeng, viva
}

public enum Operation: String, Sendable, CaseIterable, Hashable {
    case subscriptionJwt, transactionUpdate, transactionQuery
    case createSubscription, getSubscription, chargeSubscription
    case authInit
    case appleReceipt
    case sale

    public var provider: Provider {
        switch self {
        case .subscriptionJwt, .transactionUpdate, .transactionQuery: .trustpayments
        case .createSubscription, .getSubscription, .chargeSubscription: .nets
        case .authInit: .phonepe
        case .appleReceipt: .cleeng
        case .sale: .viva
        }
    }

    public static func operations(of provider: Provider) -> [Operation] {
        allCases.filter { $0.provider == provider }
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

    /// Whether the operation moves money, so amount and currency are required (PROTOCOL.md §1).
    public var movesMoney: Bool {
        switch operation {
        case .subscriptionJwt, .createSubscription, .chargeSubscription, .sale: true
        case .authInit: (params["authWorkflowType"]?.stringValue ?? "TRANSACTION") == "TRANSACTION"
        case .transactionUpdate, .transactionQuery, .getSubscription, .appleReceipt: false
        }
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
}

public struct OrderKey: Sendable, Hashable, CustomStringConvertible {
    public let merchant: String
    public let orderId: String
    public init(merchant: String, orderId: String) {
        self.merchant = merchant
        self.orderId = orderId
    }
    public var description: String { "\(merchant)/\(orderId)" }
}

/// What became of one intake frame.
public enum OrderDecoding: Sendable, Equatable {
    case order(Order)
    /// A JSON object that breaks a rule: answered with a `rejected` outcome. `identity` holds
    /// what could be read of the order, so upstream can match the outcome to it.
    case rejected(Rejection, identity: OrderIdentity)
    /// Not a JSON object at all (not UTF-8, not JSON), or over the size limit without a string
    /// `orderId`: counted and logged without its content, no outcome.
    case dropped(Rejection)
}

/// The identifying fields of an order as received, before they were validated.
public struct OrderIdentity: Sendable, Equatable {
    public var orderId: String
    public var merchant: String
    public var provider: String
    public var operation: String

    public init(orderId: String, merchant: String, provider: String, operation: String) {
        self.orderId = orderId
        self.merchant = merchant
        self.provider = provider
        self.operation = operation
    }
}

extension Order {
    static let topLevelKeys: Set<String> = ["v", "orderId", "merchant", "provider", "operation", "amount", "currency", "params"]
    static let maxOrderIdLength = 64
    /// Echoed identity fields are cut to this length so a hostile frame cannot inflate outcomes.
    static let maxEchoLength = 128

    public static func decode(frame: some Collection<UInt8>, catalog: OrderCatalog) -> OrderDecoding {
        guard frame.count <= maxFrameBytes else {
            let rejection = Rejection(.frameTooLarge, field: "frame", "frame of \(frame.count) bytes exceeds the \(maxFrameBytes)-byte limit")
            guard let identity = identityOfOversized(frame) else { return .dropped(rejection) }
            return .rejected(rejection, identity: identity)
        }
        if let order = decodeWithoutObject(frame, catalog: catalog) { return .order(order) }
        let document: JSONValue
        do {
            document = try JSONValue.parse(frame)
        } catch {
            if error.kind == .invalidUTF8 || String(validating: Array(frame), as: UTF8.self) == nil {
                return .dropped(Rejection(.invalidUTF8, field: "frame", "frame is not valid UTF-8 (byte \(error.offset))"))
            }
            return .dropped(Rejection(.malformedJSON, field: "frame", "frame is not valid JSON: \(error.reason) at byte \(error.offset)"))
        }
        guard case .object(let object) = document else {
            return .dropped(Rejection(.notAnObject, field: "frame", "frame is JSON \(document.typeName), not an object"))
        }
        do {
            return .order(try validate(object, catalog: catalog))
        } catch {
            // Only an absent merchant means "default": a rejection filed under "default" for a
            // merchant that was there but unreadable would answer a later valid order with its id.
            let identity = OrderIdentity(
                orderId: echo(object["orderId"]), merchant: object["merchant"] == nil ? "default" : echo(object["merchant"]),
                provider: echo(object["provider"]), operation: echo(object["operation"]))
            return .rejected(error, identity: identity)
        }
    }

    public static func decode(json: String, catalog: OrderCatalog) -> OrderDecoding { decode(frame: Array(json.utf8), catalog: catalog) }

    /// Validates an already-parsed order object (e.g. one embedded in an internal envelope).
    public init(validating object: [String: JSONValue], catalog: OrderCatalog) throws(Rejection) {
        self = try Order.validate(object, catalog: catalog)
    }

    /// A valid order read with its members going straight into `TopLevelFields`, without the
    /// dictionary of the top-level object: building that (a String and a hash per key) and
    /// then matching its keys would cost more than the rest of the decoding, and every order is
    /// decoded in the ledger and again in the submitter. Nil for anything else (not JSON, a key
    /// that is unknown, repeated or escaped, a rule broken), which the full parse then names.
    private static func decodeWithoutObject(_ frame: some Collection<UInt8>, catalog: OrderCatalog) -> Order? {
        var fields = TopLevelFields()
        guard JSONValue.forEachMember(of: frame, { key, value in fields.take(bytes: key, value) }) else { return nil }
        return try? validated(fields, catalog: catalog)
    }

    /// What a frame over `maxFrameBytes` says of the order it would be, when it is a JSON object
    /// with a string `orderId`, so upstream learns why that order is refused: read without
    /// building its nested values, so the frame costs little more than its own bytes.
    private static func identityOfOversized(_ frame: some Collection<UInt8>) -> OrderIdentity? {
        var fields = (orderId: JSONValue?.none, merchant: JSONValue?.none, provider: JSONValue?.none, operation: JSONValue?.none)
        let read = JSONValue.forEachMember(of: frame, keepingNested: false) { key, value in
            switch key {
            case "orderId": JSONValue.keepOnce(value, in: &fields.orderId)
            case "merchant": JSONValue.keepOnce(value, in: &fields.merchant)
            case "provider": JSONValue.keepOnce(value, in: &fields.provider)
            case "operation": JSONValue.keepOnce(value, in: &fields.operation)
            default: true
            }
        }
        guard read, fields.orderId?.stringValue != nil else { return nil }
        return OrderIdentity(
            orderId: echo(fields.orderId), merchant: fields.merchant == nil ? "default" : echo(fields.merchant), provider: echo(fields.provider),
            operation: echo(fields.operation))
    }

    private static func echo(_ value: JSONValue?) -> String {
        guard let string = value?.stringValue else { return "" }
        return string.count <= maxEchoLength ? string : String(string.prefix(maxEchoLength))
    }

    static func validate(_ object: [String: JSONValue], catalog: OrderCatalog) throws(Rejection) -> Order {
        // One pass over the members, each key matched by comparison: a lookup per field would hash
        // the keys again, and every order is validated three times (ledger, signer, submitter).
        var fields = TopLevelFields()
        var unknown: String?
        for (key, value) in object where !fields.take(key, value) {
            if unknown.map({ key < $0 }) ?? true { unknown = key }
        }
        if let unknown {
            throw Rejection(
                .unknownField, field: unknown,
                "\(unknown.prefix(64)) is not an order field (allowed: \(topLevelKeys.sorted().joined(separator: ", ")))")
        }
        return try validated(fields, catalog: catalog)
    }

    /// The rules of docs/protocol.md ("Orders in") over the top-level fields, in the order
    /// their rejections are checked.
    private static func validated(_ fields: TopLevelFields, catalog: OrderCatalog) throws(Rejection) -> Order {
        guard let version = fields.v else { throw Rejection(.missingField, field: "v", "v is required and must be 1") }
        guard version == .integer(version1) else {
            throw Rejection(.unsupportedVersion, field: "v", "v must be 1, got \(describe(version))")
        }
        let orderId = try requiredString(fields.orderId, "orderId")
        guard isValidOrderId(orderId) else {
            throw Rejection(.invalidOrderId, field: "orderId", "orderId must be 1-64 characters of [A-Za-z0-9._:-]")
        }
        var merchant = "default"
        if let value = fields.merchant {
            guard let string = value.stringValue else {
                throw Rejection(.invalidType, field: "merchant", "merchant must be a string, got \(value.typeName)")
            }
            guard !string.isEmpty, string.utf8.count <= 64 else {
                throw Rejection(.invalidMerchant, field: "merchant", "merchant must be 1-64 characters")
            }
            // Keys are compared byte for byte; a NUL would be cut by C APIs and merge two keys.
            guard !string.utf8.contains(0) else {
                throw Rejection(.invalidMerchant, field: "merchant", "merchant must not contain NUL")
            }
            merchant = string
        }
        let providerName = try requiredString(fields.provider, "provider")
        guard let provider = catalog.provider(named: providerName) else {
            throw Rejection(
                .unknownProvider, field: "provider",
                "provider \"\(providerName.prefix(32))\" is not one of \(catalog.providers.map(\.rawValue).joined(separator: ", "))")
        }
        let operationName = try requiredString(fields.operation, "operation")
        guard let spec = catalog.operation(named: operationName, of: provider) else {
            let allowed = catalog.operations(of: provider).map(\.operation.rawValue).joined(separator: ", ")
            throw Rejection(
                .unknownOperation, field: "operation",
                "operation \"\(operationName.prefix(32))\" is not one of \(provider.rawValue)'s: \(allowed)")
        }
        let operation = spec.operation
        guard let paramsValue = fields.params else {
            throw Rejection(.missingField, field: "params", "params is required (an object of the operation's parameters)")
        }
        guard case .object(let params) = paramsValue else {
            throw Rejection(.invalidType, field: "params", "params must be an object, got \(paramsValue.typeName)")
        }
        var order = Order(orderId: orderId, merchant: merchant, operation: operation, params: params)
        if let value = fields.amount {
            guard case .integer(let amount) = value else {
                throw Rejection(.amountNotInteger, field: "amount", "amount must be an integer in minor units, got \(value.typeName)")
            }
            guard amount > 0 else {
                throw Rejection(.amountNotPositive, field: "amount", "amount must be greater than 0, got \(amount)")
            }
            order.amount = amount
        }
        if let value = fields.currency {
            guard let currency = value.stringValue, isAlpha3(currency) else {
                throw Rejection(.invalidCurrency, field: "currency", "currency must be an ISO 4217 alpha-3 code (three capital letters)")
            }
            order.currency = currency
        }
        if spec.movesMoney(params) {
            guard order.amount != nil else {
                throw Rejection(.missingField, field: "amount", "amount is required for \(provider.rawValue) \(operation.rawValue)")
            }
            guard order.currency != nil else {
                throw Rejection(.missingField, field: "currency", "currency is required for \(provider.rawValue) \(operation.rawValue)")
            }
        }
        return order
    }

    private static let version1 = Order.version

    /// The members `topLevelKeys` names.
    private struct TopLevelFields {
        var v, orderId, merchant, provider, operation, amount, currency, params: JSONValue?

        /// Keeps `value` if `key` is an order field. Keys of a parsed object are matched by their
        /// bytes, as the frame's are.
        mutating func take(_ key: String, _ value: JSONValue) -> Bool {
            var key = key
            return key.withUTF8 { take(bytes: $0, value) }
        }

        /// The same for a key still in the frame's bytes, and false for a repeated field (which
        /// the full parse refuses).
        mutating func take(bytes key: UnsafeBufferPointer<UInt8>, _ value: JSONValue) -> Bool {
            func keep(_ field: inout JSONValue?) -> Bool { JSONValue.keepOnce(value, in: &field) }
            switch key {
            case "v": return keep(&v)
            case "amount": return keep(&amount)
            case "params": return keep(&params)
            case "orderId": return keep(&orderId)
            case "merchant": return keep(&merchant)
            case "provider": return keep(&provider)
            case "currency": return keep(&currency)
            case "operation": return keep(&operation)
            default: return false
            }
        }
    }

    private static func requiredString(_ value: JSONValue?, _ key: String) throws(Rejection) -> String {
        guard let value else { throw Rejection(.missingField, field: key, "\(key) is required") }
        guard let string = value.stringValue else {
            throw Rejection(.invalidType, field: key, "\(key) must be a string, got \(value.typeName)")
        }
        return string
    }

    private static func describe(_ value: JSONValue) -> String {
        switch value {
        case .integer(let i): String(i)
        case .string(let s): "\"\(s.prefix(16))\""
        default: value.typeName
        }
    }

    public static func isValidOrderId(_ id: String) -> Bool {
        let bytes = id.utf8
        guard !bytes.isEmpty, bytes.count <= maxOrderIdLength else { return false }
        return bytes.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: ":"), UInt8(ascii: "-"):
                true
            default: false
            }
        }
    }

    /// Whether `merchant` can name an order (and so key a stored outcome): what `validate`
    /// accepts, 1-64 bytes without NUL.
    public static func isValidMerchant(_ merchant: String) -> Bool {
        let bytes = merchant.utf8
        return !bytes.isEmpty && bytes.count <= 64 && !bytes.contains(0)
    }

    public static func isAlpha3(_ code: String) -> Bool {
        let bytes = code.utf8
        return bytes.count == 3 && bytes.allSatisfy { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") }
    }
}

/// An outcome as docs/protocol.md ("Outcomes out") defines it.
public struct Outcome: Sendable, Equatable {
    public enum Status: String, Sendable, CaseIterable {
        case accepted, pending, succeeded, failed, rejected, unknown
        /// Every order ends in exactly one of these.
        public var isTerminal: Bool { self == .succeeded || self == .failed || self == .rejected }
    }

    public struct ErrorInfo: Sendable, Equatable {
        /// An `OutcomeErrorCode`'s `rawValue` (or a `Rejection.Code`'s), as the JSON carries it.
        public var code: String
        public var message: String

        /// The error of an outcome a stage or a verdict decides.
        public init(code: OutcomeErrorCode, message: String) {
            self.init(code: code.rawValue, message: message)
        }

        /// An error as read back from an outcome's JSON (or a `Rejection.Code`'s text).
        public init(code: String, message: String) {
            self.code = code
            self.message = message
        }

        /// Money may have moved and nothing more can tell; an operator decides.
        /// An `unknown` outcome with this code ends the pipeline's own attempts on the order.
        public static let needsReviewCode = OutcomeErrorCode.needsReview.rawValue

        public var needsReview: Bool { code == Self.needsReviewCode }
    }

    public var orderId: String
    public var merchant: String
    public var provider: String
    public var operation: String
    public var status: Status
    public var result: [String: JSONValue]?
    public var error: ErrorInfo?
    public var attempts: Int
    /// RFC 3339 UTC with milliseconds, e.g. 2026-11-21T05:00:00.123Z.
    public var at: String
    /// Set on a correction: this terminal outcome replaces the order's earlier one, which told
    /// upstream that no money was taken, because a genuine provider callback says it was.
    public var supersedes: Supersedes?

    /// The terminal outcome a correction replaces.
    public struct Supersedes: Sendable, Equatable {
        /// The replaced outcome's `seq` (nil when the replaced outcome was stored without one).
        public var seq: Int64?
        public var status: Status
        public var code: String?

        public init(seq: Int64?, status: Status, code: String?) {
            self.seq = seq
            self.status = status
            self.code = code
        }
    }

    public init(
        orderId: String, merchant: String, provider: String, operation: String, status: Status,
        result: [String: JSONValue]? = nil, error: ErrorInfo? = nil, attempts: Int = 1, at: String = Timestamp.now()
    ) {
        self.orderId = orderId
        self.merchant = merchant
        self.provider = provider
        self.operation = operation
        self.status = status
        self.result = result
        self.error = error
        self.attempts = attempts
        self.at = at
    }

    public init(
        order: Order, status: Status, result: [String: JSONValue]? = nil, error: ErrorInfo? = nil, attempts: Int = 1, at: String = Timestamp.now()
    ) {
        self.init(
            orderId: order.orderId, merchant: order.merchant, provider: order.provider.rawValue,
            operation: order.operation.rawValue, status: status, result: result, error: error, attempts: attempts, at: at)
    }

    /// The `rejected` outcome for an order that broke a rule.
    public static func rejected(_ rejection: Rejection, identity: OrderIdentity, at: String = Timestamp.now()) -> Outcome {
        Outcome(
            orderId: identity.orderId, merchant: identity.merchant, provider: identity.provider,
            operation: identity.operation, status: .rejected,
            error: ErrorInfo(code: rejection.code.rawValue, message: rejection.message), attempts: 0, at: at)
    }

    public var json: JSONValue {
        var object: [String: JSONValue] = [
            "v": 1, "orderId": .string(orderId), "merchant": .string(merchant), "provider": .string(provider),
            "operation": .string(operation), "status": .string(status.rawValue),
            "attempts": .integer(Int64(attempts)), "at": .string(at),
        ]
        if let result { object["result"] = .object(result) }
        if let error { object["error"] = ["code": .string(error.code), "message": .string(error.message)] }
        if let supersedes { object["supersedes"] = supersedes.json }
        return .object(object)
    }

    /// The wire form: one compact JSON object, keys sorted, so equal outcomes are equal bytes.
    public var serialized: String { String(decoding: bytes, as: UTF8.self) }
    /// `json.bytes`, written without building the `JSONValue` (every outcome of every stage).
    public var bytes: [UInt8] {
        var writer = JSONObjectWriter(capacity: 320)
        writer.string("at", at)
        writer.integer("attempts", Int64(attempts))
        if let error {
            writer.object("error") { nested in
                nested.string("code", error.code)
                nested.string("message", error.message)
            }
        }
        writer.string("merchant", merchant)
        writer.string("operation", operation)
        writer.string("orderId", orderId)
        writer.string("provider", provider)
        if let result { writer.value("result", .object(result)) }
        writer.string("status", status.rawValue)
        if let supersedes { writer.value("supersedes", supersedes.json) }
        writer.integer("v", 1)
        return writer.finish()
    }

    public static func parse(_ bytes: some Collection<UInt8>) throws -> Outcome {
        // The members go straight into their fields, without the top-level object's dictionary
        // (the ledger parses every stage's outcome); a document that way does not take whole
        // (an escaped or unknown key, a repeated one) is parsed in full, which also says what
        // is wrong with it.
        var fields = Fields()
        if JSONValue.forEachMember(of: bytes, { key, value in fields.take(bytes: key, value) }) { return try fields.outcome() }
        guard case .object(let o) = try JSONValue.parse(bytes) else { throw OutcomeParseError(field: "outcome") }
        fields = Fields()
        // Keys matched by their bytes, as above; members this reading does not know are passed over.
        for (key, value) in o {
            var key = key
            _ = key.withUTF8 { fields.take(bytes: $0, value) }
        }
        return try fields.outcome()
    }

    /// The members an outcome is made of; others, such as `seq`, are passed over.
    private struct Fields {
        var v, status, attempts, error, result, orderId, merchant, provider, operation, at, supersedes: JSONValue?
        var seq = false

        /// Keeps `value` if `key` names a member; false for a key met before or one this reading
        /// does not know (the full parse refuses the one and passes over the other).
        mutating func take(bytes key: UnsafeBufferPointer<UInt8>, _ value: JSONValue) -> Bool {
            func keep(_ field: inout JSONValue?) -> Bool { JSONValue.keepOnce(value, in: &field) }
            switch key {
            case "v": return keep(&v)
            case "at": return keep(&at)
            case "seq":
                guard !seq else { return false }
                seq = true
                return true
            case "error": return keep(&error)
            case "status": return keep(&status)
            case "result": return keep(&result)
            case "orderId": return keep(&orderId)
            case "attempts": return keep(&attempts)
            case "merchant": return keep(&merchant)
            case "provider": return keep(&provider)
            case "operation": return keep(&operation)
            case "supersedes": return keep(&supersedes)
            default: return false
            }
        }

        func outcome() throws -> Outcome {
            func string(_ value: JSONValue?, _ key: String) throws -> String {
                guard let s = value?.stringValue else { throw OutcomeParseError(field: key) }
                return s
            }
            guard v == 1 else { throw OutcomeParseError(field: "v") }
            guard let status = Status(rawValue: try string(status, "status")) else { throw OutcomeParseError(field: "status") }
            guard let attempts = attempts?.integerValue else { throw OutcomeParseError(field: "attempts") }
            var errorInfo: ErrorInfo?
            if let e = error {
                guard let code = e["code"]?.stringValue, let message = e["message"]?.stringValue else {
                    throw OutcomeParseError(field: "error")
                }
                errorInfo = ErrorInfo(code: code, message: message)
            }
            var resultObject: [String: JSONValue]?
            if let r = result {
                guard let object = r.objectValue else { throw OutcomeParseError(field: "result") }
                resultObject = object
            }
            var outcome = Outcome(
                orderId: try string(orderId, "orderId"), merchant: try string(merchant, "merchant"), provider: try string(provider, "provider"),
                operation: try string(operation, "operation"), status: status, result: resultObject, error: errorInfo,
                attempts: Int(attempts), at: try string(at, "at"))
            if let value = supersedes {
                guard let replaced = Supersedes(json: value) else { throw OutcomeParseError(field: "supersedes") }
                outcome.supersedes = replaced
            }
            return outcome
        }
    }
}

extension Outcome.Supersedes {
    var json: JSONValue {
        var object: [String: JSONValue] = ["status": .string(status.rawValue)]
        if let seq { object["seq"] = .integer(seq) }
        if let code { object["code"] = .string(code) }
        return .object(object)
    }

    init?(json: JSONValue) {
        guard let status = json["status"]?.stringValue.flatMap(Outcome.Status.init(rawValue:)) else { return nil }
        var seq: Int64?
        if let value = json["seq"] {
            guard let integer = value.integerValue else { return nil }
            seq = integer
        }
        var code: String?
        if let value = json["code"] {
            guard let text = value.stringValue else { return nil }
            code = text
        }
        self.init(seq: seq, status: status, code: code)
    }
}

public struct OutcomeParseError: Error, Sendable, CustomStringConvertible {
    public let field: String
    public var description: String { "outcome field \(field) is missing or invalid" }
}

extension Outcome {
    /// What stands in a stored outcome for a secret value withheld from the store (see
    /// `ProviderConnector.withholdingSecrets`): URL-safe, and never produced by percent-encoding
    /// a real value (it has a bare `!`).
    public static func withheldMark(named setting: String) -> String { "!withheld:" + setting + "!" }

    /// Replaces every withheld mark in a stored outcome's text with what `value` gives for its
    /// setting name; nil when the text has no mark.
    public static func revealing(_ text: String, value: (String) -> String?) -> String? {
        guard text.contains("!withheld:") else { return nil }
        var out = ""
        var rest = Substring(text)
        while let start = rest.firstRange(of: "!withheld:") {
            out += rest[..<start.lowerBound]
            let afterPrefix = rest[start.upperBound...]
            guard let end = afterPrefix.firstIndex(of: "!") else {
                rest = rest[start.lowerBound...]
                break
            }
            let name = String(afterPrefix[..<end])
            out += value(name) ?? String(rest[start.lowerBound...end])
            rest = afterPrefix[afterPrefix.index(after: end)...]
        }
        return out + rest
    }

    /// The last word on a pending order whose provider cannot say what became of it.
    public static func needsReview(_ order: Order, _ message: String, attempts: Int = 0) -> Outcome {
        Outcome(order: order, status: .unknown, error: .init(code: .needsReview, message: message), attempts: attempts)
    }
}

import PaypipeCore

/// Reading `order.params` (and `params.updates`) into Trust Payments' wire values. Every
/// failure is a `Rejection` naming `params.<field>` and the rule it broke.
enum TPParams {
    /// A non-negative integer given as a JSON integer or as a string of ASCII digits (Trust
    /// Payments itself writes numbers as strings), at most `maxDigits` digits long as the
    /// seed's `Numeric(n)` formats require.
    static func digits(_ value: JSONValue, name: String, maxDigits: Int) throws(Rejection) -> Int64 {
        switch value {
        case .integer(let number):
            guard number >= 0 else { throw Rejection.invalidParam(name, "must not be negative (got \(number))") }
            guard number <= maxValue(digits: maxDigits) else {
                throw Rejection.invalidParam(name, "must have at most \(maxDigits) digits (Numeric(\(maxDigits)))")
            }
            return number
        case .string(let text):
            let bytes = text.utf8
            guard !bytes.isEmpty, bytes.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else {
                throw Rejection.invalidParam(name, "must be an integer or a string of digits")
            }
            guard bytes.count <= maxDigits, let number = Int64(text) else {
                throw Rejection.invalidParam(name, "must have at most \(maxDigits) digits (Numeric(\(maxDigits)))")
            }
            return number
        default:
            throw Rejection.invalidParam(name, "must be an integer, got \(value.typeName)")
        }
    }

    static func maxValue(digits: Int) -> Int64 {
        var value: Int64 = 0
        for _ in 0..<min(digits, 18) { value = value * 10 + 9 }
        return value
    }

    static func requiredString(_ params: [String: JSONValue], _ name: String) throws(Rejection) -> String {
        guard let value = params[name] else { throw Rejection.missingParam(name) }
        guard let text = value.stringValue else { throw Rejection.invalidParam(name, "must be a string, got \(value.typeName)") }
        guard !text.isEmpty else { throw Rejection.invalidParam(name, "must not be empty") }
        return text
    }

    static func unit(_ value: JSONValue, name: String) throws(Rejection) -> TPSubscriptionUnit {
        guard let text = value.stringValue else { throw Rejection.invalidParam(name, "must be a string, got \(value.typeName)") }
        guard let unit = TPSubscriptionUnit(rawValue: text) ?? TPSubscriptionUnit(rawValue: text.uppercased()) else {
            throw Rejection.invalidParam(name, "must be DAY or MONTH")
        }
        return unit
    }

    static func frequency(_ value: JSONValue, name: String) throws(Rejection) -> Int64 {
        let frequency = try digits(value, name: name, maxDigits: 11)
        guard frequency >= 1 else { throw Rejection.invalidParam(name, "must be at least 1") }
        return frequency
    }

    /// "0" schedules payments indefinitely (seed: subscriptionfinalnumber).
    static func finalNumber(_ value: JSONValue, name: String) throws(Rejection) -> Int64 {
        try digits(value, name: name, maxDigits: 5)
    }

    static func transactionActive(_ value: JSONValue, name: String, allowed: ClosedRange<Int64>) throws(Rejection) -> Int64 {
        let state = try digits(value, name: name, maxDigits: 1)
        guard allowed.contains(state) else {
            let list = allowed.map(String.init).joined(separator: ", ")
            throw Rejection.invalidParam(name, "must be one of \(list)")
        }
        return state
    }

    /// Trust Payments transaction references look like `56-9-123456`; anything outside this
    /// alphabet cannot be one and is refused before it reaches a JSON filter.
    static func transactionReference(_ params: [String: JSONValue], _ name: String) throws(Rejection) -> String {
        let reference = try requiredString(params, name)
        let bytes = reference.utf8
        guard bytes.count <= 64, bytes.allSatisfy(isReferenceByte) else {
            throw Rejection.invalidParam(name, "must be 1-64 characters of A-Z, a-z, 0-9 and '-'")
        }
        return reference
    }

    static func isReferenceByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"):
            true
        default: false
        }
    }

    static func rejectUnknown(_ params: [String: JSONValue], allowed: Set<String>, prefix: String = "") throws(Rejection) {
        // Sorted only on the error path, so that the first unknown key named is stable.
        guard params.keys.contains(where: { !allowed.contains($0) }) else { return }
        for key in params.keys.sorted() where !allowed.contains(key) {
            let list = allowed.sorted().joined(separator: ", ")
            throw Rejection.invalidParam(prefix + key, "is not a known parameter (expected one of: \(list))")
        }
    }
}

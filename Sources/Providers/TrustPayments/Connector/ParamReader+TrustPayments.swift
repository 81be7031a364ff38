import PaypipeCore

/// Trust Payments' value rules on top of the shared `ParamReader` (for `order.params` and
/// `params.updates`).
extension ParamReader {
    /// A non-negative integer given as a JSON integer or as a string of ASCII digits (Trust
    /// Payments itself writes numbers as strings), at most `maxDigits` digits long as the
    /// `Numeric(n)` formats of Trust Payments' field table require.
    func tpNumeric(_ name: String, maxDigits: Int) throws(Rejection) -> Int64 {
        switch try value(name) {
        case .integer(let number):
            guard number >= 0 else { throw invalid(name, "must not be negative (got \(number))") }
            guard number <= Self.tpMaxValue(digits: maxDigits) else {
                throw invalid(name, "must have at most \(maxDigits) digits (Numeric(\(maxDigits)))")
            }
            return number
        case .string(let text):
            let bytes = text.utf8
            guard !bytes.isEmpty, bytes.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else {
                throw invalid(name, "must be an integer or a string of digits")
            }
            guard bytes.count <= maxDigits, let number = Int64(text) else {
                throw invalid(name, "must have at most \(maxDigits) digits (Numeric(\(maxDigits)))")
            }
            return number
        case let other:
            throw wrongType(name, expected: "an integer or a string of digits", got: other)
        }
    }

    static func tpMaxValue(digits: Int) -> Int64 {
        var value: Int64 = 0
        for _ in 0..<min(digits, 18) { value = value * 10 + 9 }
        return value
    }

    /// DAY or MONTH; lower case is accepted and written in capitals, as Trust Payments requires.
    func tpUnit(_ name: String) throws(Rejection) -> TPSubscriptionUnit {
        let text = try string(name)
        guard let unit = TPSubscriptionUnit(rawValue: text) ?? TPSubscriptionUnit(rawValue: text.uppercased()) else {
            throw invalid(name, "must be DAY or MONTH")
        }
        return unit
    }

    func tpFrequency(_ name: String) throws(Rejection) -> Int64 {
        let frequency = try tpNumeric(name, maxDigits: 11)
        guard frequency >= 1 else { throw invalid(name, "must be at least 1") }
        return frequency
    }

    /// "0" schedules payments indefinitely (Trust Payments' subscriptionfinalnumber).
    func tpFinalNumber(_ name: String) throws(Rejection) -> Int64 {
        try tpNumeric(name, maxDigits: 5)
    }

    func tpTransactionActive(_ name: String, allowed: ClosedRange<Int64>) throws(Rejection) -> Int64 {
        let state = try tpNumeric(name, maxDigits: 1)
        guard allowed.contains(state) else {
            throw invalid(name, "must be one of \(allowed.map(String.init).joined(separator: ", "))")
        }
        return state
    }

    /// Trust Payments transaction references look like `56-9-123456`; anything outside this
    /// alphabet cannot be one and is refused before it reaches a JSON filter.
    func tpTransactionReference(_ name: String) throws(Rejection) -> String {
        try string(name, length: 1...64, charset: Self.tpReferenceCharset)
    }

    static let tpReferenceCharset = Charset("of A-Z, a-z, 0-9 and '-'") { scalar in
        Charset.isASCIIAlphanumeric(scalar) || scalar == "-"
    }
}

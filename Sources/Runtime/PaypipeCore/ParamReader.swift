/// Reads one JSON object of order parameters — `order.params`, or an object nested in it
/// such as Trust Payments' `params.updates`, a Nets `params.items[0]` or Viva's `params.isv` —
/// with the same rules for every provider. Each failure is a `Rejection` whose `field` is the
/// full path (`params.reference`, `params.updates.baseamount`, `params.items[0].name`) and
/// whose message names that path and the rule:
///
/// - A key the operation does not know is `UNKNOWN_FIELD`, refused when the reader is made:
///   "params.termUrl is not a parameter of nets createSubscription (allowed: checkoutUrl, …)";
///   nested: "params.updates.currencyiso3a is not a field of params.updates (allowed: …)".
///   A typo in an optional name must not be silently ignored.
/// - A required key that is absent is `MISSING_PARAM`: "params.reference is required".
/// - `null` is never "absent", for required and optional params alike: it is a value of the
///   wrong type, `INVALID_PARAM` "params.callback must be a string, got null". Whoever wrote
///   `null` meant something, and reading it as "use the default" would hide that.
/// - A value of the wrong JSON type is `INVALID_PARAM` naming the expected and the received
///   type: "params.interval must be an integer, got a string". Integers and fractions are
///   different types (1.0 is not an integer).
/// - String lengths are counted in Unicode scalars (code points), everywhere:
///   "params.reference must be 1-128 characters". Not UTF-8 bytes (the limit would depend on
///   the script) and not grapheme clusters (their count depends on the Unicode version, and
///   one cluster can hide any number of combining scalars).
///
/// Provider rules on top (character sets, ranges, formats, enumerations) stay with each
/// provider; they report through `invalid(_:_:)` so they read the same way.
package struct ParamReader: Sendable {
    package let values: [String: JSONValue]
    /// Where `values` sits: `params`, `params.updates`, `params.items[0]`.
    package let path: String

    /// Reads `order.params` of one operation. `operation` names it in the unknown-key message
    /// (e.g. "nets createSubscription").
    package init(_ params: [String: JSONValue], allowed: some Collection<String>, operation: String) throws(Rejection) {
        try self.init(params, path: "params", allowed: allowed, container: "a parameter of \(operation)")
    }

    /// `container` is only built for the message: every order's params pass through here.
    private init(
        _ values: [String: JSONValue], path: String, allowed: some Collection<String>, container: @autoclosure () -> String
    ) throws(Rejection) {
        self.values = values
        self.path = path
        // The smallest unknown key, so that the one named is the same on every run.
        var unknown: String?
        for key in values.keys where !allowed.contains(key) && unknown.map({ key < $0 }) ?? true { unknown = key }
        guard let unknown else { return }
        let field = "\(path).\(Self.printable(unknown))"
        throw Rejection(
            .unknownField, field: field,
            "\(field) is not \(container()) (allowed: \(allowed.sorted().joined(separator: ", ")))")
    }

    // MARK: Paths and errors

    /// The full path of a key of this object, for messages and `Rejection.field`.
    package func field(_ name: String) -> String { "\(path).\(name)" }

    /// `INVALID_PARAM` for a provider rule: "params.<name> <rule>".
    package func invalid(_ name: String, _ rule: String) -> Rejection {
        Rejection(.invalidParam, field: field(name), "\(field(name)) \(rule)")
    }

    package func missing(_ name: String) -> Rejection {
        Rejection(.missingParam, field: field(name), "\(field(name)) is required")
    }

    /// `INVALID_PARAM` "params.<name> must be <expected>, got <the JSON type of value>".
    package func wrongType(_ name: String, expected: String, got value: JSONValue) -> Rejection {
        invalid(name, "must be \(expected), got \(value.typeName)")
    }

    // MARK: Raw values

    /// Whether the key is present; a key holding `null` is present.
    package func contains(_ name: String) -> Bool { values[name] != nil }

    /// The value of a required key of a type this reader does not model (e.g. Trust Payments'
    /// "integer or string of digits"); `null` is returned as a value, for the caller to refuse.
    package func value(_ name: String) throws(Rejection) -> JSONValue {
        guard let value = values[name] else { throw missing(name) }
        return value
    }

    // MARK: Strings

    /// A required string of any length.
    package func string(_ name: String) throws(Rejection) -> String {
        try checkedString(name, try value(name), length: nil, charset: nil)
    }

    /// A required string whose length in Unicode scalars is within `length` and, with a
    /// `charset`, whose every scalar belongs to it. Either failure states the whole rule:
    /// "params.paymentId must be 1-64 characters of [A-Za-z0-9_-]".
    package func string(_ name: String, length: ClosedRange<Int>, charset: Charset? = nil) throws(Rejection) -> String {
        try checkedString(name, try value(name), length: length, charset: charset)
    }

    /// As `string(_:)`, nil when the key is absent (not when it is `null`).
    package func optionalString(_ name: String) throws(Rejection) -> String? {
        guard let value = values[name] else { return nil }
        return try checkedString(name, value, length: nil, charset: nil)
    }

    /// As `string(_:length:charset:)`, nil when the key is absent (not when it is `null`).
    package func optionalString(_ name: String, length: ClosedRange<Int>, charset: Charset? = nil) throws(Rejection) -> String? {
        guard let value = values[name] else { return nil }
        return try checkedString(name, value, length: length, charset: charset)
    }

    private func checkedString(_ name: String, _ value: JSONValue, length: ClosedRange<Int>?, charset: Charset?) throws(Rejection) -> String {
        guard case .string(let text) = value else { throw wrongType(name, expected: "a string", got: value) }
        guard let length else { return text }
        let scalars = text.unicodeScalars
        guard length.contains(scalars.count), charset.map({ scalars.allSatisfy($0.allows) }) ?? true else {
            throw invalid(name, "must be \(Self.describe(length)) characters\(charset.map { " " + $0.phrase } ?? "")")
        }
        return text
    }

    static func describe(_ length: ClosedRange<Int>) -> String {
        length.upperBound == Int.max ? "at least \(length.lowerBound)" : "\(length.lowerBound)-\(length.upperBound)"
    }

    // MARK: Numbers and booleans

    /// A required JSON integer, within `range` when one is given.
    package func integer(_ name: String, in range: ClosedRange<Int64>? = nil) throws(Rejection) -> Int64 {
        try checkedInteger(name, try value(name), in: range)
    }

    /// As `integer`, nil when the key is absent (not when it is `null`).
    package func optionalInteger(_ name: String, in range: ClosedRange<Int64>? = nil) throws(Rejection) -> Int64? {
        guard let value = values[name] else { return nil }
        return try checkedInteger(name, value, in: range)
    }

    private func checkedInteger(_ name: String, _ value: JSONValue, in range: ClosedRange<Int64>?) throws(Rejection) -> Int64 {
        guard case .integer(let number) = value else { throw wrongType(name, expected: "an integer", got: value) }
        if let range, !range.contains(number) {
            let bounds =
                range.upperBound == Int64.max
                ? "at least \(range.lowerBound)" : "between \(range.lowerBound) and \(range.upperBound)"
            throw invalid(name, "must be \(bounds), got \(number)")
        }
        return number
    }

    /// A boolean, nil when the key is absent (not when it is `null`).
    package func optionalBool(_ name: String) throws(Rejection) -> Bool? {
        guard let value = values[name] else { return nil }
        guard case .bool(let flag) = value else { throw wrongType(name, expected: "a boolean", got: value) }
        return flag
    }

    // MARK: Nested objects and arrays

    /// A required nested object, read with the same rules; its unknown keys are refused.
    package func object(_ name: String, allowed: some Collection<String>) throws(Rejection) -> ParamReader {
        try ParamReader(element: try value(name), at: field(name), allowed: allowed)
    }

    /// As `object`, nil when the key is absent (not when it is `null`).
    package func optionalObject(_ name: String, allowed: some Collection<String>) throws(Rejection) -> ParamReader? {
        guard let value = values[name] else { return nil }
        return try ParamReader(element: value, at: field(name), allowed: allowed)
    }

    /// A nested object found at `path` (an array element such as `params.items[0]`).
    package init(element: JSONValue, at path: String, allowed: some Collection<String>) throws(Rejection) {
        guard case .object(let values) = element else {
            throw Rejection(.invalidParam, field: path, "\(path) must be an object, got \(element.typeName)")
        }
        try self.init(values, path: path, allowed: allowed, container: "a field of \(path)")
    }

    /// A required array whose element count is within `count`.
    package func array(_ name: String, count: ClosedRange<Int>) throws(Rejection) -> [JSONValue] {
        try checkedArray(name, try value(name), count: count)
    }

    /// As `array`, nil when the key is absent (not when it is `null`).
    package func optionalArray(_ name: String, count: ClosedRange<Int>) throws(Rejection) -> [JSONValue]? {
        guard let value = values[name] else { return nil }
        return try checkedArray(name, value, count: count)
    }

    private func checkedArray(_ name: String, _ value: JSONValue, count: ClosedRange<Int>) throws(Rejection) -> [JSONValue] {
        guard case .array(let elements) = value else { throw wrongType(name, expected: "an array", got: value) }
        guard count.contains(elements.count) else { throw invalid(name, "must hold \(Self.describe(count)) items") }
        return elements
    }

    /// A key safe to quote in a message: printable ASCII (others become '?'), at most 64 scalars.
    static func printable(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars.prefix(64) {
            out.unicodeScalars.append(scalar.value >= 0x20 && scalar.value < 0x7F ? scalar : "?")
        }
        return text.unicodeScalars.count > 64 ? out + "…" : out
    }
}

extension ParamReader {
    /// The scalars a string param may hold, and how the rule reads after "must be 1-64
    /// characters" in a message.
    package struct Charset: Sendable {
        package let phrase: String
        package let allows: @Sendable (Unicode.Scalar) -> Bool

        package init(_ phrase: String, allows: @escaping @Sendable (Unicode.Scalar) -> Bool) {
            self.phrase = phrase
            self.allows = allows
        }

        /// `[A-Za-z0-9_-]`: safe verbatim in a URL path, a query value, a header and JSON.
        package static let identifier = Charset("of [A-Za-z0-9_-]") { scalar in
            isASCIIAlphanumeric(scalar) || scalar == "_" || scalar == "-"
        }

        /// Any text but control characters (Unicode category Cc: U+0000-U+001F and
        /// U+007F-U+009F), which would corrupt what a customer sees or a provider stores.
        package static let noControlCharacters = Charset("without control characters") { scalar in
            !(scalar.value < 0x20 || (scalar.value >= 0x7F && scalar.value < 0xA0))
        }

        /// ASCII letters and digits plus the given punctuation, e.g. `asciiAlphanumeric(plus: "._:-")`
        /// reads "of letters, digits and . _ : -".
        package static func asciiAlphanumeric(plus punctuation: String) -> Charset {
            let extra = Set(punctuation.unicodeScalars)
            return Charset("of letters, digits and \(punctuation.map(String.init).joined(separator: " "))") { scalar in
                isASCIIAlphanumeric(scalar) || extra.contains(scalar)
            }
        }

        package static func isASCIIAlphanumeric(_ scalar: Unicode.Scalar) -> Bool {
            switch scalar.value {
            case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: true
            default: false
            }
        }
    }
}

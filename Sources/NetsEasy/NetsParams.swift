import PaypipeCore

/// Reads an order's `params` for one operation: every problem names the field and the rule.
package struct NetsParams {
    let values: [String: JSONValue]

    /// Refuses parameters the operation does not know, so a typo in an optional name
    /// (`termUrl`) is reported instead of silently ignored.
    init(_ values: [String: JSONValue], allowed: [String], operation: Operation) throws(Rejection) {
        if let unknown = values.keys.filter({ !allowed.contains($0) }).sorted().first {
            let name = String(unknown.prefix(64))
            throw Rejection(
                .unknownField, field: "params.\(name)",
                "params.\(name) is not a parameter of nets \(operation.rawValue) (allowed: \(allowed.joined(separator: ", ")))")
        }
        self.values = values
    }

    func string(_ name: String, maxLength: Int = 128) throws(Rejection) -> String {
        guard let value = values[name] else { throw Rejection.missingParam(name) }
        return try NetsParams.text(value, field: name, maxLength: maxLength)
    }

    func optionalString(_ name: String, maxLength: Int = 128) throws(Rejection) -> String? {
        guard let value = values[name], value != .null else { return nil }
        return try NetsParams.text(value, field: name, maxLength: maxLength)
    }

    func integer(_ name: String, in range: ClosedRange<Int64>) throws(Rejection) -> Int64 {
        guard let value = values[name] else { throw Rejection.missingParam(name) }
        return try NetsParams.integer(value, field: name, in: range)
    }

    func safeId(_ name: String) throws(Rejection) -> String {
        let id = try string(name, maxLength: NetsIdentifiers.maxIdLength)
        guard NetsIdentifiers.isSafeId(id) else {
            throw Rejection.invalidParam(name, "must be 1-64 characters of [A-Za-z0-9_-] (it is placed in the request URL)")
        }
        return id
    }

    func url(_ name: String) throws(Rejection) -> String? {
        guard let text = try optionalString(name, maxLength: 2048) else { return nil }
        guard NetsParams.isHTTPURL(text) else {
            throw Rejection.invalidParam(name, "must be an absolute http(s) URL without spaces")
        }
        return text
    }

    /// A non-empty string of at most `maxLength` characters without control characters
    /// (they would corrupt what the customer sees on the hosted page and what Nets stores).
    static func text(_ value: JSONValue, field: String, maxLength: Int) throws(Rejection) -> String {
        guard let text = value.stringValue else {
            throw Rejection.invalidParam(field, "must be a string, got \(value.typeName)")
        }
        guard !text.isEmpty, text.count <= maxLength else {
            throw Rejection.invalidParam(field, "must be 1-\(maxLength) characters")
        }
        guard !text.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
            throw Rejection.invalidParam(field, "must not contain control characters")
        }
        return text
    }

    static func integer(_ value: JSONValue, field: String, in range: ClosedRange<Int64>) throws(Rejection) -> Int64 {
        guard case .integer(let number) = value else {
            throw Rejection.invalidParam(field, "must be an integer, got \(value.typeName)")
        }
        guard range.contains(number) else {
            let upper = range.upperBound == Int64.max ? "" : " and at most \(range.upperBound)"
            throw Rejection.invalidParam(field, "must be at least \(range.lowerBound)\(upper), got \(number)")
        }
        return number
    }

    package static func isHTTPURL(_ text: String) -> Bool {
        let lower = text.lowercased()
        let rest: Substring
        if lower.hasPrefix("https://") {
            rest = lower.dropFirst(8)
        } else if lower.hasPrefix("http://") {
            rest = lower.dropFirst(7)
        } else {
            return false
        }
        guard let first = rest.first, first != "/", first != "?", first != "#" else { return false }
        return text.utf8.count <= 2048 && !text.unicodeScalars.contains { $0.value <= 0x20 || $0.value == 0x7F }
    }
}

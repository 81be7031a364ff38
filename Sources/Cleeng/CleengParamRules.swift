#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import PaypipeCore

/// Parameter rules shared by the Cleeng request builders. Messages name the field and the rule,
/// never the value (receipts and customer tokens must not leak into outcomes or logs).
package enum CleengParamRules {
    static func rejectUnknown(_ params: [String: JSONValue], known: Set<String>, operation: String) throws(Rejection) {
        for key in params.keys.sorted() where !known.contains(key) {
            let shown = printable(key, limit: 64)
            throw Rejection(.unknownField, field: "params.\(shown)",
                            "params.\(shown) is not a parameter of cleeng \(operation) (allowed: \(known.sorted().joined(separator: ", ")))")
        }
    }

    static func requiredString(_ params: [String: JSONValue], _ name: String, maxLength: Int) throws(Rejection) -> String {
        guard let value = params[name], value != .null else { throw Rejection.missingParam(name) }
        guard let text = value.stringValue else {
            throw Rejection.invalidParam(name, "must be a string, got \(value.typeName)")
        }
        guard !text.isEmpty else { throw Rejection.invalidParam(name, "must not be empty") }
        guard text.utf8.count <= maxLength else {
            throw Rejection.invalidParam(name, "must be at most \(maxLength) characters")
        }
        return text
    }

    /// Opaque bearer tokens (classic Cleeng tokens and JWTs): URL/base64 alphabet and dots.
    static func token(_ params: [String: JSONValue], _ name: String, maxLength: Int) throws(Rejection) -> String {
        let text = try requiredString(params, name, maxLength: maxLength)
        for byte in text.utf8 where !(isAlphanumeric(byte) || "._-~+/=".utf8.contains(byte)) {
            throw Rejection.invalidParam(name, "must contain only letters, digits and . _ - ~ + / =")
        }
        return text
    }

    /// Offer ids (`E123123123_US`) and App Store transaction ids (`1000000123456789`).
    static func identifier(_ params: [String: JSONValue], _ name: String, maxLength: Int) throws(Rejection) -> String {
        let text = try requiredString(params, name, maxLength: maxLength)
        for byte in text.utf8 where !(isAlphanumeric(byte) || "._:-".utf8.contains(byte)) {
            throw Rejection.invalidParam(name, "must contain only letters, digits and . _ : -")
        }
        return text
    }

    static func base64(_ params: [String: JSONValue], _ name: String, maxLength: Int) throws(Rejection) -> String {
        let text = try requiredString(params, name, maxLength: maxLength)
        guard CleengBase64.isValid(text) else {
            throw Rejection.invalidParam(name, "must be standard base64 (A-Z a-z 0-9 + /, '=' padding, length a multiple of 4, no whitespace)")
        }
        return text
    }

    static func optionalIPAddress(_ params: [String: JSONValue], _ name: String) throws(Rejection) -> String? {
        guard let value = params[name], value != .null else { return nil }
        guard let text = value.stringValue else {
            throw Rejection.invalidParam(name, "must be a string, got \(value.typeName)")
        }
        guard isIPAddress(text) else {
            throw Rejection.invalidParam(name, "must be an IPv4 or IPv6 address literal")
        }
        return text
    }

    /// IPv4 dotted quad (no leading zeros) or IPv6 text form, without zone ids or brackets.
    package static func isIPAddress(_ text: String) -> Bool {
        guard !text.isEmpty, text.utf8.count <= 45 else { return false }
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 { return true }
        var v6 = in6_addr()
        return inet_pton(AF_INET6, text, &v6) == 1
    }

    static func isAlphanumeric(_ byte: UInt8) -> Bool {
        (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
    }

    /// A value safe to quote in a message: printable ASCII only, cut to `limit`.
    static func printable(_ text: String, limit: Int) -> String {
        var out = ""
        for scalar in text.unicodeScalars.prefix(limit) {
            out.unicodeScalars.append(scalar.value >= 0x20 && scalar.value < 0x7F ? scalar : "?")
        }
        return text.unicodeScalars.count > limit ? out + "…" : out
    }
}

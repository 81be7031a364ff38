import PaypipeCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Cleeng's value rules on top of the shared `ParamReader`. Messages name the field and the
/// rule, never the value (receipts and customer tokens must not leak into outcomes or logs).
extension ParamReader {
    /// Opaque bearer tokens (classic Cleeng tokens and JWTs): URL/base64 alphabet and dots.
    func cleengToken(_ name: String, maxLength: Int) throws(Rejection) -> String {
        try string(name, length: 1...maxLength, charset: CleengParamRules.tokenCharset)
    }

    /// Offer ids (`E123123123_US`) and App Store transaction ids (`1000000123456789`).
    func cleengIdentifier(_ name: String, maxLength: Int) throws(Rejection) -> String {
        try string(name, length: 1...maxLength, charset: CleengParamRules.identifierCharset)
    }

    /// Standard padded base64 (the App Store receipt as the app received it).
    func cleengBase64(_ name: String, maxLength: Int) throws(Rejection) -> String {
        let text = try string(name, length: 1...maxLength)
        guard Base64.decode(text, .standard) != nil else {
            throw invalid(name, "must be standard base64 (A-Z a-z 0-9 + /, '=' padding, length a multiple of 4, no whitespace)")
        }
        return text
    }

    func cleengOptionalIPAddress(_ name: String) throws(Rejection) -> String? {
        guard let text = try optionalString(name) else { return nil }
        guard CleengParamRules.isIPAddress(text) else { throw invalid(name, "must be an IPv4 or IPv6 address literal") }
        return text
    }
}

package enum CleengParamRules {
    static let tokenCharset = ParamReader.Charset.asciiAlphanumeric(plus: "._-~+/=")
    static let identifierCharset = ParamReader.Charset.asciiAlphanumeric(plus: "._:-")

    /// IPv4 dotted quad (no leading zeros) or IPv6 text form, without zone ids or brackets.
    package static func isIPAddress(_ text: String) -> Bool {
        guard !text.isEmpty, text.utf8.count <= 45 else { return false }
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 { return true }
        var v6 = in6_addr()
        return inet_pton(AF_INET6, text, &v6) == 1
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

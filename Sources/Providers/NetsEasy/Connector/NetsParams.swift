import PaypipeCore

/// Nets' value rules on top of the shared `ParamReader` (for `order.params` and each
/// `params.items[i]`).
extension ParamReader {
    /// Text Nets stores and shows on the hosted page: 1-`maxLength` characters without control
    /// characters.
    func netsText(_ name: String, maxLength: Int = 128) throws(Rejection) -> String {
        try string(name, length: 1...maxLength, charset: .noControlCharacters)
    }

    /// An id placed in a request URL (see `NetsIdentifiers.isSafeId`).
    func netsSafeId(_ name: String) throws(Rejection) -> String {
        try string(name, length: 1...NetsIdentifiers.maxIdLength, charset: .identifier)
    }

    func netsOptionalURL(_ name: String) throws(Rejection) -> String? {
        guard let text = try optionalString(name, length: 1...2048, charset: .noControlCharacters) else { return nil }
        guard NetsParams.isHTTPURL(text) else { throw invalid(name, "must be an absolute http(s) URL without spaces") }
        return text
    }
}

/// The URL rule shared by the params, the webhook URL and the configured base URL (the
/// sandbox applies it too).
package enum NetsParams {
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

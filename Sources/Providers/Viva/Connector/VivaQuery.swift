import PaypipeCore

/// RFC 3986 query handling for Viva's inter-app URIs, both ways: percent-encoding every value on
/// the way out (the raw concatenation of Viva's sample code lets a value such as `a&amount=1`
/// inject parameters) and strict decoding on the way in.
public struct VivaQuery: Sendable, Equatable {
    /// Keys and values in URI order, decoded.
    public let items: [(key: String, value: String)]

    public static func == (a: VivaQuery, b: VivaQuery) -> Bool {
        a.items.count == b.items.count && zip(a.items, b.items).allSatisfy { $0.key == $1.key && $0.value == $1.value }
    }

    public init(items: [(key: String, value: String)]) { self.items = items }

    public subscript(key: String) -> String? { items.first { $0.key == key }?.value }

    /// `key=value&...` with both sides percent-encoded.
    public var encoded: String {
        var out = ""
        out.reserveCapacity(items.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count + 2 } * 3 / 2)
        for (index, item) in items.enumerated() {
            if index > 0 { out += "&" }
            VivaQuery.percentEncode(item.key, into: &out)
            out += "="
            VivaQuery.percentEncode(item.value, into: &out)
        }
        return out
    }

    private static let hexDigits: [UInt8] = Array("0123456789ABCDEF".utf8)

    static func isUnreserved(_ byte: UInt8) -> Bool {
        (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
            || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "~")
    }

    /// Unreserved characters stay; every other UTF-8 byte becomes `%XX` (uppercase). Space is `%20`.
    public static func percentEncode(_ text: String, into out: inout String) {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            if isUnreserved(byte) {
                bytes.append(byte)
            } else {
                bytes.append(UInt8(ascii: "%"))
                bytes.append(hexDigits[Int(byte >> 4)])
                bytes.append(hexDigits[Int(byte & 0x0F)])
            }
        }
        out += String(decoding: bytes, as: UTF8.self)
    }

    public static func percentEncode(_ text: String) -> String {
        var out = ""
        percentEncode(text, into: &out)
        return out
    }

    /// Characters RFC 3986 allows unencoded inside a query component (unreserved, sub-delims
    /// except the `&` separator, `:`, `@`, `/`, `?`). `=` is allowed inside a value.
    static func isAllowedRaw(_ byte: UInt8) -> Bool {
        if isUnreserved(byte) { return true }
        switch byte {
        case UInt8(ascii: "!"), UInt8(ascii: "$"), UInt8(ascii: "'"), UInt8(ascii: "("), UInt8(ascii: ")"),
            UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: ","), UInt8(ascii: ";"), UInt8(ascii: "="),
            UInt8(ascii: ":"), UInt8(ascii: "@"), UInt8(ascii: "/"), UInt8(ascii: "?"):
            return true
        default:
            return false
        }
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case 0x30...0x39: byte - 0x30
        case 0x41...0x46: byte - 0x41 + 10
        case 0x61...0x66: byte - 0x61 + 10
        default: nil
        }
    }

    /// Decodes one component. `+` stays `+` (RFC 3986 has no form encoding). Refuses raw characters
    /// RFC 3986 does not allow, broken `%` escapes, decoded bytes that are not UTF-8, and control
    /// characters (a decoded newline or NUL in a field is never legitimate).
    static func percentDecode(_ component: ArraySlice<UInt8>, field: String) throws(CallbackRejection) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(component.count)
        var index = component.startIndex
        while index < component.endIndex {
            let byte = component[index]
            if byte == UInt8(ascii: "%") {
                guard index + 2 < component.endIndex,
                    let high = hexValue(component[index + 1]), let low = hexValue(component[index + 2])
                else {
                    throw .viva(.invalidEncoding, "\(field) has a '%' not followed by two hex digits")
                }
                bytes.append(high << 4 | low)
                index += 3
            } else {
                guard isAllowedRaw(byte) else {
                    throw .viva(.invalidEncoding, "\(field) has a character that must be percent-encoded")
                }
                bytes.append(byte)
                index += 1
            }
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw .viva(.invalidEncoding, "\(field) does not decode to UTF-8")
        }
        guard !text.unicodeScalars.contains(where: VivaQuery.isControl) else {
            throw .viva(.invalidEncoding, "\(field) contains control characters")
        }
        return text
    }

    static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (scalar.value >= 0x7F && scalar.value < 0xA0)
    }

    /// Parses a query string (without `?`). Empty components, keys without `=`, empty keys and
    /// repeated keys are refused: a repeated `amount` must never be resolved by picking one.
    public static func parse(_ query: some Collection<UInt8>) throws(CallbackRejection) -> VivaQuery {
        let bytes = Array(query)
        if bytes.isEmpty { return VivaQuery(items: []) }
        var items: [(key: String, value: String)] = []
        var seen: Set<String> = []
        for component in bytes.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: false) {
            guard let equals = component.firstIndex(of: UInt8(ascii: "=")) else {
                throw .viva(.malformedURI, "every query component must be key=value")
            }
            let key = try percentDecode(component[component.startIndex..<equals], field: "query key")
            guard !key.isEmpty else { throw .viva(.malformedURI, "a query key is empty") }
            let shownKey = VivaText.printable(key, limit: 64)
            let value = try percentDecode(component[(equals + 1)...], field: shownKey)
            guard seen.insert(key).inserted else {
                throw .viva(.duplicateParameter, "\(shownKey) appears more than once")
            }
            items.append((key, value))
        }
        return VivaQuery(items: items)
    }
}

/// A parsed `scheme://host/path?query` inter-app URI.
public struct VivaURI: Sendable, Equatable {
    public let scheme: String
    public let host: String
    public let path: String
    public let query: VivaQuery

    public static let maxLength = 16 * 1024

    public static func parse(_ text: String) throws(CallbackRejection) -> VivaURI {
        let bytes = Array(text.utf8)
        guard !bytes.isEmpty, bytes.count <= maxLength else {
            throw .viva(.malformedURI, "the URI must be 1 to \(maxLength) bytes")
        }
        guard !bytes.contains(UInt8(ascii: "#")) else {
            throw .viva(.malformedURI, "the URI must not carry a fragment")
        }
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")),
            bytes.count >= colon + 3, bytes[colon + 1] == UInt8(ascii: "/"), bytes[colon + 2] == UInt8(ascii: "/")
        else {
            throw .viva(.malformedURI, "the URI must look like scheme://host?query")
        }
        let scheme = String(decoding: bytes[..<colon], as: UTF8.self)
        guard VivaText.isScheme(scheme) else {
            throw .viva(.malformedURI, "the URI scheme is not a valid RFC 3986 scheme")
        }
        let afterAuthority = colon + 3
        let queryStart = bytes[afterAuthority...].firstIndex(of: UInt8(ascii: "?"))
        let hierarchy = bytes[afterAuthority..<(queryStart ?? bytes.endIndex)]
        for byte in hierarchy where !(VivaQuery.isUnreserved(byte) || byte == UInt8(ascii: "/")) {
            throw .viva(.malformedURI, "the URI host and path may hold only unreserved characters and '/'")
        }
        let slash = hierarchy.firstIndex(of: UInt8(ascii: "/")) ?? hierarchy.endIndex
        let query = try VivaQuery.parse(queryStart.map { bytes[($0 + 1)...] } ?? [])
        return VivaURI(
            scheme: scheme, host: String(decoding: hierarchy[..<slash], as: UTF8.self),
            path: String(decoding: hierarchy[slash...], as: UTF8.self), query: query)
    }
}

enum VivaText {
    /// RFC 3986 scheme: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ), kept to 64 characters.
    static func isScheme(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard let first = bytes.first, bytes.count <= 64,
            (first >= 0x41 && first <= 0x5A) || (first >= 0x61 && first <= 0x7A)
        else { return false }
        return bytes.allSatisfy { byte in
            VivaQuery.isUnreserved(byte) && byte != UInt8(ascii: "_") && byte != UInt8(ascii: "~") || byte == UInt8(ascii: "+")
        }
    }

    /// A value safe to quote in a message: printable ASCII only, cut to `limit`.
    static func printable(_ text: String, limit: Int) -> String {
        var out = ""
        for scalar in text.unicodeScalars.prefix(limit) {
            out.unicodeScalars.append(scalar.value >= 0x20 && scalar.value < 0x7F ? scalar : "?")
        }
        return text.unicodeScalars.count > limit ? out + "…" : out
    }

    static func isDigits(_ text: String, maxLength: Int) -> Bool {
        !text.isEmpty && text.utf8.count <= maxLength && text.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
    }

    static func isAlphanumeric(_ text: String, maxLength: Int) -> Bool {
        !text.isEmpty && text.utf8.count <= maxLength
            && text.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) }
    }

    /// Unsigned decimal without sign, spaces or fraction, within Int64.
    static func integer(_ text: String) -> Int64? {
        guard isDigits(text, maxLength: 18) else { return nil }
        return Int64(text)
    }
}

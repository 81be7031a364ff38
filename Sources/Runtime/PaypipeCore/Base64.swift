/// Base64 (RFC 4648), the one codec every provider module uses, in two variants:
///
/// - `.standard` (RFC 4648 §4, alphabet `A-Z a-z 0-9 + /`): padded. The encoder always pads
///   to a multiple of 4 with `=`; the decoder requires exactly that padding (`QQ==`, `QUI=`)
///   and refuses unpadded text (`QQ`). This is what HTTP Basic auth, PhonePe's `request` /
///   `response` fields and App Store receipts use.
/// - `.url` (RFC 4648 §5, alphabet `A-Z a-z 0-9 - _`): unpadded, as JWTs write it (RFC 7515
///   §2). The encoder never pads; the decoder refuses `=`.
///
/// Decoding is strict, so that one byte string has exactly one accepted text (a MAC or a
/// signature compared after decoding cannot be re-spelled): it refuses characters outside the
/// variant's alphabet (including whitespace and the other variant's `+/` or `-_`), padding that
/// is missing, extra or misplaced, a length that no encoding produces (4n+1), and
/// non-canonical trailing bits (`QR==` decodes to the same byte as `QQ==` in lenient decoders;
/// here only `QQ==` is accepted).
package enum Base64 {
    package enum Variant: Sendable {
        case standard
        case url

        fileprivate var alphabet: [UInt8] {
            switch self {
            case .standard: Base64.standardAlphabet
            case .url: Base64.urlAlphabet
            }
        }

        fileprivate var decodeTable: [UInt8] {
            switch self {
            case .standard: Base64.standardDecodeTable
            case .url: Base64.urlDecodeTable
            }
        }

        fileprivate var isPadded: Bool { self == .standard }
    }

    private static let standardAlphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    private static let urlAlphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
    private static let standardDecodeTable = decodeTable(for: standardAlphabet)
    private static let urlDecodeTable = decodeTable(for: urlAlphabet)
    private static let invalid: UInt8 = 0xFF
    private static let pad = UInt8(ascii: "=")

    private static func decodeTable(for alphabet: [UInt8]) -> [UInt8] {
        var table = [UInt8](repeating: invalid, count: 256)
        for (index, byte) in alphabet.enumerated() { table[Int(byte)] = UInt8(index) }
        return table
    }

    /// The length of the encoding of `count` bytes.
    package static func encodedCount(_ count: Int, _ variant: Variant) -> Int {
        variant.isPadded ? (count + 2) / 3 * 4 : (count * 4 + 2) / 3
    }

    /// Appends the encoding of `bytes` to `out` (no intermediate buffer: JWT signing and the
    /// Basic credentials of every request go through here).
    /// Reserving capacity is the caller's business: a token built from several parts reserves once.
    package static func encode(_ bytes: some Collection<UInt8>, _ variant: Variant, into out: inout [UInt8]) {
        // One loop over contiguous bytes: the generic iterator is not specialized across modules
        // and would go byte by byte through a call per element.
        if bytes.withContiguousStorageIfAvailable({ encode(contiguous: $0, variant, into: &out) }) == nil {
            Array(bytes).withUnsafeBufferPointer { encode(contiguous: $0, variant, into: &out) }
        }
    }

    private static func encode(contiguous bytes: UnsafeBufferPointer<UInt8>, _ variant: Variant, into out: inout [UInt8]) {
        let count = bytes.count
        let fullGroups = count / 3
        let tail = count - fullGroups * 3
        let start = out.count
        let added = encodedCount(count, variant)
        out.append(contentsOf: repeatElement(0, count: added))
        variant.alphabet.withUnsafeBufferPointer { table in
            out.withUnsafeMutableBufferPointer { target in
                var i = 0, o = start
                for _ in 0..<fullGroups {
                    let group = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
                    target[o] = table[Int(group >> 18 & 0x3F)]
                    target[o + 1] = table[Int(group >> 12 & 0x3F)]
                    target[o + 2] = table[Int(group >> 6 & 0x3F)]
                    target[o + 3] = table[Int(group & 0x3F)]
                    i += 3
                    o += 4
                }
                guard tail > 0 else { return }
                let group = UInt32(bytes[i]) << 16 | (tail == 2 ? UInt32(bytes[i + 1]) << 8 : 0)
                target[o] = table[Int(group >> 18 & 0x3F)]
                target[o + 1] = table[Int(group >> 12 & 0x3F)]
                if tail == 2 {
                    target[o + 2] = table[Int(group >> 6 & 0x3F)]
                } else if variant.isPadded {
                    target[o + 2] = pad
                }
                if variant.isPadded { target[o + 3] = pad }
            }
        }
    }

    package static func encode(_ bytes: some Collection<UInt8>, _ variant: Variant) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(encodedCount(bytes.count, variant))
        encode(bytes, variant, into: &out)
        return out
    }

    package static func encodeToString(_ bytes: some Collection<UInt8>, _ variant: Variant) -> String {
        String(decoding: encode(bytes, variant), as: UTF8.self)
    }

    /// The bytes `text` encodes, or nil unless `text` is exactly the canonical encoding of
    /// something in `variant` (see the type's rules). The empty text decodes to no bytes.
    package static func decode(_ text: some Collection<UInt8>, _ variant: Variant) -> [UInt8]? {
        if let decoded = text.withContiguousStorageIfAvailable({ decode(contiguous: $0, variant) }) { return decoded }
        return Array(text).withUnsafeBufferPointer { decode(contiguous: $0, variant) }
    }

    private static func decode(contiguous text: UnsafeBufferPointer<UInt8>, _ variant: Variant) -> [UInt8]? {
        let total = text.count
        guard variant.isPadded ? total % 4 == 0 : total % 4 != 1 else { return nil }
        // '=' only as the last one or two characters: anywhere else the table refuses it.
        var padding = 0
        if variant.isPadded, total > 0, text[total - 1] == pad { padding = text[total - 2] == pad ? 2 : 1 }
        let significant = total - padding
        let groups = significant / 4
        let rest = significant % 4
        var valid = true
        // Four characters at a time into a buffer of the exact size: one character at a time,
        // each appended byte would check the array's capacity.
        let decoded = variant.decodeTable.withUnsafeBufferPointer { table in
            [UInt8](unsafeUninitializedCapacity: groups * 3 + max(rest - 1, 0)) { out, initialized in
                var i = 0, o = 0
                for _ in 0..<groups {
                    let a = table[Int(text[i])], b = table[Int(text[i + 1])], c = table[Int(text[i + 2])], d = table[Int(text[i + 3])]
                    // Valid values are below 64; the table marks every other byte 0xFF.
                    guard (a | b | c | d) & 0xC0 == 0 else {
                        valid = false
                        return
                    }
                    let group = UInt32(a) << 18 | UInt32(b) << 12 | UInt32(c) << 6 | UInt32(d)
                    out[o] = UInt8(truncatingIfNeeded: group >> 16)
                    out[o + 1] = UInt8(truncatingIfNeeded: group >> 8)
                    out[o + 2] = UInt8(truncatingIfNeeded: group)
                    i += 4
                    o += 3
                }
                if rest > 0 {
                    let a = table[Int(text[i])], b = table[Int(text[i + 1])], c = rest == 3 ? table[Int(text[i + 2])] : 0
                    guard (a | b | c) & 0xC0 == 0 else {
                        valid = false
                        return
                    }
                    let group = UInt32(a) << 18 | UInt32(b) << 12 | UInt32(c) << 6
                    // The bits past the last whole byte must be zero: any other value is a
                    // second spelling of the same bytes.
                    guard group & (rest == 3 ? 0xFF : 0xFFFF) == 0 else {
                        valid = false
                        return
                    }
                    out[o] = UInt8(truncatingIfNeeded: group >> 16)
                    if rest == 3 { out[o + 1] = UInt8(truncatingIfNeeded: group >> 8) }
                    o += rest - 1
                }
                initialized = o
            }
        }
        return valid ? decoded : nil
    }

    package static func decode(_ text: String, _ variant: Variant) -> [UInt8]? {
        var text = text
        return text.withUTF8 { decode(contiguous: $0, variant) }
    }
}

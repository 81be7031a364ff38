/// Standard base64 (RFC 4648 §4) without Foundation: the Basic credentials are encoded on every
/// receipt request and the sandbox decodes them on every incoming one.
enum CleengBase64 {
    private static let alphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    private static func sextet(_ byte: UInt8) -> UInt8? {
        switch byte {
        case 0x41...0x5A: byte - 0x41
        case 0x61...0x7A: byte - 0x61 + 26
        case 0x30...0x39: byte - 0x30 + 52
        case UInt8(ascii: "+"): 62
        case UInt8(ascii: "/"): 63
        default: nil
        }
    }

    static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var index = 0
        while index + 3 <= bytes.count {
            let n = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8 | UInt32(bytes[index + 2])
            out.append(alphabet[Int(n >> 18 & 63)])
            out.append(alphabet[Int(n >> 12 & 63)])
            out.append(alphabet[Int(n >> 6 & 63)])
            out.append(alphabet[Int(n & 63)])
            index += 3
        }
        let rest = bytes.count - index
        if rest > 0 {
            let n = UInt32(bytes[index]) << 16 | (rest == 2 ? UInt32(bytes[index + 1]) << 8 : 0)
            out.append(alphabet[Int(n >> 18 & 63)])
            out.append(alphabet[Int(n >> 12 & 63)])
            out.append(rest == 2 ? alphabet[Int(n >> 6 & 63)] : UInt8(ascii: "="))
            out.append(UInt8(ascii: "="))
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// nil unless `text` is padded base64 ('=' only as the last one or two characters).
    static func decode(_ text: String) -> [UInt8]? {
        let input = Array(text.utf8)
        guard input.count % 4 == 0 else { return nil }
        var padding = 0
        if input.last == UInt8(ascii: "=") {
            padding = input[input.count - 2] == UInt8(ascii: "=") ? 2 : 1
        }
        var out: [UInt8] = []
        out.reserveCapacity(input.count / 4 * 3)
        var index = 0
        while index < input.count {
            let isLast = index + 4 == input.count
            var n: UInt32 = 0
            for offset in 0..<4 {
                let byte = input[index + offset]
                if isLast, offset >= 4 - padding {
                    guard byte == UInt8(ascii: "=") else { return nil }
                    n <<= 6
                } else {
                    guard let value = sextet(byte) else { return nil }
                    n = n << 6 | UInt32(value)
                }
            }
            out.append(UInt8(n >> 16 & 0xFF))
            if !(isLast && padding == 2) { out.append(UInt8(n >> 8 & 0xFF)) }
            if !(isLast && padding >= 1) { out.append(UInt8(n & 0xFF)) }
            index += 4
        }
        return out
    }

    static func isValid(_ text: String) -> Bool { !text.isEmpty && decode(text) != nil }
}

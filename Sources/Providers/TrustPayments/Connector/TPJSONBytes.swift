/// Appending JSON fragments to a byte buffer, for the hand-built, fixed-order JSON of the
/// signing paths (no `JSONEncoder`, no intermediate `String`s).
enum TPJSONBytes {
    static func appendDecimal(_ value: Int64, to out: inout [UInt8]) {
        if value < 0 {
            out.append(UInt8(ascii: "-"))
            appendDecimal(magnitude: value.magnitude, to: &out)
        } else {
            appendDecimal(magnitude: UInt64(value), to: &out)
        }
    }

    static func appendDecimal(magnitude value: UInt64, to out: inout [UInt8]) {
        var digits:
            (
                UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8
            ) =
                (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var remaining = value
        var count = 0
        withUnsafeMutableBytes(of: &digits) { buffer in
            repeat {
                buffer[19 - count] = UInt8(ascii: "0") + UInt8(remaining % 10)
                remaining /= 10
                count += 1
            } while remaining > 0
            out.append(contentsOf: buffer[(20 - count)...])
        }
    }

    /// A JSON string literal, quotes included, escaping what RFC 8259 requires.
    static func appendString(_ text: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
            case UInt8(ascii: "\\"): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
            case 0..<0x20:
                let hex: [UInt8] = Array("0123456789abcdef".utf8)
                out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")])
                out.append(hex[Int(byte >> 4)])
                out.append(hex[Int(byte & 0x0F)])
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    static func appendQuotedDecimal(_ value: Int64, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        appendDecimal(value, to: &out)
        out.append(UInt8(ascii: "\""))
    }
}

extension JSONValue {
    /// Compact JSON text. Object keys are written in sorted order so that equal values give
    /// identical bytes (outcome copies must be identical).
    public var serialized: String { String(decoding: bytes, as: UTF8.self) }

    /// The same text as UTF-8 bytes, without going through `String` (the hot path of every stage).
    public var bytes: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        write(into: &out)
        return out
    }

    public func write(into out: inout [UInt8]) {
        switch self {
        case .null: out += "null".utf8
        case .bool(let b): out += (b ? "true" : "false").utf8
        case .integer(let i): JSONValue.writeInteger(i, into: &out)
        case .fraction(let d): out += (d.isFinite ? "\(d)" : "null").utf8
        case .string(let s): JSONValue.writeString(s, into: &out)
        case .array(let a):
            out.append(UInt8(ascii: "["))
            for (i, element) in a.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                element.write(into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let o):
            out.append(UInt8(ascii: "{"))
            for (i, pair) in o.sorted(by: { $0.key < $1.key }).enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                JSONValue.writeString(pair.key, into: &out)
                out.append(UInt8(ascii: ":"))
                pair.value.write(into: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    package static func writeInteger(_ value: Int64, into out: inout [UInt8]) {
        if value == 0 {
            out.append(UInt8(ascii: "0"))
            return
        }
        if value < 0 { out.append(UInt8(ascii: "-")) }
        var magnitude = value.magnitude
        var digits:
            (
                UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8
            ) =
                (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var count = 0
        withUnsafeMutableBytes(of: &digits) { buffer in
            while magnitude > 0 {
                buffer[count] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
                count += 1
            }
            for index in stride(from: count - 1, through: 0, by: -1) { out.append(buffer[index]) }
        }
    }

    public static func writeString(_ s: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var s = s
        // Over the contiguous bytes: a String.UTF8View would be scanned and copied byte by
        // byte, and every frame a stage writes passes here.
        s.withUTF8 { utf8 in
            if JSONPlainRun.end(of: utf8, from: 0, stopAtNonASCII: false) == utf8.count {
                out.append(contentsOf: utf8)
                return
            }
            for byte in utf8 {
                switch byte {
                case UInt8(ascii: "\""): out += #"\""#.utf8
                case UInt8(ascii: "\\"): out += #"\\"#.utf8
                case UInt8(ascii: "\n"): out += #"\n"#.utf8
                case UInt8(ascii: "\r"): out += #"\r"#.utf8
                case UInt8(ascii: "\t"): out += #"\t"#.utf8
                case 0..<0x20:
                    let hex: [UInt8] = Array("0123456789abcdef".utf8)
                    out += #"\u00"#.utf8
                    out.append(hex[Int(byte >> 4)])
                    out.append(hex[Int(byte & 0x0F)])
                default: out.append(byte)
                }
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}

/// Writes one JSON object member by member, without building a `JSONValue` first (the hot
/// frames: signed work, outcomes). Callers give the keys in ascending order, so the bytes are
/// those `JSONValue.object(...).bytes` writes; debug builds check the order.
package struct JSONObjectWriter {
    package private(set) var bytes: [UInt8]
    private var empty = true
    #if DEBUG
    private var lastKey = ""
    #endif

    package init(capacity: Int = 256) {
        bytes = []
        bytes.reserveCapacity(capacity)
        bytes.append(UInt8(ascii: "{"))
    }

    /// Writes `"key":` (after a comma unless it is the first member); the value follows.
    package mutating func key(_ key: StaticString) {
        #if DEBUG
        let text = key.description
        assert(empty || lastKey < text, "JSONObjectWriter: \(text) after \(lastKey)")
        lastKey = text
        #endif
        if !empty { bytes.append(UInt8(ascii: ",")) }
        empty = false
        bytes.append(UInt8(ascii: "\""))
        bytes.append(contentsOf: UnsafeBufferPointer(start: key.utf8Start, count: key.utf8CodeUnitCount))
        // Byte by byte: appending a literal's UTF-8 view goes through a generic copy that
        // would cost more than the key itself.
        bytes.append(UInt8(ascii: "\""))
        bytes.append(UInt8(ascii: ":"))
    }

    package mutating func string(_ key: StaticString, _ value: String) {
        self.key(key)
        JSONValue.writeString(value, into: &bytes)
    }

    package mutating func integer(_ key: StaticString, _ value: Int64) {
        self.key(key)
        JSONValue.writeInteger(value, into: &bytes)
    }

    package mutating func value(_ key: StaticString, _ value: JSONValue) {
        self.key(key)
        value.write(into: &bytes)
    }

    /// A member whose value `write` appends as JSON text of its own making.
    package mutating func raw(_ key: StaticString, _ write: (inout [UInt8]) -> Void) {
        self.key(key)
        write(&bytes)
    }

    /// A member whose value is an object written by `write`, into the same buffer.
    package mutating func object(_ key: StaticString, _ write: (inout JSONObjectWriter) -> Void) {
        self.key(key)
        var nested = JSONObjectWriter(continuing: &bytes)
        write(&nested)
        nested.bytes.append(UInt8(ascii: "}"))
        swap(&bytes, &nested.bytes)
    }

    /// Takes `buffer` over (leaving it empty, so that appending does not copy it) and opens an object.
    private init(continuing buffer: inout [UInt8]) {
        bytes = []
        swap(&bytes, &buffer)
        bytes.append(UInt8(ascii: "{"))
    }

    package mutating func finish() -> [UInt8] {
        bytes.append(UInt8(ascii: "}"))
        return bytes
    }
}

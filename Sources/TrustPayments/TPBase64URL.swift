/// Base64url without padding (RFC 7515 §2), hand-rolled because JWT signing is a hot path and
/// Foundation's encoder would add a `Data` round trip and padding to strip.
enum TPBase64URL {
    private static let alphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    private static let decodeTable: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, byte) in alphabet.enumerated() { table[Int(byte)] = UInt8(index) }
        return table
    }()

    static func encodedCount(_ count: Int) -> Int { (count * 4 + 2) / 3 }

    static func encode(_ bytes: some Collection<UInt8>, into out: inout [UInt8]) {
        alphabet.withUnsafeBufferPointer { table in
            var iterator = bytes.makeIterator()
            while let b0 = iterator.next() {
                let b1 = iterator.next()
                let b2 = b1 == nil ? nil : iterator.next()
                let value = UInt32(b0) << 16 | UInt32(b1 ?? 0) << 8 | UInt32(b2 ?? 0)
                out.append(table[Int(value >> 18 & 0x3F)])
                out.append(table[Int(value >> 12 & 0x3F)])
                if b1 != nil { out.append(table[Int(value >> 6 & 0x3F)]) }
                if b2 != nil { out.append(table[Int(value & 0x3F)]) }
            }
        }
    }

    static func encode(_ bytes: some Collection<UInt8>) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(encodedCount(bytes.count))
        encode(bytes, into: &out)
        return out
    }

    /// Strict decoding: no padding, no whitespace, no non-canonical trailing bits.
    static func decode(_ text: some Collection<UInt8>) -> [UInt8]? {
        let count = text.count
        guard count % 4 != 1 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        for byte in text {
            let value = decodeTable[Int(byte)]
            guard value != 0xFF else { return nil }
            accumulator = accumulator << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
                accumulator &= (1 << UInt32(bits)) - 1
            }
        }
        guard accumulator == 0 else { return nil }
        return out
    }
}

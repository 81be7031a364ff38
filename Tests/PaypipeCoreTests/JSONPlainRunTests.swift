import Testing

@testable import PaypipeCore

/// The string scan looks at eight bytes at a time; it must stop exactly where a byte-by-byte
/// scan stops, wherever in the word the byte falls.
@Suite("JSON plain-run scan")
struct JSONPlainRunTests {
    static func naiveEnd(_ bytes: [UInt8], stopAtNonASCII: Bool) -> Int {
        bytes.firstIndex { $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") || $0 < 0x20 || (stopAtNonASCII && $0 >= 0x80) } ?? bytes.count
    }

    @Test(arguments: [0x22, 0x5C, 0x00, 0x01, 0x1F, 0x20, 0x21, 0x5B, 0x5D, 0x7F, 0x80, 0xC3, 0xFF] as [UInt8])
    func stopsWhereAByteByByteScanStops(_ special: UInt8) {
        for length in 0...26 {
            for position in 0..<max(length, 1) {
                var bytes = [UInt8](repeating: UInt8(ascii: "a"), count: length)
                if position < length { bytes[position] = special }
                // A second special byte later must not move the first stop.
                if position + 3 < length { bytes[position + 3] = UInt8(ascii: "\"") }
                for stopAtNonASCII in [true, false] {
                    let scanned = bytes.withUnsafeBufferPointer { JSONPlainRun.end(of: $0, from: 0, stopAtNonASCII: stopAtNonASCII) }
                    #expect(scanned == Self.naiveEnd(bytes, stopAtNonASCII: stopAtNonASCII), "length \(length), byte \(special) at \(position)")
                    let from = min(position, length)
                    let tail = bytes.withUnsafeBufferPointer { JSONPlainRun.end(of: $0, from: from, stopAtNonASCII: stopAtNonASCII) }
                    #expect(tail == from + Self.naiveEnd(Array(bytes[from...]), stopAtNonASCII: stopAtNonASCII))
                }
            }
        }
    }
}

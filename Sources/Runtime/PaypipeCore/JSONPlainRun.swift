/// Finding where a JSON string stops being plain (a quote, a backslash, a control character,
/// or, when asked, a byte outside ASCII) eight bytes at a time: the scan runs over every
/// string byte of every frame the stages parse and write.
enum JSONPlainRun {
    private static let ones: UInt64 = 0x0101_0101_0101_0101
    private static let highs: UInt64 = 0x8080_8080_8080_8080

    /// The index of the first byte in `bytes[start...]` that ends the plain run, or
    /// `bytes.count` if none does.
    static func end(of bytes: UnsafeBufferPointer<UInt8>, from start: Int, stopAtNonASCII: Bool) -> Int {
        guard let base = bytes.baseAddress else { return start }
        let count = bytes.count
        var index = start
        while index + 8 <= count, !needsAttention(UnsafeRawPointer(base + index).loadUnaligned(as: UInt64.self), stopAtNonASCII) {
            index += 8
        }
        while index < count {
            let byte = base[index]
            if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte < 0x20 || (stopAtNonASCII && byte >= 0x80) { return index }
            index += 1
        }
        return count
    }

    /// Whether any of the eight bytes is one `end` stops at. The classic "has a zero byte" and
    /// "has a byte below n" tests (exact as booleans; they may mark the wrong byte, which the
    /// byte-by-byte tail sorts out).
    private static func needsAttention(_ word: UInt64, _ stopAtNonASCII: Bool) -> Bool {
        let quote = word ^ (ones &* 0x22)
        let backslash = word ^ (ones &* 0x5C)
        let hasQuote = (quote &- ones) & ~quote & highs
        let hasBackslash = (backslash &- ones) & ~backslash & highs
        let hasControl = (word &- ones &* 0x20) & ~word & highs
        let hasNonASCII = stopAtNonASCII ? word & highs : 0
        return hasQuote | hasBackslash | hasControl | hasNonASCII != 0
    }
}

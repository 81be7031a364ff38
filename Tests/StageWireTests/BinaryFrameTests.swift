import PaypipeCore
import TestSupport
import Testing

@testable import StageWire

@Suite("Binary frames")
struct BinaryFrameTests {
    func read(_ field: [UInt8]) throws(EnvelopeError) -> String {
        var writer = BinaryFrameWriter(tag: 0x7F, capacity: 16)
        writer.field(field)
        var reader = try BinaryFrameReader(writer.bytes, tag: 0x7F, label: "t")
        let text = try reader.string("s")
        try reader.end()
        return text
    }

    /// A repairing decoder turns a cut four-byte sequence into one replacement character of
    /// three bytes: the same length, other bytes. Each of these must be refused, not repaired.
    @Test func aStringFieldMustBeValidUTF8() throws {
        let invalid: [[UInt8]] = [[0xFF], [0xF0, 0x9F, 0x98], [0x41, 0xF0, 0x9F, 0x98], [0xED, 0xA0, 0x80], [0xC0, 0xAF], [0xE2, 0x82], [0x80]]
        for bytes in invalid {
            #expect { try read(bytes) } throws: { ($0 as? EnvelopeError)?.description == "t.s is not UTF-8" }
        }
        for text in ["", "A", "é", "😀", "x\u{0}y", "€ and 😀"] {
            #expect(try read(Array(text.utf8)) == text)
        }
    }

    @Test func integersAndCountsRoundTripAtTheirLimits() throws {
        var writer = BinaryFrameWriter(tag: 0x01, capacity: 64)
        for value: Int64 in [0, 1, -1, .max, .min, 0x0102_0304_0506_0708] { writer.integer(value) }
        writer.field { $0.append(contentsOf: [1, 2, 3]) }
        writer.byte(9)
        var reader = try BinaryFrameReader(writer.bytes, tag: 0x01, label: "t")
        for value: Int64 in [0, 1, -1, .max, .min, 0x0102_0304_0506_0708] { #expect(try reader.integer("i") == value) }
        #expect(Array(try reader.field("f")) == [1, 2, 3])
        #expect(try reader.byte("b") == 9)
        try reader.end()
        #expect { try reader.byte("b") } throws: { ($0 as? EnvelopeError)?.description == "t.b is truncated" }
        #expect(throws: EnvelopeError.self) { try BinaryFrameReader(writer.bytes, tag: 0x02, label: "t") }
        #expect(throws: EnvelopeError.self) { try BinaryFrameReader([], tag: 0x01, label: "t") }
    }
}

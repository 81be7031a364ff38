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

@Suite("The trace field of the stages' frames")
struct TraceFieldTests {
    static let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    static let order = try! TestSupport.order(
        #"{"v":1,"orderId":"t-1","provider":"viva","operation":"sale","amount":1050,"currency":"EUR","params":{}}"#)
    static let orderJSON = #"{"v":1,"orderId":"t-1","provider":"viva","operation":"sale","amount":1050,"currency":"EUR","params":{}}"#

    @Test func aDispatchCarriesItsTraceAndOneWithoutIsAsBefore() throws {
        let plain = DispatchFrame.encode(orderJSON: Self.orderJSON, acceptedAt: 7, generation: 2, token: 9)
        #expect(try DispatchFrame.decode(plain, catalog: testCatalog).trace == nil)
        let traced = DispatchFrame.appendingTrace(Self.traceparent, to: plain)
        #expect(Array(traced.prefix(plain.count)) == plain)
        let decoded = try DispatchFrame.decode(traced, catalog: testCatalog)
        #expect(decoded.trace == Self.traceparent && decoded.generation == 2 && decoded.token == 9 && decoded.order.orderId == "t-1")
        // What reads a frame's head without its order still reads it.
        #expect(DispatchFrame.header(of: traced)?.generation == 2)
        #expect(DispatchFrame.orderJSON(in: traced).map { Array($0) } == Array(Self.orderJSON.utf8))
    }

    @Test func workAndResultsCarryTheirTrace() throws {
        var work = SubmitWork(
            order: Self.order, request: HTTPRequestSpec(method: .POST, url: "http://127.0.0.1:9/x", headers: [], body: [1, 2]), acceptedAt: 7,
            generation: 3, token: 11)
        let plain = work.frame
        #expect(try SubmitWork.decode(plain, catalog: testCatalog).trace == nil)
        work.trace = Self.traceparent
        #expect(work.frame.count == plain.count + 4 + Self.traceparent.utf8.count)
        #expect(try SubmitWork.decode(work.frame, catalog: testCatalog) == work)

        let outcome = Outcome(orderId: "t-1", merchant: "default", provider: "viva", operation: "sale", status: .pending, attempts: 1)
        var result = StageResult(answering: .submit, ticket: DispatchTicket(generation: 3, token: 11), outcome: outcome)
        #expect(StageResult.decode(result.frame)?.trace == nil)
        result.trace = Self.traceparent
        let decoded = try #require(StageResult.decode(result.frame))
        #expect(decoded.trace == Self.traceparent && decoded.ticket.generation == 3 && decoded.answering == .submit)
    }

    /// A trace field is short printable text; anything else there, or past it, is a frame this
    /// reader does not know, refused like any other.
    @Test func aTraceThatIsNotATraceparentIsRefused() throws {
        let plain = DispatchFrame.encode(orderJSON: Self.orderJSON, acceptedAt: 7)
        for bad in ["00-\u{1}-x", String(repeating: "a", count: 513)] {
            #expect { try DispatchFrame.decode(DispatchFrame.appendingTrace(bad, to: plain), catalog: testCatalog) } throws: {
                ($0 as? EnvelopeError)?.description == "dispatch.trace is not a traceparent"
            }
        }
        let trailing = DispatchFrame.appendingTrace(Self.traceparent, to: plain) + [0]
        #expect(throws: EnvelopeError.self) { try DispatchFrame.decode(trailing, catalog: testCatalog) }
        let cut = Array(DispatchFrame.appendingTrace(Self.traceparent, to: plain).dropLast(3))
        #expect { try DispatchFrame.decode(cut, catalog: testCatalog) } throws: {
            ($0 as? EnvelopeError)?.description == "dispatch.trace is truncated"
        }
        let result = StageResult(
            answering: .submit, ticket: DispatchTicket(generation: 1, token: 1),
            outcome: Outcome(orderId: "t-1", merchant: "default", provider: "viva", operation: "sale", status: .pending, attempts: 1),
            trace: "\u{7F}")
        #expect(StageResult.decode(result.frame) == nil)
    }
}

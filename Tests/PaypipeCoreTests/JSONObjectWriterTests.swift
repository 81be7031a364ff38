import Testing

@testable import PaypipeCore

/// The hot frames are written member by member; their bytes must stay exactly what the
/// `JSONValue` form writes (sorted keys), since equal outcomes must be equal bytes.
@Suite("JSON object writer")
struct JSONObjectWriterTests {
    static let outcomes: [Outcome] = [
        Outcome(
            orderId: "o-1", merchant: "default", provider: "phonepe", operation: "authInit", status: .pending,
            result: ["redirectURL": "ppe://mandate?x=1", "nested": ["b": 1, "a": [true, .null, .fraction(1.5)]]], attempts: 1,
            at: "2026-11-24T08:00:00.000Z"),
        Outcome(
            orderId: "o-2", merchant: "shop \"2\"", provider: "viva", operation: "sale", status: .rejected,
            error: .init(code: "INVALID_PARAM", message: "line\nbreak, tab\t, quote \" and \u{01} and é"), attempts: 0,
            at: "2026-11-24T08:00:00.001Z"),
        Outcome(
            orderId: "o-3", merchant: "default", provider: "nets", operation: "createSubscription", status: .unknown,
            result: [:], error: .init(code: "OUTCOME_UNKNOWN", message: ""), attempts: 3, at: "2026-11-24T08:00:00.002Z"),
        Outcome(
            orderId: "o-4", merchant: "default", provider: "cleeng", operation: "appleReceipt", status: .succeeded,
            attempts: -1, at: ""),
    ]

    @Test(arguments: outcomes)
    func anOutcomeIsWrittenAsItsJSONValueWouldBe(_ outcome: Outcome) throws {
        #expect(outcome.bytes == outcome.json.bytes)
        #expect(outcome.serialized == outcome.json.serialized)
        #expect(try Outcome.parse(outcome.bytes) == outcome)
    }

    static let orders: [Order] = [
        Order(
            orderId: "ord-1", merchant: "default", operation: .init(.init("phonepe"), "authInit"), amount: 39900, currency: "INR",
            params: ["merchantUserId": "U1", "subscriptionId": "S\u{00e9}\"1", "deep": ["z": [1, 2], "a": .null]]),
        Order(orderId: "ord-2", merchant: "m", operation: .init(.init("nets"), "getSubscription"), amount: nil, currency: nil, params: [:]),
        Order(orderId: "ord-3", merchant: "m", operation: .init(.init("viva"), "sale"), amount: -5, currency: nil, params: ["k": 0]),
    ]

    @Test(arguments: orders)
    func anOrderIsWrittenAsItsJSONValueWouldBe(_ order: Order) {
        #expect(order.serialized == order.json.serialized)
    }

    @Test func nestedAndRawMembersGoIntoTheSameBuffer() {
        var writer = JSONObjectWriter(capacity: 0)
        writer.integer("a", -12)
        writer.object("b") { nested in
            nested.string("c", "x\"y")
            nested.object("d") { _ in }
        }
        writer.raw("e") { $0.append(contentsOf: "[1,2]".utf8) }
        writer.value("f", ["z": 1, "y": .null])
        #expect(String(decoding: writer.finish(), as: UTF8.self) == #"{"a":-12,"b":{"c":"x\"y","d":{}},"e":[1,2],"f":{"y":null,"z":1}}"#)
        var empty = JSONObjectWriter()
        #expect(empty.finish() == Array("{}".utf8))
    }
}

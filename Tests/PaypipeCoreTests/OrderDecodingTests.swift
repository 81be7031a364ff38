import Connectors
import Foundation
import PaypipeCore
import Testing

func decode(_ json: String) -> OrderDecoding { Order.decode(json: json, catalog: testCatalog) }

func rejection(_ json: String) -> Rejection? {
    if case .rejected(let rejection, _) = decode(json) { return rejection }
    return nil
}

let validSale =
    #"{"v":1,"orderId":"ord-000123","merchant":"default","provider":"viva","operation":"sale","amount":1050,"currency":"GBP","params":{}}"#

/// An order with one top-level field replaced (or removed when `value` is nil).
func order(with key: String, _ value: String?) -> String {
    var fields: [(String, String)] = [
        ("v", "1"), ("orderId", #""ord-1""#), ("merchant", #""default""#), ("provider", #""viva""#),
        ("operation", #""sale""#), ("amount", "1050"), ("currency", #""GBP""#), ("params", "{}"),
    ]
    if let index = fields.firstIndex(where: { $0.0 == key }) {
        if let value { fields[index].1 = value } else { fields.remove(at: index) }
    } else if let value {
        fields.append((key, value))
    }
    return "{" + fields.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}"
}

@Suite("Order decoding")
struct OrderDecodingTests {
    @Test func aValidOrderDecodes() throws {
        guard case .order(let order) = decode(validSale) else {
            Issue.record("expected an order")
            return
        }
        #expect(order.orderId == "ord-000123")
        #expect(order.merchant == "default")
        #expect(order.provider == .viva)
        #expect(order.operation == .sale)
        #expect(order.amount == 1050)
        #expect(order.currency == "GBP")
        #expect(order.key == OrderKey(merchant: "default", orderId: "ord-000123"))
    }

    @Test func merchantDefaultsToDefault() {
        guard case .order(let order) = decode(order(with: "merchant", nil)) else {
            Issue.record("expected an order")
            return
        }
        #expect(order.merchant == "default")
    }

    @Test func roundTripThroughJSON() throws {
        let original = Order(
            orderId: "a.b:c_d-1", merchant: "m2", operation: .authInit, amount: 39900, currency: "INR",
            params: ["merchantUserId": "u1", "subscriptionId": "s1", "nested": ["x": [1, 2, "three", true, nil]]])
        let text = original.json.serialized
        #expect(decode(text) == .order(original))
    }

    @Test(arguments: [
        (order(with: "v", "2"), "UNSUPPORTED_VERSION", "v"),
        (order(with: "v", #""1""#), "UNSUPPORTED_VERSION", "v"),
        (order(with: "v", nil), "MISSING_FIELD", "v"),
        (order(with: "orderId", nil), "MISSING_FIELD", "orderId"),
        (order(with: "orderId", "12"), "INVALID_TYPE", "orderId"),
        (order(with: "orderId", #""""#), "INVALID_ORDER_ID", "orderId"),
        (order(with: "orderId", #""has space""#), "INVALID_ORDER_ID", "orderId"),
        (order(with: "orderId", #""semi;colon""#), "INVALID_ORDER_ID", "orderId"),
        (order(with: "orderId", "\"" + String(repeating: "a", count: 65) + "\""), "INVALID_ORDER_ID", "orderId"),
        (order(with: "orderId", #""ünïcode""#), "INVALID_ORDER_ID", "orderId"),
        (order(with: "merchant", "7"), "INVALID_TYPE", "merchant"),
        (order(with: "merchant", #""""#), "INVALID_MERCHANT", "merchant"),
        (order(with: "provider", #""paypal""#), "UNKNOWN_PROVIDER", "provider"),
        (order(with: "provider", nil), "MISSING_FIELD", "provider"),
        (order(with: "operation", #""capture""#), "UNKNOWN_OPERATION", "operation"),
        (order(with: "operation", #""authInit""#), "UNKNOWN_OPERATION", "operation"),
        (order(with: "operation", nil), "MISSING_FIELD", "operation"),
        (order(with: "amount", "10.5"), "AMOUNT_NOT_INTEGER", "amount"),
        (order(with: "amount", "1050.0"), "AMOUNT_NOT_INTEGER", "amount"),
        (order(with: "amount", "1e3"), "AMOUNT_NOT_INTEGER", "amount"),
        (order(with: "amount", #""1050""#), "AMOUNT_NOT_INTEGER", "amount"),
        (order(with: "amount", "0"), "AMOUNT_NOT_POSITIVE", "amount"),
        (order(with: "amount", "-5"), "AMOUNT_NOT_POSITIVE", "amount"),
        (order(with: "amount", nil), "MISSING_FIELD", "amount"),
        (order(with: "currency", #""gbp""#), "INVALID_CURRENCY", "currency"),
        (order(with: "currency", #""GBPX""#), "INVALID_CURRENCY", "currency"),
        (order(with: "currency", "826"), "INVALID_CURRENCY", "currency"),
        (order(with: "currency", nil), "MISSING_FIELD", "currency"),
        (order(with: "params", nil), "MISSING_FIELD", "params"),
        (order(with: "params", "[]"), "INVALID_TYPE", "params"),
        (order(with: "ammount", "5"), "UNKNOWN_FIELD", "ammount"),
    ])
    func everyRuleRejectsWithItsCodeAndNamesTheField(json: String, code: String, field: String) throws {
        let rejected = try #require(rejection(json))
        #expect(rejected.code.rawValue == code)
        #expect(rejected.field == field)
        #expect(rejected.message.contains(field))
    }

    /// Several unknown fields name the first in sorted order, whatever order they came in, and
    /// before any other rule is checked.
    @Test func theFirstUnknownFieldInSortedOrderIsNamed() throws {
        for json in [#"{"zeta":1,"v":2,"beta":1,"alpha":1}"#, #"{"alpha":1,"zeta":1,"beta":1}"#] {
            let rejected = try #require(rejection(json))
            #expect(rejected.code == .unknownField && rejected.field == "alpha")
        }
    }

    /// A valid order is read without building its top-level object (`forEachMember`); anything
    /// that path does not take whole goes through the full parse. Either way the result must be
    /// what validating the parsed object gives.
    @Test func everyOrderDecodesAsItsParsedObjectValidates() throws {
        let frames = [
            validSale,
            #"  { "params" : { "b" : [1, {"c": null}] , "a" : "\u00e9" } , "currency":"GBP","amount":1050,"operation":"sale","provider":"viva","orderId":"o-2","v":1 }  "#,
            #"{"v":1,"orderId":"o-3","merchant":"m\u00e9","provider":"viva","operation":"sale","amount":1,"currency":"EUR","params":{"caf\u00e9":"\ud83d\ude00"}}"#,
            // An escape that spells a field: the full parse reads it as that field.
            #"{"\u0076":1,"orderId":"o-4","provider":"viva","operation":"sale","amount":1,"currency":"EUR","params":{}}"#,
            #"{"v":1,"orderId":"o-5","provider":"viva","operation":"sale","amount":1,"currency":"EUR","params":{},"extra":true}"#,
            #"{"v":1,"orderId":"o-6","provider":"viva","operation":"sale","amount":1,"currency":"EUR","params":{}} x"#,
            #"{"v":1,"orderId":"o-7","provider":"viva","operation":"sale","amount":1,"currency":"EUR","params":{},}"#,
            #"{"v":1,"orderId":"o-8","provider":"viva","operation":"sale","amount":"1","currency":"EUR","params":{}}"#,
            #"{"v":1,"orderId":"o-9","provider":"viva","operation":"sale","amount":1,"currency":"EUR","params":{},"v":1}"#,
            #"{"v":1,"orderId":"o-10","provider":"viva","operation":"sale","amount":1,"currency":"EUR","params":{},"\u0076":1}"#,
            #"[{"v":1}]"#, "{}", "",
        ]
        for frame in frames {
            let decoded = decode(frame)
            guard case .object(let object)? = try? JSONValue.parse(frame) else {
                guard case .dropped = decoded else {
                    Issue.record("\(frame) was not dropped")
                    continue
                }
                continue
            }
            do {
                #expect(decoded == .order(try Order(validating: object, catalog: testCatalog)), "\(frame)")
            } catch {
                guard case .rejected(let rejection, _) = decoded else {
                    Issue.record("\(frame) was not rejected")
                    continue
                }
                #expect(rejection == error, "\(frame)")
            }
        }
        // Orders taken whole by the direct reading, each the order the full parse gives.
        #expect(
            decode(frames[1])
                == .order(
                    Order(
                        orderId: "o-2", operation: Operation(Provider("viva"), "sale"), amount: 1050, currency: "GBP",
                        params: ["b": [1, ["c": .null]], "a": "\u{E9}"])))
        #expect(decode(frames[3]) == .order(Order(orderId: "o-4", operation: Operation(Provider("viva"), "sale"), amount: 1, currency: "EUR")))
        // A repeated field is refused, spelled the same or escaped.
        for frame in frames[8...9] {
            guard case .dropped(let rejection) = decode(frame) else {
                Issue.record("\(frame) was not dropped")
                continue
            }
            #expect(rejection.message.contains("duplicate key \"v\""))
        }
    }

    @Test func amountIsOptionalWhereNoMoneyMovesButStillValidated() {
        let query = #"{"v":1,"orderId":"q1","provider":"trustpayments","operation":"transactionQuery","params":{"transactionReference":"1-2-3"}}"#
        guard case .order(let order) = decode(query) else {
            Issue.record("expected an order")
            return
        }
        #expect(order.amount == nil)
        let badAmount = #"{"v":1,"orderId":"q1","provider":"trustpayments","operation":"transactionQuery","amount":-1,"params":{}}"#
        #expect(rejection(badAmount)?.code == .amountNotPositive)
    }

    @Test func phonePePennyDropNeedsNoAmountButTransactionDoes() {
        let pennyDrop = #"{"v":1,"orderId":"p1","provider":"phonepe","operation":"authInit","params":{"authWorkflowType":"PENNY_DROP"}}"#
        guard case .order = decode(pennyDrop) else {
            Issue.record("PENNY_DROP without amount should decode")
            return
        }
        let transaction = #"{"v":1,"orderId":"p1","provider":"phonepe","operation":"authInit","params":{}}"#
        #expect(rejection(transaction)?.field == "amount")
    }

    @Test func rejectedOutcomesCarryTheIdentityThatCouldBeRead() {
        guard case .rejected(_, let identity) = decode(order(with: "amount", "0")) else {
            Issue.record("expected a rejection")
            return
        }
        #expect(identity == OrderIdentity(orderId: "ord-1", merchant: "default", provider: "viva", operation: "sale"))
        let outcome = Outcome.rejected(Rejection(.amountNotPositive, field: "amount", "amount must be greater than 0"), identity: identity)
        #expect(outcome.status == .rejected)
        #expect(outcome.error?.code == "AMOUNT_NOT_POSITIVE")
    }

    /// A frame over the order limit that names its order is refused with an outcome, so upstream
    /// learns why; one that names none is dropped. Its nested values are read without being
    /// built: a padded order of arrays costs no more than its bytes.
    @Test func anOversizedFrameNamingItsOrderIsRejected() {
        let padding = "[" + Array(repeating: "[1]", count: Order.maxFrameBytes / 3).joined(separator: ",") + "]"
        let named = order(with: "params", #"{"pad":"# + padding + "}")
        let expected = Rejection(.frameTooLarge, field: "frame", "frame of \(named.utf8.count) bytes exceeds the 65536-byte limit")
        #expect(
            decode(named) == .rejected(expected, identity: OrderIdentity(orderId: "ord-1", merchant: "default", provider: "viva", operation: "sale")))
        let otherMerchant = decode(order(with: "merchant", #""shop-2""#).replacingFirst(#""params":{}"#, with: #""params":{"pad":"# + padding + "}"))
        guard case .rejected(let rejection, let identity) = otherMerchant else {
            Issue.record("expected a rejection, got \(otherMerchant)")
            return
        }
        #expect(rejection.code == .frameTooLarge && identity.merchant == "shop-2" && identity.orderId == "ord-1")
        for unnamed in [
            order(with: "orderId", nil).replacingFirst(#""params":{}"#, with: #""params":{"pad":"# + padding + "}"),
            order(with: "orderId", "7").replacingFirst(#""params":{}"#, with: #""params":{"pad":"# + padding + "}"),
            String(named.dropLast()),
        ] {
            guard case .dropped(let dropped) = decode(unnamed) else {
                Issue.record("a frame that names no order must be dropped")
                continue
            }
            #expect(dropped.code == .frameTooLarge)
        }
    }

    @Test func framesThatAreNotJSONObjectsAreDroppedWithTheirReason() {
        let tooLarge = "{\"pad\":\"" + String(repeating: "x", count: Order.maxFrameBytes) + "\"}"
        #expect(
            Order.decode(json: tooLarge, catalog: testCatalog)
                == .dropped(Rejection(.frameTooLarge, field: "frame", "frame of \(tooLarge.utf8.count) bytes exceeds the 65536-byte limit")))
        if case .dropped(let r) = Order.decode(frame: [0x7B, 0x22, 0xFF, 0xFE, 0x22, 0x3A, 0x31, 0x7D], catalog: testCatalog) {
            #expect(r.code == .invalidUTF8)
        } else {
            Issue.record("invalid UTF-8 must be dropped")
        }
        for bad in ["{", "not json", "{\"a\":1,}", "{\"a\":1,\"a\":2}", "[1,2]", "\"str\"", "", "{\"a\":01}"] {
            guard case .dropped(let r) = Order.decode(json: bad, catalog: testCatalog) else {
                Issue.record("\(bad) must be dropped")
                continue
            }
            #expect([Rejection.Code.malformedJSON, .notAnObject].contains(r.code), "\(bad)")
        }
        let overlong: [UInt8] = Array(#"{"a":""#.utf8) + [0xC0, 0xAF] + Array(#""}"#.utf8)
        if case .dropped(let r) = Order.decode(frame: overlong, catalog: testCatalog) {
            #expect(r.code == .invalidUTF8)
        } else {
            Issue.record("overlong UTF-8")
        }
    }

    @Test func hostileIdentityFieldsAreTruncatedInOutcomes() {
        let long = String(repeating: "z", count: 10_000)
        guard case .rejected(_, let identity) = decode(order(with: "orderId", "\"\(long)\"")) else {
            Issue.record("expected a rejection")
            return
        }
        #expect(identity.orderId.count == 128)
    }
}

@Suite("Outcome encoding")
struct OutcomeTests {
    @Test func roundTripAndStableBytes() throws {
        let outcome = Outcome(
            orderId: "ord-1", merchant: "default", provider: "phonepe", operation: "authInit", status: .failed,
            result: ["redirectURL": "ppe://mandate?x=1&y=\"2\""],
            error: .init(code: "AMOUNT_MISMATCH", message: "callback amount 100 != order amount 39900"), attempts: 2,
            at: "2026-11-21T05:00:00.123Z")
        let text = outcome.serialized
        #expect(text == outcome.serialized)
        #expect(text.hasPrefix(#"{"at":"2026-11-21T05:00:00.123Z","attempts":2,"error":{"code":"AMOUNT_MISMATCH""#))
        #expect(try Outcome.parse(Array(text.utf8)) == outcome)
        #expect(Outcome.Status.allCases.filter(\.isTerminal) == [.succeeded, .failed, .rejected])
    }

    /// Every field an outcome needs is checked and named when missing or of the wrong kind;
    /// members it does not know (the ledger's `seq`) are passed over.
    @Test func parsingNamesTheFieldThatIsMissingOrInvalid() throws {
        let valid =
            #"{"at":"2026-11-21T05:00:00.123Z","attempts":1,"merchant":"default","operation":"sale","orderId":"o-1","provider":"viva","seq":7,"status":"pending","v":1}"#
        let parsed = try Outcome.parse(Array(valid.utf8))
        #expect(parsed.orderId == "o-1" && parsed.status == .pending && parsed.result == nil && parsed.error == nil)
        func field(_ replacing: String, _ with: String) -> String? {
            do {
                _ = try Outcome.parse(Array(valid.replacingOccurrences(of: replacing, with: with).utf8))
                return nil
            } catch let error as OutcomeParseError {
                return error.field
            } catch {
                return "not an OutcomeParseError: \(error)"
            }
        }
        #expect(field(#","v":1"#, "") == "v")
        #expect(field(#""v":1"#, #""v":2"#) == "v")
        #expect(field(#""status":"pending""#, #""status":"done""#) == "status")
        #expect(field(#""attempts":1"#, #""attempts":"1""#) == "attempts")
        #expect(field(#""at":"#, #""error":{"code":"X"},"at":"#) == "error")
        #expect(field(#""at":"#, #""result":[1],"at":"#) == "result")
        #expect(field(#""orderId":"o-1","#, "") == "orderId")
        #expect(field(#""merchant":"default""#, #""merchant":7"#) == "merchant")
        #expect(field(#""provider":"viva","#, "") == "provider")
        #expect(field(#""operation":"sale""#, #""operation":null"#) == "operation")
        #expect(field(#""at":"2026-11-21T05:00:00.123Z","#, "") == "at")
        #expect(throws: OutcomeParseError.self) { try Outcome.parse(Array("[]".utf8)) }
        // Read member by member or, where that does not take the whole document, in full: the
        // same outcome either way, and a repeated member is refused either way.
        for (replacing, with) in [(#""v":1"#, #""\u0076":1"#), (#""seq":7"#, #""s\u00e9q":7"#), (#""seq":7"#, #""later":[{"a":1}]"#)] {
            #expect(try Outcome.parse(Array(valid.replacingOccurrences(of: replacing, with: with).utf8)) == parsed)
        }
        for (replacing, with) in [
            (#""v":1"#, #""v":1,"v":1"#), (#""v":1"#, #""v":1,"\u0076":1"#), (#""seq":7"#, #""seq":7,"seq":8"#),
            (#""seq":7"#, #""x":1,"x":2"#),
        ] {
            #expect(throws: JSONParseError.self) { try Outcome.parse(Array(valid.replacingOccurrences(of: replacing, with: with).utf8)) }
        }
    }

    @Test func timestampsAreRFC3339UTCWithMilliseconds() {
        #expect(Timestamp.iso8601(milliseconds: 0) == "1970-01-01T00:00:00.000Z")
        #expect(Timestamp.iso8601(milliseconds: 1_795_237_200_123) == "2026-11-21T05:00:00.123Z")
        #expect(Timestamp.iso8601(milliseconds: 951_782_400_000) == "2000-02-29T00:00:00.000Z")
        #expect(Timestamp.now().count == 24)
        // Every day of four centuries, at the last millisecond of the day and the first, against
        // Foundation's formatter.
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        formatter.timeZone = TimeZone(identifier: "UTC")
        for day in stride(from: Int64(-3_000), through: 146_097 - 3_000, by: 7) {
            for milliseconds in [day * 86_400_000, day * 86_400_000 + 86_399_999, day * 86_400_000 + 45_296_007] {
                let expected = formatter.string(from: Date(timeIntervalSince1970: Double(milliseconds) / 1000))
                #expect(Timestamp.iso8601(milliseconds: milliseconds) == expected)
            }
        }
    }
}

@Suite("JSON parsing")
struct JSONValueTests {
    @Test func parsesEveryKindAndKeepsIntegersApartFromFractions() throws {
        let value = try JSONValue.parse(#" {"i": -42, "f": 1.5, "e": 2E2, "s": "a\"b\\c\u00e9\ud83d\ude00\n", "t": true, "n": null, "a": [ ]} "#)
        #expect(value["i"] == .integer(-42))
        #expect(value["f"] == .fraction(1.5))
        #expect(value["e"] == .fraction(200))
        #expect(value["s"] == .string("a\"b\\cé😀\n"))
        #expect(value["t"] == .bool(true))
        #expect(value["n"] == .null)
        #expect(value["a"] == .array([]))
        #expect(try JSONValue.parse(value.serialized) == value)
    }

    @Test func rejectsDeepNestingInsteadOfOverflowingTheStack() {
        let deep = String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)
        #expect(throws: JSONParseError.self) { try JSONValue.parse(deep) }
    }

    @Test func controlCharactersAreEscapedOnOutput() {
        #expect(JSONValue.string("a\u{01}b").serialized == #""a\u0001b""#)
    }
}

/// The providers and operations of the contract, as the standard connectors declare them.
let testCatalog = OrderCatalog(StandardConnectors.all.flatMap { $0.operations })

import PaypipeCore
import Testing

@Suite struct ParamReaderTests {
    static let allowed = ["reference", "count", "flag", "nested", "list", "url"]

    func reader(_ params: [String: JSONValue]) throws(Rejection) -> ParamReader {
        try ParamReader(params, allowed: Self.allowed, operation: "demo op")
    }

    func rejection(_ body: () throws -> Void) -> Rejection? {
        do { try body() } catch let error as Rejection { return error } catch { Issue.record("unexpected \(error)") }
        return nil
    }

    @Test func unknownKeysAreNamedWithWhatIsAllowed() {
        let error = rejection { _ = try reader(["reference": "r", "refrence": "r", "zzz": 1]) }
        #expect(error?.code == .unknownField)
        #expect(error?.field == "params.refrence")
        #expect(error?.message == "params.refrence is not a parameter of demo op (allowed: count, flag, list, nested, reference, url)")
    }

    @Test func unknownNestedKeysAreNamedWithTheirPath() {
        let error = rejection { _ = try reader(["nested": ["a": 1, "b": 2]]).object("nested", allowed: ["a"]) }
        #expect(error?.code == .unknownField)
        #expect(error?.field == "params.nested.b")
        #expect(error?.message == "params.nested.b is not a field of params.nested (allowed: a)")
    }

    @Test func unknownKeysAreQuotedSafely() {
        let error = rejection { _ = try reader(["bad\nkey\u{1F600}" + String(repeating: "x", count: 100): 1]) }
        #expect(error?.field.hasPrefix("params.bad?key?xxx") == true)
        #expect(error?.field.hasSuffix("…") == true)
        #expect(error?.message.contains("\n") == false)
    }

    @Test func missingRequiredParamsAreMissingParam() {
        let error = rejection { _ = try reader([:]).string("reference") }
        #expect(error == Rejection(.missingParam, field: "params.reference", "params.reference is required"))
        #expect(rejection { _ = try reader([:]).integer("count") }?.code == .missingParam)
        #expect(rejection { _ = try reader([:]).array("list", count: 1...3) }?.code == .missingParam)
        #expect(rejection { _ = try reader([:]).object("nested", allowed: []) }?.code == .missingParam)
        #expect(rejection { _ = try reader(["nested": [:]]).object("nested", allowed: ["a"]).string("a") }?.field == "params.nested.a")
    }

    @Test func absentOptionalParamsAreNil() throws {
        let params = try reader([:])
        #expect(try params.optionalString("reference") == nil)
        #expect(try params.optionalString("reference", length: 1...5, charset: .identifier) == nil)
        #expect(try params.optionalInteger("count") == nil)
        #expect(try params.optionalBool("flag") == nil)
        #expect(try params.optionalArray("list", count: 1...2) == nil)
        #expect(try params.optionalObject("nested", allowed: []) == nil)
        #expect(!params.contains("reference"))
    }

    @Test func nullIsAWrongTypeForRequiredAndOptionalParams() throws {
        let params = try reader(["reference": nil, "count": nil, "flag": nil, "nested": nil, "list": nil])
        #expect(params.contains("reference"))
        let expected = Rejection(.invalidParam, field: "params.reference", "params.reference must be a string, got null")
        #expect(rejection { _ = try params.string("reference") } == expected)
        #expect(rejection { _ = try params.optionalString("reference") } == expected)
        #expect(rejection { _ = try params.optionalString("reference", length: 1...5) } == expected)
        #expect(rejection { _ = try params.optionalInteger("count") }?.message == "params.count must be an integer, got null")
        #expect(rejection { _ = try params.optionalBool("flag") }?.message == "params.flag must be a boolean, got null")
        #expect(rejection { _ = try params.optionalObject("nested", allowed: []) }?.message == "params.nested must be an object, got null")
        #expect(rejection { _ = try params.optionalArray("list", count: 0...1) }?.message == "params.list must be an array, got null")
        #expect(try params.value("reference") == .null)
    }

    @Test func wrongTypesNameTheExpectedAndTheReceivedType() throws {
        let params = try reader(["reference": 5, "count": .fraction(1.0), "flag": "true", "nested": [1], "list": ["a": 1]])
        #expect(rejection { _ = try params.string("reference") }?.message == "params.reference must be a string, got an integer")
        #expect(rejection { _ = try params.integer("count") }?.message == "params.count must be an integer, got a fractional number")
        #expect(rejection { _ = try params.optionalBool("flag") }?.message == "params.flag must be a boolean, got a string")
        #expect(rejection { _ = try params.object("nested", allowed: []) }?.message == "params.nested must be an object, got an array")
        #expect(rejection { _ = try params.array("list", count: 0...1) }?.message == "params.list must be an array, got an object")
        #expect(rejection { _ = try params.integer("count") }?.code == .invalidParam)
    }

    @Test func lengthsCountUnicodeScalars() throws {
        // Three scalars each: six UTF-8 bytes, three Characters.
        #expect(try reader(["reference": "\u{E9}\u{E9}\u{E9}"]).string("reference", length: 1...3) == "\u{E9}\u{E9}\u{E9}")
        // One Character (a flag) made of two scalars, eight bytes.
        #expect(try reader(["reference": "\u{1F1EC}\u{1F1E7}"]).string("reference", length: 2...2) == "\u{1F1EC}\u{1F1E7}")
        #expect(rejection { _ = try reader(["reference": "\u{1F1EC}\u{1F1E7}"]).string("reference", length: 1...1) } != nil)
        // "e" + combining acute: one Character, two scalars.
        #expect(rejection { _ = try reader(["reference": "e\u{301}"]).string("reference", length: 1...1) } != nil)
        let tooLong = rejection { _ = try reader(["reference": .string(String(repeating: "r", count: 129))]).string("reference", length: 1...128) }
        #expect(tooLong == Rejection(.invalidParam, field: "params.reference", "params.reference must be 1-128 characters"))
        #expect(
            rejection { _ = try reader(["reference": ""]).string("reference", length: 1...128) }?.message
                == "params.reference must be 1-128 characters")
        #expect(
            rejection { _ = try reader(["reference": ""]).string("reference", length: 2...Int.max) }?.message
                == "params.reference must be at least 2 characters")
        #expect(try reader(["reference": ""]).string("reference") == "")
    }

    @Test func charsetsStateTheWholeRule() throws {
        #expect(try reader(["reference": "Ab_9-z"]).string("reference", length: 1...64, charset: .identifier) == "Ab_9-z")
        for bad in ["a/b", "a b", "ü", "a.b"] {
            #expect(
                rejection { _ = try reader(["reference": .string(bad)]).string("reference", length: 1...64, charset: .identifier) }?.message
                    == "params.reference must be 1-64 characters of [A-Za-z0-9_-]")
        }
        for control in ["a\nb", "a\u{7F}", "a\u{85}b", "\u{0}"] {
            #expect(
                rejection { _ = try reader(["reference": .string(control)]).string("reference", length: 1...9, charset: .noControlCharacters) }?
                    .message
                    == "params.reference must be 1-9 characters without control characters")
        }
        #expect(try reader(["reference": "Café 😀"]).string("reference", length: 1...9, charset: .noControlCharacters) == "Café 😀")
        let offer = ParamReader.Charset.asciiAlphanumeric(plus: "._:-")
        #expect(offer.phrase == "of letters, digits and . _ : -")
        #expect(try reader(["reference": "E1_US:x.y-z"]).string("reference", length: 1...64, charset: offer) == "E1_US:x.y-z")
        #expect(rejection { _ = try reader(["reference": "E1/US"]).string("reference", length: 1...64, charset: offer) } != nil)
    }

    @Test func integerRanges() throws {
        let params = try reader(["count": -1])
        #expect(rejection { _ = try params.integer("count", in: 0...10) }?.message == "params.count must be between 0 and 10, got -1")
        #expect(rejection { _ = try params.integer("count", in: 0...Int64.max) }?.message == "params.count must be at least 0, got -1")
        #expect(try params.integer("count") == -1)
        #expect(try params.optionalInteger("count", in: -1...(-1)) == -1)
    }

    @Test func arraysAndTheirElements() throws {
        let params = try reader(["list": [["a": 1], 2]])
        #expect(rejection { _ = try params.array("list", count: 3...5) }?.message == "params.list must hold 3-5 items")
        let elements = try params.array("list", count: 1...2)
        let first = try ParamReader(element: elements[0], at: params.field("list[0]"), allowed: ["a"])
        #expect(try first.integer("a") == 1)
        #expect(rejection { _ = try first.string("a") }?.field == "params.list[0].a")
        let second = rejection { _ = try ParamReader(element: elements[1], at: params.field("list[1]"), allowed: ["a"]) }
        #expect(second == Rejection(.invalidParam, field: "params.list[1]", "params.list[1] must be an object, got an integer"))
    }

    @Test func providerRulesReadTheSameWay() throws {
        let params = try reader(["url": "ftp://x"])
        #expect(
            params.invalid("url", "must be an absolute http(s) URL")
                == Rejection(.invalidParam, field: "params.url", "params.url must be an absolute http(s) URL"))
        #expect(params.missing("url") == Rejection.missingParam("url"))
        #expect(
            params.wrongType("url", expected: "an integer or a string of digits", got: .null).message
                == "params.url must be an integer or a string of digits, got null")
    }
}

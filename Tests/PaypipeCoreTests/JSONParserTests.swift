import PaypipeCore
import Testing

/// The parser sees every intake frame (up to 64 KiB of untrusted bytes) and every callback body, so
/// it must take exactly RFC 8259 JSON, refuse everything else with an error that says where and why,
/// never crash or hang, and bound the nesting. The corpus cases live in JSONTestSuiteFixtures.swift.
@Suite("JSON parser (RFC 8259, JSONTestSuite corpus)")
struct JSONParserTests {
    static let acceptedCases = (JSONTestSuite.mustAccept + JSONTestSuite.implementationDefined).filter {
        if case .accept = $0.verdict { true } else { false }
    }

    // MARK: The corpus

    @Test("y_ cases parse to their value", arguments: JSONTestSuite.mustAccept)
    func validDocument(_ testCase: JSONCase) {
        expectVerdict(testCase)
    }

    @Test("n_ cases are rejected", arguments: JSONTestSuite.mustReject)
    func invalidDocument(_ testCase: JSONCase) {
        expectVerdict(testCase)
    }

    @Test("i_ cases follow the documented choice", arguments: JSONTestSuite.implementationDefined)
    func implementationDefinedDocument(_ testCase: JSONCase) {
        expectVerdict(testCase)
    }

    @Test func theFixturesCoverTheWholeCorpus() {
        let all = JSONTestSuite.mustAccept + JSONTestSuite.mustReject + JSONTestSuite.implementationDefined
        #expect(Set(all.map(\.name)).count == all.count, "a case is listed twice")
        #expect(JSONTestSuite.mustAccept.count == 95 && JSONTestSuite.mustAccept.allSatisfy { $0.name.hasPrefix("y_") })
        #expect(JSONTestSuite.mustReject.count == 188 && JSONTestSuite.mustReject.allSatisfy { $0.name.hasPrefix("n_") })
        #expect(
            JSONTestSuite.implementationDefined.count == 35
                && JSONTestSuite.implementationDefined.allSatisfy { $0.name.hasPrefix("i_") })
        let refusedValidCases = JSONTestSuite.mustAccept.filter { if case .reject = $0.verdict { true } else { false } }
        #expect(refusedValidCases.map(\.name) == ["y_object_duplicated_key", "y_object_duplicated_key_and_value"])
    }

    @Test("parse → serialize → parse gives the same value and the same bytes", arguments: JSONParserTests.acceptedCases)
    func roundTrip(_ testCase: JSONCase) throws {
        let value = try JSONValue.parse(testCase.bytes)
        let text = value.bytes
        let again = try JSONValue.parse(text)
        #expect(again == value)
        #expect(again.bytes == text)
    }

    // MARK: Duplicate keys

    /// Some parsers keep the first of two equal keys and some the last; if the pipeline and a
    /// provider read one body differently, they disagree about e.g. the amount. So: refuse.
    /// A member's key bytes against a field's name: equal only byte for byte and length for length.
    @Test func aKeySpellsANameOnlyByteForByte() {
        func spells(_ key: String, _ name: StaticString) -> Bool {
            Array(key.utf8).withUnsafeBufferPointer { $0.spells(name) }
        }
        #expect(spells("merchant", "merchant") && spells("v", "v") && spells("", ""))
        #expect(!spells("merchanT", "merchant") && !spells("provider", "merchant") && !spells("merchants", "merchant"))
        #expect(!spells("merchan", "merchant") && !spells("", "v") && !spells("v", "") && !spells("café", "cafe\u{301}"))
    }

    @Test func aDuplicateKeyIsRejectedAtItsSecondOccurrence() {
        let error = parseError(#"{"amount":100,"amount":1}"#)
        #expect(error?.kind == .duplicateKey)
        #expect(error?.offset == 14)
        #expect(error?.description == #"duplicate key "amount" at byte 14"#)
    }

    @Test(arguments: [
        #"{"order":{"a":1,"b":2,"a":1}}"#,
        #"[{"a":1},{"b":true,"b":true}]"#,
        #"{"a":1,"\u0061":2}"#,
        // Swift compares strings by canonical equivalence, so "é" precomposed and "e" + combining
        // acute are one key: refused too, which is the safe side (a normalizing reader would merge them).
        #"{"\u00e9":1,"e\u0301":2}"#,
    ])
    func duplicateKeysAreRejectedWhereverAndHoweverSpelled(_ text: String) {
        #expect(parseError(text)?.kind == .duplicateKey)
    }

    @Test(arguments: [#"{"a":1,"A":2}"#, #"{"a":{"a":1}}"#, #"[{"a":1},{"a":1}]"#, #"{"a":1,"a ":2,"":3}"#])
    func equalKeysInDifferentObjectsOrDifferentKeysAreFine(_ text: String) throws {
        _ = try JSONValue.parse(text)
    }

    /// Objects are built once their members are all read, from one list shared by every
    /// object still open: members of a nested object must neither leak into its parent nor
    /// hide the parent's own duplicates.
    @Test func membersOfNestedObjectsStayInTheirOwnObject() throws {
        let value = try JSONValue.parse(#"{"a":{"b":{"c":1},"d":2},"e":{"a":3},"f":[{"a":1,"b":2},{}],"g":{}}"#)
        #expect(value == ["a": ["b": ["c": 1], "d": 2], "e": ["a": 3], "f": [["a": 1, "b": 2], [:]], "g": [:]])
        let error = parseError(#"{"a":{"x":1,"y":{"z":2}},"b":3,"a":4}"#)
        #expect(error?.kind == .duplicateKey)
        #expect(error?.offset == 31)
    }

    @Test func theDuplicateKeyMessageQuotesAtMost64CharactersOfTheKey() {
        let key = String(repeating: "k", count: 10_000)
        let error = parseError(#"{"\#(key)":1,"\#(key)":2}"#)
        #expect(error?.kind == .duplicateKey)
        #expect(error?.reason == "duplicate key \"" + String(repeating: "k", count: 64) + "\"")
    }

    // MARK: Nesting depth

    static func nestedArrays(_ depth: Int) -> String {
        String(repeating: "[", count: depth) + String(repeating: "]", count: depth)
    }

    static func nestedObjects(_ depth: Int) -> String {
        String(repeating: #"{"a":"#, count: depth) + "1" + String(repeating: "}", count: depth)
    }

    @Test func sixtyFourNestedContainersParseAndTheSixtyFifthIsRefused() throws {
        _ = try JSONValue.parse(Self.nestedArrays(64))
        _ = try JSONValue.parse(Self.nestedObjects(64))
        let error = parseError(Self.nestedArrays(65))
        #expect(error?.kind == .tooDeep)
        #expect(error?.offset == 64)
        #expect(error?.reason == "nesting deeper than 64")
        #expect(parseError(Self.nestedObjects(65))?.kind == .tooDeep)
        #expect(parseError(String(repeating: #"[{"a":"#, count: 33) + "1")?.kind == .tooDeep)
    }

    @Test func depthCountsNestingNotContainers() throws {
        // Closed containers, empty ones included, give their level back.
        let siblings = "[" + Array(repeating: "[[],{},[{}],{\"a\":[]}]", count: 2_000).joined(separator: ",") + "]"
        _ = try JSONValue.parse(siblings, maxDepth: 4)
        #expect(parseError(siblings, maxDepth: 3)?.kind == .tooDeep)
    }

    @Test func theLimitIsAParameter() throws {
        _ = try JSONValue.parse(Self.nestedArrays(500), maxDepth: 500)
        #expect(parseError(Self.nestedArrays(501), maxDepth: 500)?.kind == .tooDeep)
        #expect(try JSONValue.parse("1", maxDepth: 0) == 1)
        #expect(parseError("[]", maxDepth: 0)?.kind == .tooDeep)
    }

    @Test func aFullFrameOfOpeningBracketsStopsAtTheLimit() {
        for unit in ["[", #"{"":"#, #"[{"":"#] {
            let frame = String(repeating: unit, count: 65_536 / unit.utf8.count)
            let error = parseError(frame)
            #expect(error?.kind == .tooDeep)
            #expect((error?.offset ?? .max) < 65 * unit.utf8.count)
        }
    }

    // MARK: Numbers

    /// `.integer` is what "amount is an integer" rules accept, so only a plain integer literal
    /// within Int64 becomes one; a decimal point or an exponent makes a fraction even when the
    /// value is whole. `-0` is the integer 0 (Int64 has no negative zero); `-0.0` keeps its sign.
    @Test(
        arguments: [
            ("0", .integer(0)), ("-0", .integer(0)), ("1050", 1050), ("-1", -1),
            ("9223372036854775807", .integer(.max)), ("-9223372036854775808", .integer(.min)),
            ("9223372036854775808", .fraction(9.223372036854775808e18)),
            ("-9223372036854775809", .fraction(-9.223372036854775808e18)),
            ("1.0", .fraction(1)), ("1050.00", .fraction(1050)), ("1E2", .fraction(100)), ("1e0", .fraction(1)),
            ("0e0", .fraction(0)), ("-0.0", .fraction(-0.0)), ("0.1", .fraction(0.1)),
            ("1e-400", .fraction(0)), ("5e-324", .fraction(.leastNonzeroMagnitude)),
            ("1.7976931348623157e308", .fraction(.greatestFiniteMagnitude)),
            ("-1.7976931348623157E+308", .fraction(-.greatestFiniteMagnitude)),
        ] as [(String, JSONValue)])
    func numberTyping(_ text: String, _ expected: JSONValue) throws {
        let value = try JSONValue.parse(text)
        #expect(value == expected)
        // Bytes tell -0.0 from 0.0, which == does not.
        #expect(value.bytes == expected.bytes)
        // Serializing keeps the type: a whole fraction is written with ".0" or an exponent.
        #expect(try JSONValue.parse(value.bytes).bytes == value.bytes)
    }

    @Test func wholeFractionsAreNotWrittenAsIntegers() {
        #expect(JSONValue.fraction(1).serialized == "1.0")
        #expect(JSONValue.fraction(1050).serialized == "1050.0")
        #expect(JSONValue.fraction(1e20).serialized == "1e+20")
        #expect(JSONValue.integer(.min).serialized == "-9223372036854775808")
    }

    @Test func stringsAreWrittenWithShortEscapesAndTheirUTF8AsItIs() {
        #expect(JSONValue.string("").serialized == #""""#)
        #expect(JSONValue.string("plain").serialized == #""plain""#)
        // Each byte that needs an escape, alone in its string.
        #expect(JSONValue.string("C:\\dir").serialized == #""C:\\dir""#)
        #expect(JSONValue.string("say \"hi").serialized == #""say \"hi""#)
        #expect(JSONValue.string("tab\there").serialized == #""tab\there""#)
        #expect(JSONValue.string("bell\u{07}").serialized == #""bell\u0007""#)
        #expect(JSONValue.string("a\"b\\c\n\r\t\u{01}\u{1F}/é😀").serialized == #""a\"b\\c\n\r\t\u0001\u001f/é😀""#)
        // Past the 15 bytes a String keeps inline, and an escape only at the end.
        let long = String(repeating: "x", count: 100)
        #expect(JSONValue.string(long + "\"").serialized == "\"" + long + #"\"""#)
        #expect(JSONValue.object(["k\"": .string(long)]).serialized == #"{"k\"":"# + "\"" + long + #""}"#)
    }

    /// Double(text) would turn these into ±infinity, which would parse "fine" and be written
    /// back as null: they are refused, pointing at the number.
    @Test(arguments: [
        ("1E400", 0), ("-1E400", 0), ("1e309", 0), (#"{"amount":1e999}"#, 10),
        (String(repeating: "9", count: 400), 0), ("[0," + "1" + String(repeating: "0", count: 65_000) + "]", 3),
    ])
    func numbersBeyondDoubleAreRejected(_ text: String, _ offset: Int) {
        let error = parseError(text)
        #expect(error?.kind == .syntax)
        #expect(error?.offset == offset)
        #expect(error?.reason == "number out of range (beyond ±1.8e308)")
    }

    // MARK: Text, bytes and errors

    @Test func onlyTheFourJSONWhitespaceBytesSeparateTokens() throws {
        let ws = " \t\n\r"
        let text = ws + "[" + ws + "1" + ws + "," + ws + "{" + ws + #""a""# + ws + ":" + ws + "null" + ws + "}" + ws + "]" + ws
        #expect(try JSONValue.parse(text) == [1, ["a": nil]])
        for other in ["\u{0B}", "\u{0C}", "\u{A0}", "\u{2028}", "\u{FEFF}", "\u{85}"] {
            #expect(parseError("[1" + other + "]") != nil, "\(other.unicodeScalars.first!.value)")
        }
    }

    @Test func invalidUTF8IsReportedAtTheOffendingByte() {
        let error = parseError(Array(#"["ok","#.utf8) + [0x22, 0xC3, 0x28, 0x22, 0x5D])
        #expect(error?.kind == .invalidUTF8)
        #expect(error?.offset == 7)
        #expect(error?.description == "invalid UTF-8 at byte 7")
    }

    @Test func textSlicesAndArraysParseAlike() throws {
        let frame = Array(#"xx{"k":["v",1,2.5,true,null]}"#.utf8)
        let fromSlice = try JSONValue.parse(frame[2...])
        #expect(fromSlice == (try JSONValue.parse(Array(frame[2...]))))
        #expect(fromSlice == (try JSONValue.parse(String(decoding: frame[2...], as: UTF8.self))))
        #expect(fromSlice == ["k": ["v", 1, .fraction(2.5), true, nil]])
    }

    @Test func fullSizeFramesOfTheCostliestShapesParse() throws {
        let escapes = "\"" + String(repeating: #"\u00e9\ud83d\ude00"#, count: 3_600) + "\""
        #expect(try JSONValue.parse(escapes).stringValue?.unicodeScalars.count == 7_200)
        let numbers = "[" + Array(repeating: "-1.5e-7", count: 8_000).joined(separator: ",") + "]"
        #expect(try JSONValue.parse(numbers).arrayValue?.count == 8_000)
        let keys = "{" + (0..<5_000).map { #""k\#($0)":\#($0)"# }.joined(separator: ",") + "}"
        #expect(try JSONValue.parse(keys).objectValue?.count == 5_000)
        let digits = "0." + String(repeating: "1", count: 65_000)
        #expect(try JSONValue.parse(digits) == .fraction(1.0 / 9.0))
    }

    // MARK: Never crash, never hang

    /// Every prefix of every corpus input, and every input with one byte replaced by a byte that
    /// matters to JSON or UTF-8, must give either a value that survives a round trip or an error
    /// pointing inside the input.
    @Test func prefixesAndOneByteChangesOfTheCorpusFailCleanly() {
        let replacements: [UInt8] = [
            0x00, 0x09, 0x22, 0x2C, 0x2D, 0x2E, 0x30, 0x3A, 0x5B, 0x5C, 0x5D, 0x65, 0x75, 0x7B, 0x7D, 0x80, 0xC3, 0xED, 0xF4, 0xFF,
        ]
        let all = JSONTestSuite.mustAccept + JSONTestSuite.mustReject + JSONTestSuite.implementationDefined
        for testCase in all where testCase.bytes.count <= 1_000 {
            let bytes = testCase.bytes
            for end in 0..<bytes.count {
                expectCleanOutcome(Array(bytes[..<end]), testCase.name)
            }
            for index in bytes.indices {
                for replacement in replacements where replacement != bytes[index] {
                    var changed = bytes
                    changed[index] = replacement
                    expectCleanOutcome(changed, testCase.name)
                }
            }
        }
    }

    @Test func randomJSONishInputsFailCleanly() {
        let alphabet = Array(#"{}[]:,"\ u0123456789abcdefAEn.+-trueflsn "#.utf8) + [0x00, 0x0A, 0x80, 0xBF, 0xC3, 0xE2, 0xED, 0xF0, 0xFF]
        var random = SplitMix64(seed: 0x5EED_0F_150)
        for _ in 0..<20_000 {
            let count = Int(random.next() % 48)
            let input = (0..<count).map { _ in alphabet[Int(random.next() % UInt64(alphabet.count))] }
            expectCleanOutcome(input, "random")
        }
    }
}

// MARK: - Helpers

private func expectVerdict(_ testCase: JSONCase, sourceLocation: SourceLocation = #_sourceLocation) {
    switch testCase.verdict {
    case .accept(let expected):
        do {
            let value = try JSONValue.parse(testCase.bytes)
            #expect(value == expected, sourceLocation: sourceLocation)
            // == compares strings by canonical equivalence; the serialized bytes show the exact scalars.
            #expect(value.bytes == expected.bytes, sourceLocation: sourceLocation)
        } catch {
            Issue.record("\(testCase.name) was rejected: \(error)", sourceLocation: sourceLocation)
        }
    case .reject(let kind):
        do {
            let value = try JSONValue.parse(testCase.bytes)
            Issue.record("\(testCase.name) was accepted as \(value.serialized.prefix(80))", sourceLocation: sourceLocation)
        } catch {
            #expect(error.kind == kind, "\(error)", sourceLocation: sourceLocation)
            #expect((0...testCase.bytes.count).contains(error.offset), "\(error)", sourceLocation: sourceLocation)
        }
    }
}

/// Records an issue only on failure: it runs some 100,000 times.
private func expectCleanOutcome(_ bytes: [UInt8], _ origin: String, sourceLocation: SourceLocation = #_sourceLocation) {
    do {
        let value = try JSONValue.parse(bytes)
        if (try? JSONValue.parse(value.bytes)) != value {
            Issue.record("\(origin): \(bytes) does not survive a round trip", sourceLocation: sourceLocation)
        }
    } catch {
        if !(0...bytes.count).contains(error.offset) || error.reason.isEmpty {
            Issue.record("\(origin): \(error) for \(bytes)", sourceLocation: sourceLocation)
        }
    }
}

private func parseError(_ text: String, maxDepth: Int = 64) -> JSONParseError? {
    parseError(Array(text.utf8), maxDepth: maxDepth)
}

private func parseError(_ bytes: [UInt8], maxDepth: Int = 64) -> JSONParseError? {
    do {
        _ = try JSONValue.parse(bytes, maxDepth: maxDepth)
        return nil
    } catch {
        return error
    }
}

/// A small seeded generator, so a failing random input is the same on every run.
private struct SplitMix64 {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

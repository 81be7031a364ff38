import Foundation
import PaypipeCore
import Testing

@Suite struct Base64Tests {
    func decoded(_ text: String, _ variant: Base64.Variant) -> String? {
        Base64.decode(text, variant).map { String(decoding: $0, as: UTF8.self) }
    }

    /// RFC 4648 §10.
    static let vectors: [(plain: String, standard: String, url: String)] = [
        ("", "", ""), ("f", "Zg==", "Zg"), ("fo", "Zm8=", "Zm8"), ("foo", "Zm9v", "Zm9v"),
        ("foob", "Zm9vYg==", "Zm9vYg"), ("fooba", "Zm9vYmE=", "Zm9vYmE"), ("foobar", "Zm9vYmFy", "Zm9vYmFy"),
    ]

    @Test(arguments: vectors)
    func rfc4648TestVectors(_ vector: (plain: String, standard: String, url: String)) {
        #expect(Base64.encodeToString(Array(vector.plain.utf8), .standard) == vector.standard)
        #expect(Base64.encodeToString(Array(vector.plain.utf8), .url) == vector.url)
        #expect(decoded(vector.standard, .standard) == vector.plain)
        #expect(decoded(vector.url, .url) == vector.plain)
        #expect(Base64.encodedCount(vector.plain.utf8.count, .standard) == vector.standard.utf8.count)
        #expect(Base64.encodedCount(vector.plain.utf8.count, .url) == vector.url.utf8.count)
    }

    @Test func theTwoAlphabetsDifferOnlyInTheirLastTwoCharacters() {
        let bytes: [UInt8] = [0xFB, 0xEF, 0xBE, 0xFF, 0xFF, 0xFF, 0xFB, 0xFF]
        #expect(Base64.encodeToString(bytes, .standard) == "++++////+/8=")
        #expect(Base64.encodeToString(bytes, .url) == "----____-_8")
        #expect(Base64.decode("++++////+/8=", .standard) == bytes)
        #expect(Base64.decode("----____-_8", .url) == bytes)
        // Each variant refuses the other's characters.
        #expect(Base64.decode("----____-_8=", .standard) == nil)
        #expect(Base64.decode("++++////+/8", .url) == nil)
    }

    @Test func agreesWithFoundationForEveryLengthAndByte() {
        var generator = SystemRandomNumberGenerator()
        var samples: [[UInt8]] = (0...255).map { [UInt8($0)] }
        for length in 0...70 { samples.append((0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }) }
        for bytes in samples {
            let foundation = Data(bytes).base64EncodedString()
            let foundationURL = foundation.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
            #expect(Base64.encodeToString(bytes, .standard) == foundation)
            #expect(Base64.encodeToString(bytes, .url) == foundationURL)
            #expect(Base64.decode(foundation, .standard) == bytes)
            #expect(Base64.decode(foundationURL, .url) == bytes)
        }
    }

    @Test func encodeIntoAppends() {
        var out = Array("x.".utf8)
        Base64.encode(Array("foob".utf8), .url, into: &out)
        #expect(String(decoding: out, as: UTF8.self) == "x.Zm9vYg")
    }

    @Test(arguments: [
        "Zg", "Zm8", "Zg=", "Zg===", "Zm9vY===", "Z===", "====", "=", "Zg==Zg==", "Zm8=Zm8=", "AA=A", "Zm=v",
    ])
    func standardRequiresExactPadding(_ text: String) {
        #expect(Base64.decode(text, .standard) == nil)
    }

    @Test(arguments: ["Zg==", "Zm8=", "Zg=", "Zm9v=", "="])
    func urlRefusesPadding(_ text: String) {
        #expect(Base64.decode(text, .url) == nil)
    }

    @Test(arguments: ["Z", "Zm9vY", "Zm9vYmFyZ"])
    func aLengthNoEncodingProducesIsRefused(_ text: String) {
        #expect(Base64.decode(text, .url) == nil)
        #expect(Base64.decode(text, .standard) == nil)
    }

    /// Four or eight bytes each, so that only the alphabet rule can refuse them.
    @Test(arguments: ["Zm 9", "Zm9\n", " Zm9", "Zm9v\r\nAA", "Zm\t9", "Zm9!", "Zm9.", "Zm\u{00E9}", "Zm9\0"])
    func charactersOutsideTheAlphabetAreRefused(_ text: String) {
        #expect(Base64.decode(text, .standard) == nil)
        #expect(Base64.decode(text, .url) == nil)
    }

    @Test func nonCanonicalTrailingBitsAreRefused() {
        // "Zg==" is the only spelling of "f": "Zh==" .. "Zv==" carry the same 8 bits plus
        // non-zero padding bits, which a lenient decoder would accept.
        #expect(decoded("Zg==", .standard) == "f")
        for last in Array("hijklmnopqrstuv") {
            #expect(Base64.decode("Z\(last)==", .standard) == nil, "Z\(last)==")
            #expect(Base64.decode("Z\(last)", .url) == nil, "Z\(last)")
        }
        // Two bytes leave two spare bits: only "Zm8=" spells "fo".
        #expect(decoded("Zm8=", .standard) == "fo")
        for spelling in ["Zm9=", "Zm+=", "Zm/="] { #expect(Base64.decode(spelling, .standard) == nil, "\(spelling)") }
        for spelling in ["Zm9", "Zm-", "Zm_"] { #expect(Base64.decode(spelling, .url) == nil, "\(spelling)") }
    }

    @Test func decodesFromAnyByteCollection() {
        let token = Array("a.Zm9vYmFy.b".utf8)
        #expect(Base64.decode(token[2..<10], .url) == Array("foobar".utf8))
    }
}

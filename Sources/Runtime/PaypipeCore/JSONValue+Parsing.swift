#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Why a byte string is not a JSON document.
public struct JSONParseError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable { case invalidUTF8, syntax, duplicateKey, tooDeep }
    public let kind: Kind
    public let offset: Int
    public let reason: String
    public var description: String { "\(reason) at byte \(offset)" }
}

extension JSONValue {
    /// Parses strictly per RFC 8259: no trailing commas, no comments, no duplicate keys,
    /// valid UTF-8 only, and at most `maxDepth` nested containers. Where the RFC leaves the choice
    /// open: no byte order mark, no unpaired surrogate escapes, integers beyond Int64 become the
    /// nearest `.fraction`, and numbers beyond Double's range are refused (JSONParserTests has each case).
    public static func parse(_ bytes: some Collection<UInt8>, maxDepth: Int = 64) throws(JSONParseError) -> JSONValue {
        let array = Array(bytes)
        return try array.withUnsafeBufferPointer { buffer throws(JSONParseError) in
            var parser = JSONParser(bytes: buffer, maxDepth: maxDepth)
            return try parser.parseDocument()
        }
    }

    public static func parse(_ text: String, maxDepth: Int = 64) throws(JSONParseError) -> JSONValue {
        try parse(Array(text.utf8), maxDepth: maxDepth)
    }

    /// Reads `bytes` as one JSON object without building it: each member goes to `take` as its
    /// key's bytes and its parsed value, in document order. True when the whole document was
    /// read so. False as soon as `take` refuses a member, a key is not plain ASCII (an escape
    /// could spell any key), or the document is not a well-formed object: the caller then
    /// parses it with `parse`, which also says what is wrong.
    /// `keepingNested` false: a member's array or object is read to check its grammar and comes
    /// to `take` empty, so a large document costs no more than its own bytes (repeated keys
    /// inside it go unnoticed).
    package static func forEachMember(
        of bytes: some Collection<UInt8>, maxDepth: Int = 64, keepingNested: Bool = true,
        _ take: (UnsafeBufferPointer<UInt8>, JSONValue) -> Bool
    ) -> Bool {
        func scan(_ buffer: UnsafeBufferPointer<UInt8>) -> Bool {
            var parser = JSONParser(bytes: buffer, maxDepth: maxDepth)
            parser.keepsNested = keepingNested
            return (try? parser.scanObject(take)) ?? false
        }
        return bytes.withContiguousStorageIfAvailable(scan) ?? Array(bytes).withUnsafeBufferPointer(scan)
    }

    /// For a `forEachMember` reader: keeps `value` in `field` unless the member came before
    /// (a repeated key, which `parse` refuses).
    package static func keepOnce(_ value: JSONValue, in field: inout JSONValue?) -> Bool {
        guard field == nil else { return false }
        field = value
        return true
    }
}

extension UnsafeBufferPointer<UInt8> {
    /// Whether these bytes are `name`'s (a `forEachMember` key against a field's name).
    package func spells(_ name: StaticString) -> Bool {
        // memcmp: the generic `elementsEqual` would go element by element through an iterator.
        count == name.utf8CodeUnitCount && (count == 0 || memcmp(baseAddress!, name.utf8Start, count) == 0)
    }
}

/// `case "name":` in a `switch` over a `forEachMember` key.
package func ~= (name: StaticString, key: UnsafeBufferPointer<UInt8>) -> Bool {
    key.spells(name)
}

private struct JSONParser {
    let bytes: UnsafeBufferPointer<UInt8>
    let maxDepth: Int
    var index = 0
    var depth = 0
    /// The members of every object still being parsed, innermost last. An object's dictionary
    /// is built once its members are known, at its final size: grown member by member, it would
    /// be rehashed at every doubling.
    var members: [(key: String, value: JSONValue, offset: Int)] = []
    /// False: arrays and objects are checked and come back empty (`forEachMember`).
    var keepsNested = true

    init(bytes: UnsafeBufferPointer<UInt8>, maxDepth: Int) {
        self.bytes = bytes
        self.maxDepth = maxDepth
        members.reserveCapacity(32)
    }

    mutating func parseDocument() throws(JSONParseError) -> JSONValue {
        skipWhitespace()
        let value = try parseValue()
        skipWhitespace()
        guard index == bytes.count else { throw fail(.syntax, "unexpected data after the JSON value") }
        return value
    }

    func fail(_ kind: JSONParseError.Kind, _ reason: String) -> JSONParseError {
        JSONParseError(kind: kind, offset: index, reason: reason)
    }

    mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x0A, 0x0D, 0x09: index += 1
            default: return
            }
        }
    }

    mutating func parseValue() throws(JSONParseError) -> JSONValue {
        guard index < bytes.count else { throw fail(.syntax, "unexpected end of input") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"):
            try expectLiteral("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try expectLiteral("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try expectLiteral("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw fail(.syntax, "unexpected character")
        }
    }

    mutating func expectLiteral(_ literal: StaticString) throws(JSONParseError) {
        let count = literal.utf8CodeUnitCount
        guard bytes.count - index >= count else { throw fail(.syntax, "invalid literal") }
        let start = literal.utf8Start
        for offset in 0..<count where bytes[index + offset] != start[offset] {
            throw fail(.syntax, "invalid literal")
        }
        index += count
    }

    mutating func enterContainer() throws(JSONParseError) {
        depth += 1
        if depth > maxDepth { throw fail(.tooDeep, "nesting deeper than \(maxDepth)") }
    }

    mutating func parseObject() throws(JSONParseError) -> JSONValue {
        try enterContainer()
        index += 1
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            depth -= 1
            return .object([:])
        }
        let first = members.count
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else {
                throw fail(.syntax, "expected a string key")
            }
            let keyOffset = index
            let key = try parseString()
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw fail(.syntax, "expected ':'") }
            index += 1
            skipWhitespace()
            let value = try parseValue()
            if keepsNested { members.append((key, value, keyOffset)) }
            skipWhitespace()
            guard index < bytes.count else { throw fail(.syntax, "unexpected end of input in an object") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            if bytes[index] == UInt8(ascii: "}") {
                index += 1
                break
            }
            throw fail(.syntax, "expected ',' or '}'")
        }
        var object = [String: JSONValue](minimumCapacity: members.count - first)
        for member in members[first...] where object.updateValue(member.value, forKey: member.key) != nil {
            throw JSONParseError(kind: .duplicateKey, offset: member.offset, reason: "duplicate key \"\(member.key.prefix(64))\"")
        }
        members.removeSubrange(first...)
        depth -= 1
        return .object(object)
    }

    /// `forEachMember`'s reading: the same grammar as `parseObject` at the top level, with
    /// plain keys only.
    mutating func scanObject(_ take: (UnsafeBufferPointer<UInt8>, JSONValue) -> Bool) throws(JSONParseError) -> Bool {
        skipWhitespace()
        guard index < bytes.count, bytes[index] == UInt8(ascii: "{") else { return false }
        try enterContainer()
        index += 1
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
        } else {
            while true {
                skipWhitespace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { return false }
                let keyStart = index + 1
                let keyEnd = JSONPlainRun.end(of: bytes, from: keyStart, stopAtNonASCII: true)
                guard keyEnd < bytes.count, bytes[keyEnd] == UInt8(ascii: "\"") else { return false }
                index = keyEnd + 1
                skipWhitespace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { return false }
                index += 1
                skipWhitespace()
                let value = try parseValue()
                guard take(UnsafeBufferPointer(rebasing: bytes[keyStart..<keyEnd]), value) else { return false }
                skipWhitespace()
                guard index < bytes.count else { return false }
                if bytes[index] == UInt8(ascii: ",") {
                    index += 1
                    continue
                }
                if bytes[index] == UInt8(ascii: "}") {
                    index += 1
                    break
                }
                return false
            }
        }
        depth -= 1
        skipWhitespace()
        return index == bytes.count
    }

    mutating func parseArray() throws(JSONParseError) -> JSONValue {
        try enterContainer()
        index += 1
        var array: [JSONValue] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            depth -= 1
            return .array(array)
        }
        while true {
            skipWhitespace()
            let element = try parseValue()
            if keepsNested { array.append(element) }
            skipWhitespace()
            guard index < bytes.count else { throw fail(.syntax, "unexpected end of input in an array") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            if bytes[index] == UInt8(ascii: "]") {
                index += 1
                break
            }
            throw fail(.syntax, "expected ',' or ']'")
        }
        depth -= 1
        return .array(array)
    }

    mutating func parseNumber() throws(JSONParseError) -> JSONValue {
        let start = index
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count, isDigit(bytes[index]) else { throw fail(.syntax, "invalid number") }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
        } else {
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        var isInteger = true
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            isInteger = false
            index += 1
            guard index < bytes.count, isDigit(bytes[index]) else { throw fail(.syntax, "invalid number") }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            isInteger = false
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard index < bytes.count, isDigit(bytes[index]) else { throw fail(.syntax, "invalid number") }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        if isInteger, let value = Int64(text) { return .integer(value) }
        guard let value = Double(text) else { throw fail(.syntax, "invalid number") }
        // Double(text) rounds an overflow to ±infinity, which JSON cannot express (it would be
        // written back as null), so refuse the number rather than change its value.
        guard value.isFinite else {
            throw JSONParseError(kind: .syntax, offset: start, reason: "number out of range (beyond ±1.8e308)")
        }
        return .fraction(value)
    }

    func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    mutating func parseString() throws(JSONParseError) -> String {
        index += 1
        let start = index
        // Fast path: no escapes, ASCII only.
        index = JSONPlainRun.end(of: bytes, from: start, stopAtNonASCII: true)
        if index < bytes.count, bytes[index] == UInt8(ascii: "\"") {
            let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
            index += 1
            return text
        }
        var scalars = String.UnicodeScalarView()
        scalars.append(contentsOf: String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self).unicodeScalars)
        while true {
            guard index < bytes.count else { throw fail(.syntax, "unterminated string") }
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                return String(scalars)
            case UInt8(ascii: "\\"):
                index += 1
                guard index < bytes.count else { throw fail(.syntax, "unterminated escape") }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\""): scalars.append("\"")
                case UInt8(ascii: "\\"): scalars.append("\\")
                case UInt8(ascii: "/"): scalars.append("/")
                case UInt8(ascii: "b"): scalars.append("\u{08}")
                case UInt8(ascii: "f"): scalars.append("\u{0C}")
                case UInt8(ascii: "n"): scalars.append("\n")
                case UInt8(ascii: "r"): scalars.append("\r")
                case UInt8(ascii: "t"): scalars.append("\t")
                case UInt8(ascii: "u"):
                    let first = try parseHex4()
                    if (0xD800...0xDBFF).contains(first) {
                        guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                            throw fail(.syntax, "unpaired surrogate")
                        }
                        index += 2
                        let second = try parseHex4()
                        guard (0xDC00...0xDFFF).contains(second) else { throw fail(.syntax, "unpaired surrogate") }
                        let value = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)
                        scalars.append(Unicode.Scalar(value)!)
                    } else {
                        guard let scalar = Unicode.Scalar(first) else { throw fail(.syntax, "unpaired surrogate") }
                        scalars.append(scalar)
                    }
                default: throw fail(.syntax, "invalid escape")
                }
            case 0..<0x20:
                throw fail(.syntax, "control character in a string")
            case 0..<0x80:
                scalars.append(Unicode.Scalar(byte))
                index += 1
            default:
                scalars.append(try decodeUTF8Scalar())
            }
        }
    }

    mutating func parseHex4() throws(JSONParseError) -> UInt32 {
        guard bytes.count - index >= 4 else { throw fail(.syntax, "invalid \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt32
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(byte - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(byte - UInt8(ascii: "A") + 10)
            default: throw fail(.syntax, "invalid \\u escape")
            }
            value = value << 4 | digit
            index += 1
        }
        return value
    }

    /// Decodes one multi-byte UTF-8 sequence, rejecting overlong forms and surrogates.
    mutating func decodeUTF8Scalar() throws(JSONParseError) -> Unicode.Scalar {
        let lead = bytes[index]
        let length: Int
        var value: UInt32
        switch lead {
        case 0xC2...0xDF:
            length = 2
            value = UInt32(lead & 0x1F)
        case 0xE0...0xEF:
            length = 3
            value = UInt32(lead & 0x0F)
        case 0xF0...0xF4:
            length = 4
            value = UInt32(lead & 0x07)
        default: throw fail(.invalidUTF8, "invalid UTF-8")
        }
        guard bytes.count - index >= length else { throw fail(.invalidUTF8, "invalid UTF-8") }
        for offset in 1..<length {
            let continuation = bytes[index + offset]
            guard continuation & 0xC0 == 0x80 else { throw fail(.invalidUTF8, "invalid UTF-8") }
            value = value << 6 | UInt32(continuation & 0x3F)
        }
        let minimum: UInt32 = length == 2 ? 0x80 : length == 3 ? 0x800 : 0x10000
        guard value >= minimum, value <= 0x10FFFF, let scalar = Unicode.Scalar(value) else {
            throw fail(.invalidUTF8, "invalid UTF-8")
        }
        index += length
        return scalar
    }
}

import Crypto
import Foundation

/// The primitives behind every value the emulators check or sign, written here on purpose
/// instead of borrowed from the provider modules: an emulator that verified with the client's
/// own code would repeat the client's mistakes and pass them. Only swift-crypto's SHA-256 and
/// HMAC and Foundation's base64 are shared with the rest of the world.
package enum SandboxCrypto {
    package static func sha256Hex(_ bytes: some Sequence<UInt8>) -> String {
        hex(SHA256.hash(data: Array(bytes)))
    }

    package static func hmacSHA256(key: [UInt8], message: some Sequence<UInt8>) -> [UInt8] {
        Array(HMAC<SHA256>.authenticationCode(for: Array(message), using: SymmetricKey(data: key)))
    }

    package static func hex(_ bytes: some Sequence<UInt8>) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        for byte in bytes { out += [digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]] }
        return String(decoding: out, as: UTF8.self)
    }

    /// No early exit on the first difference, so the time taken does not reveal how much of a
    /// guessed secret was right.
    package static func constantTimeEquals(_ a: some Collection<UInt8>, _ b: some Collection<UInt8>) -> Bool {
        let left = Array(a), right = Array(b)
        var difference = UInt8(truncatingIfNeeded: left.count ^ right.count)
        for index in 0..<max(left.count, right.count) {
            difference |= (index < left.count ? left[index] : 0) ^ (index < right.count ? right[index] : 0)
        }
        return difference == 0 && left.count == right.count
    }

    /// Base64url without padding (RFC 7515 §2).
    package static func base64URLEncode(_ bytes: some Sequence<UInt8>) -> String {
        var text = Data(bytes).base64EncodedString()
        while text.last == "=" { text.removeLast() }
        let urlSafe: [Character] = text.map { $0 == "+" ? "-" : $0 == "/" ? "_" : $0 }
        return String(urlSafe)
    }

    /// Strict base64url: unpadded and canonical (re-encoding gives the same text), so two
    /// spellings of one signature are not both accepted.
    package static func base64URLDecode(_ text: some StringProtocol) -> [UInt8]? {
        guard
            text.utf8.allSatisfy({ byte in
                switch byte {
                case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                    UInt8(ascii: "-"), UInt8(ascii: "_"):
                    true
                default: false
                }
            })
        else { return nil }
        let standard: [Character] = text.map { $0 == "-" ? "+" : $0 == "_" ? "/" : $0 }
        var base64 = String(standard)
        while base64.utf8.count % 4 != 0 { base64 += "=" }
        guard let data = Data(base64Encoded: base64) else { return nil }
        let bytes = Array(data)
        return base64URLEncode(bytes) == String(text) ? bytes : nil
    }

    /// The user and password bytes of `Basic base64(user:password)` (RFC 7617), nil when the
    /// header is not that. `lenient` accepts what servers commonly tolerate: any case of
    /// "Basic" and spaces around the credentials.
    package static func basicCredentials(_ header: String?, lenient: Bool = false) -> (user: [UInt8], password: [UInt8])? {
        guard var text = header?[...] else { return nil }
        if lenient { text = text.drop { $0 == " " } }
        guard text.count > 6, lenient ? text.prefix(6).lowercased() == "basic " : text.hasPrefix("Basic ") else { return nil }
        var encoded = text.dropFirst(6)
        if lenient {
            while encoded.first == " " { encoded = encoded.dropFirst() }
            while encoded.last == " " { encoded = encoded.dropLast() }
        }
        guard let decoded = Data(base64Encoded: String(encoded)) else { return nil }
        let bytes = Array(decoded)
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")) else { return nil }
        return (Array(bytes[..<colon]), Array(bytes[(colon + 1)...]))
    }
}

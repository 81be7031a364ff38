import Crypto

/// Digest helpers shared by the provider modules: hex SHA-256 and HMAC-SHA256.
public enum Digest {
    public static func sha256Hex(_ bytes: some Sequence<UInt8>) -> String {
        hex(SHA256.hash(data: Array(bytes)))
    }

    public static func sha256Hex(_ text: String) -> String { sha256Hex(Array(text.utf8)) }

    public static func hmacSHA256(key: [UInt8], message: [UInt8]) -> [UInt8] {
        Array(HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: key)))
    }

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    public static func hex(_ bytes: some Sequence<UInt8>) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(64)
        for b in bytes {
            out.append(hexDigits[Int(b >> 4)])
            out.append(hexDigits[Int(b & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}

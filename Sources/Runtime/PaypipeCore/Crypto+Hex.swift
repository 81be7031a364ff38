import Crypto

/// Digest helpers shared by the provider modules: hex SHA-256 and HMAC-SHA256.
public enum Digest {
    public static func sha256Hex(_ bytes: some Sequence<UInt8>) -> String {
        SHA256.hash(data: Array(bytes)).withUnsafeBytes { hex($0) }
    }

    public static func sha256Hex(_ text: String) -> String { sha256Hex(Array(text.utf8)) }

    public static func hmacSHA256(key: [UInt8], message: [UInt8]) -> [UInt8] {
        Array(HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: key)))
    }

    /// Lowercase hex (or uppercase), written over contiguous bytes: a generic sequence (a digest's
    /// prefix) is copied to contiguous storage first rather than walked through its iterator.
    public static func hex(_ bytes: some Sequence<UInt8>, uppercase: Bool = false) -> String {
        if let text = bytes.withContiguousStorageIfAvailable({ hex(UnsafeRawBufferPointer($0), uppercase: uppercase) }) { return text }
        return Array(bytes).withUnsafeBytes { hex($0, uppercase: uppercase) }
    }

    public static func hex(_ bytes: UnsafeRawBufferPointer, uppercase: Bool = false) -> String {
        let digits: StaticString = uppercase ? "0123456789ABCDEF" : "0123456789abcdef"
        return String(unsafeUninitializedCapacity: bytes.count * 2) { out in
            let table = digits.utf8Start
            for (index, byte) in bytes.enumerated() {
                out[2 * index] = table[Int(byte >> 4)]
                out[2 * index + 1] = table[Int(byte & 0x0F)]
            }
            return bytes.count * 2
        }
    }
}

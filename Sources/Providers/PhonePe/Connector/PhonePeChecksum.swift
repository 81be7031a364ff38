import Crypto
import PaypipeCore

/// PhonePe's `X-VERIFY` checksum: `sha256hex(message + saltKey) + "###" + saltIndex`, where the
/// message is `base64Payload + apiPath` for a POST, the path for a GET, and the base64
/// `response` for an S2S callback.
///
/// Build one per merchant and reuse it: it keeps the salt as bytes and writes the header
/// straight into one string, so signing costs one SHA-256 and one allocation.
/// Like `Secret`, it never prints or reflects the salt (test failures and `dump` use the mirror).
public struct PhonePeChecksum: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    private let salt: [UInt8]
    /// The configured salt index (not secret: it travels in every header).
    public let saltIndex: String
    /// `"###" + saltIndex`, the header's fixed suffix.
    private let suffix: [UInt8]

    public init(saltKey: Secret, saltIndex: String) {
        salt = saltKey.utf8
        self.saltIndex = saltIndex
        suffix = Array("###".utf8) + Array(saltIndex.utf8)
    }

    public init(config: PhonePeConfig) {
        self.init(saltKey: config.saltKey, saltIndex: config.saltIndex)
    }

    public var description: String { "PhonePeChecksum(saltKey: <redacted>, saltIndex: \(saltIndex))" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: ["saltIndex": saltIndex]) }

    // MARK: Signing

    /// POST requests: `sha256hex(base64Payload + apiPath + saltKey) + "###" + saltIndex`.
    public func xVerify(payloadBase64: String, apiPath: String) -> String {
        header(digest(payloadBase64, apiPath))
    }

    /// GET requests: `sha256hex(path + saltKey) + "###" + saltIndex`.
    public func xVerify(path: String) -> String {
        header(digest(path, nil))
    }

    /// S2S callbacks: `sha256hex(responseBase64 + saltKey) + "###" + saltIndex`.
    public func xVerify(callbackResponse: String) -> String {
        header(digest(callbackResponse, nil))
    }

    // MARK: Verifying

    public func verify(_ xVerify: String, payloadBase64: String, apiPath: String) -> Bool {
        matches(xVerify, digest(payloadBase64, apiPath))
    }

    public func verify(_ xVerify: String, path: String) -> Bool {
        matches(xVerify, digest(path, nil))
    }

    public func verify(_ xVerify: String, callbackResponse: String) -> Bool {
        matches(xVerify, digest(callbackResponse, nil))
    }

    // MARK: Internals

    private func digest(_ first: String, _ second: String?) -> SHA256.Digest {
        var hasher = SHA256()
        Self.feed(&hasher, first)
        if let second { Self.feed(&hasher, second) }
        salt.withUnsafeBytes { hasher.update(bufferPointer: $0) }
        return hasher.finalize()
    }

    @inline(__always)
    private static func feed(_ hasher: inout SHA256, _ text: String) {
        let done: Void? = text.utf8.withContiguousStorageIfAvailable { hasher.update(bufferPointer: UnsafeRawBufferPointer($0)) }
        if done == nil {
            Array(text.utf8).withUnsafeBytes { hasher.update(bufferPointer: $0) }
        }
    }

    @inline(__always)
    private static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? nibble &+ 0x30 : nibble &+ 0x57
    }

    private func header(_ digest: SHA256.Digest) -> String {
        String(unsafeUninitializedCapacity: 64 + suffix.count) { buffer in
            var index = 0
            digest.withUnsafeBytes { raw in
                for byte in raw {
                    buffer[index] = Self.hexDigit(byte >> 4)
                    buffer[index + 1] = Self.hexDigit(byte & 0x0F)
                    index += 2
                }
            }
            for byte in suffix {
                buffer[index] = byte
                index += 1
            }
            return index
        }
    }

    /// Accepts exactly `<64 hex digits, any case>###<configured saltIndex>`. The suffix is public
    /// and compared plainly; the digest is compared without an early exit.
    private func matches(_ xVerify: String, _ expected: SHA256.Digest) -> Bool {
        var received = xVerify
        return received.withUTF8 { bytes -> Bool in
            guard bytes.count == 64 + suffix.count else { return false }
            for i in 0..<suffix.count where bytes[64 + i] != suffix[i] { return false }
            var difference: UInt8 = 0
            expected.withUnsafeBytes { raw in
                var index = 0
                for byte in raw {
                    difference |= Self.foldHex(bytes[index]) ^ Self.hexDigit(byte >> 4)
                    difference |= Self.foldHex(bytes[index + 1]) ^ Self.hexDigit(byte & 0x0F)
                    index += 2
                }
            }
            return difference == 0
        }
    }

    /// Lower-cases `A`-`F` only, so no other byte can fold onto a hex digit.
    @inline(__always)
    private static func foldHex(_ byte: UInt8) -> UInt8 {
        byte >= 0x41 && byte <= 0x46 ? byte | 0x20 : byte
    }
}

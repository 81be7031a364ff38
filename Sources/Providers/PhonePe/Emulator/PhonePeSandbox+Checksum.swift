import PaypipeCore
import Sandbox

extension PhonePeSandbox {
    /// X-VERIFY as PhonePe's documentation defines it,
    /// `sha256hex(message + saltKey) + "###" + saltIndex`, where the message is
    /// `base64Payload + apiPath` for a POST, the path for a GET and the base64 `response` for an
    /// S2S callback. Computed here, never with the client's `PhonePeChecksum`, so a signing bug in
    /// the client cannot be mirrored by the sandbox.
    package func checksum(for message: String) -> String {
        SandboxCrypto.sha256Hex(Array(message.utf8) + saltKey.utf8) + "###" + saltIndex
    }

    /// Whether a received X-VERIFY is the checksum of `message`: the digest in any case,
    /// the salt index exactly, compared without an early exit.
    package func checksumMatches(_ received: String, message: String) -> Bool {
        var folded = Array(received.utf8)
        for index in folded.indices.prefix(64) where (UInt8(ascii: "A")...UInt8(ascii: "F")).contains(folded[index]) {
            folded[index] |= 0x20
        }
        return SandboxCrypto.constantTimeEquals(folded, Array(checksum(for: message).utf8))
    }
}

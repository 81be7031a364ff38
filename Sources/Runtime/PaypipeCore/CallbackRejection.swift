/// Why a provider callback (a PhonePe S2S callback, a Nets webhook, a Trust Payments
/// notification or response JWT, a Viva result URI) is refused before it may change an order.
/// The callback validator answers `status` with `{"error":{"code","message"}}` and counts
/// `code` in `/metrics` (PROTOCOL.md §3: forged, malformed or stale → 4xx, no order changes).
///
/// Messages name the field and the rule; they never carry secrets, signatures, checksums or
/// card data.
public struct CallbackRejection: Error, Sendable, Equatable, CustomStringConvertible {
    public let status: Int
    public let code: String
    public let message: String

    public init(status: Int, code: String, _ message: String) {
        self.status = status
        self.code = code
        self.message = message
    }

    public var description: String { "\(code): \(message)" }

    /// The sender is not who it claims to be (bad or missing signature, checksum or
    /// Authorization): 401. The caller may try another merchant's secret.
    public var isForged: Bool { status == 401 }
}

extension CallbackRejection {
    /// Codes shared by several providers; provider-specific ones live with their provider.
    public enum Code {
        public static let malformed = "MALFORMED"
        public static let missingField = "MISSING_FIELD"
        public static let invalidField = "INVALID_FIELD"
        /// A field the sender never sends (a notification whose fields could be re-split under its signature).
        public static let unknownField = "UNKNOWN_FIELD"
        public static let tooLarge = "TOO_LARGE"
        public static let badSignature = "BAD_SIGNATURE"
        public static let missingSignature = "MISSING_SIGNATURE"
        public static let badChecksum = "BAD_CHECKSUM"
        public static let missingChecksum = "MISSING_CHECKSUM"
        public static let badAuthorization = "BAD_AUTHORIZATION"
        public static let missingAuthorization = "MISSING_AUTHORIZATION"
        public static let stale = "STALE"
    }

    /// 401: the signature, checksum or Authorization is missing or does not verify. `code`
    /// says which (e.g. BAD_CHECKSUM, BAD_AUTHORIZATION, BAD_SIGNATURE).
    public static func forged(_ code: String, _ message: String) -> CallbackRejection {
        CallbackRejection(status: 401, code: code, message)
    }

    /// 400: authentic or not, the callback cannot be read (not JSON, missing or ill-formed
    /// fields). `code` defaults to MALFORMED; providers with finer codes pass their own.
    public static func malformed(_ message: String, code: String = Code.malformed) -> CallbackRejection {
        CallbackRejection(status: 400, code: code, message)
    }

    /// 413: the body is larger than the provider's documents ever are.
    public static func tooLarge(_ message: String) -> CallbackRejection {
        CallbackRejection(status: 413, code: Code.tooLarge, message)
    }

    /// 400: authentic but outside its validity window (e.g. a JWT `iat` too old, STALE, or in
    /// the future, IAT_IN_FUTURE).
    public static func stale(_ message: String, code: String = Code.stale) -> CallbackRejection {
        CallbackRejection(status: 400, code: code, message)
    }
}

/// Why a provider callback (a PhonePe S2S callback, a Nets webhook, a Trust Payments
/// notification or response JWT, a Viva result URI) is refused before it may change an order.
/// The callback validator answers `status` with `{"error":{"code","message"}}` and counts
/// `code` in `/metrics` (forged, malformed or stale → 4xx, no order changes).
///
/// Messages name the field and the rule; they never carry secrets, signatures, checksums or
/// card data.
public struct CallbackRejection: Error, Sendable, Equatable, CustomStringConvertible {
    public let status: Int
    public let code: OutcomeErrorCode
    public let message: String

    public init(status: Int, code: OutcomeErrorCode, _ message: String) {
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
    /// A refusal's code is an `OutcomeErrorCode`: the shared ones are declared with the
    /// catalogue, provider-specific ones in their provider's codes file.
    public typealias Code = OutcomeErrorCode

    /// 401: the signature, checksum or Authorization is missing or does not verify. `code`
    /// says which (e.g. BAD_CHECKSUM, BAD_AUTHORIZATION, BAD_SIGNATURE).
    public static func forged(_ code: OutcomeErrorCode, _ message: String) -> CallbackRejection {
        CallbackRejection(status: 401, code: code, message)
    }

    /// 400: authentic or not, the callback cannot be read (not JSON, missing or ill-formed
    /// fields). `code` defaults to MALFORMED; providers with finer codes pass their own.
    public static func malformed(_ message: String, code: OutcomeErrorCode = .malformed) -> CallbackRejection {
        CallbackRejection(status: 400, code: code, message)
    }

    /// 413: the body is larger than the provider's documents ever are.
    public static func tooLarge(_ message: String) -> CallbackRejection {
        CallbackRejection(status: 413, code: .tooLarge, message)
    }

    /// 400: authentic but outside its validity window (e.g. a JWT `iat` too old, STALE, or in
    /// the future, IAT_IN_FUTURE).
    public static func stale(_ message: String, code: OutcomeErrorCode = .stale) -> CallbackRejection {
        CallbackRejection(status: 400, code: code, message)
    }
}

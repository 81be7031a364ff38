/// Why a callback was refused as forged, malformed or stale: the callback validator answers
/// 4xx and counts `reason` in `/metrics`. Messages never carry secrets or signatures.
public struct TPCallbackError: Error, Sendable, Equatable, CustomStringConvertible {
    public struct Reason: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        public static let malformed = Reason(rawValue: "MALFORMED")
        public static let algorithmNotAllowed = Reason(rawValue: "ALG_NOT_ALLOWED")
        public static let badSignature = Reason(rawValue: "BAD_SIGNATURE")
        public static let missingSignature = Reason(rawValue: "MISSING_SIGNATURE")
        public static let missingIssuedAt = Reason(rawValue: "MISSING_IAT")
        public static let stale = Reason(rawValue: "STALE")
        public static let issuedInFuture = Reason(rawValue: "IAT_IN_FUTURE")
    }

    public let reason: Reason
    public let message: String

    public init(_ reason: Reason, _ message: String) {
        self.reason = reason
        self.message = message
    }

    /// The HTTP status the validator answers with.
    public var httpStatus: Int { reason == .badSignature || reason == .missingSignature || reason == .algorithmNotAllowed ? 401 : 400 }

    public var description: String { "\(reason.rawValue): \(message)" }
}

import PaypipeCore

/// Trust Payments' own reasons for refusing a response JWT (the callback validator answers
/// them like every other `CallbackRejection`: 401 for ALG_NOT_ALLOWED, 400 for the others).
extension CallbackRejection.Code {
    /// An `alg` other than HS256 (none, HS384, RS256...): refused before any signature is read.
    public static let algorithmNotAllowed = "ALG_NOT_ALLOWED"
    /// No `iat` claim, so the token's age cannot be checked.
    public static let missingIssuedAt = "MISSING_IAT"
    /// `iat` further ahead of the validator's clock than the allowed skew.
    public static let issuedInFuture = "IAT_IN_FUTURE"
}

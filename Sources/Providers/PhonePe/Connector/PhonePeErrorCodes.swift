import PaypipeCore

/// PhonePe's outcome codes. A refusal or failure PhonePe names with its own code ends the order
/// with that code as PhonePe wrote it (`phonePe(_:)`); the names below are the pipeline's.
extension OutcomeErrorCode {
    /// `failed`: the auth debit failed and PhonePe gave no usable `payResponseCode`.
    public static let authFailed = OutcomeErrorCode(rawValue: "AUTH_FAILED")
    /// `failed`: the mandate failed and PhonePe gave no usable `payResponseCode`.
    public static let subscriptionFailed = OutcomeErrorCode(rawValue: "SUBSCRIPTION_FAILED")
    /// `failed`: the auth status call found no such auth request; before a resubmit it means "never seen".
    public static let authRequestNotFound = OutcomeErrorCode(rawValue: "AUTH_REQUEST_NOT_FOUND")

    /// `failed`: the mandate ended in `state` (CANCELLED, REVOKED, EXPIRED) before authorisation (SUBSCRIPTION_<state>).
    public static func subscriptionEnded(_ state: String) -> OutcomeErrorCode {
        OutcomeErrorCode(rawValue: "SUBSCRIPTION_\(state)")
    }

    /// `failed`: PhonePe's own response or `payResponseCode`, as PhonePe wrote it (callers bound its length).
    public static func phonePe(_ code: some StringProtocol) -> OutcomeErrorCode {
        OutcomeErrorCode(rawValue: String(code))
    }
}

import PaypipeCore

/// Cleeng's outcome codes.
extension OutcomeErrorCode {
    // MARK: Receipt POST

    /// `failed`: the receipt endpoint refused the credentials (HTTP 401 or 403).
    public static let cleengUnauthorized = OutcomeErrorCode(rawValue: "CLEENG_UNAUTHORIZED")
    /// `failed`: the receipt endpoint rejected the request (HTTP 400).
    public static let cleengBadRequest = OutcomeErrorCode(rawValue: "CLEENG_BAD_REQUEST")
    /// `failed`: the receipt endpoint was not found (HTTP 404): the receiptURL is wrong.
    public static let cleengNotFound = OutcomeErrorCode(rawValue: "CLEENG_NOT_FOUND")
    /// `failed`: the receipt endpoint answered a status its table does not know.
    public static let cleengUnexpectedStatus = OutcomeErrorCode(rawValue: "CLEENG_UNEXPECTED_STATUS")

    // MARK: getAccessStatus polling

    /// `failed`: the poller's deadline passed without Cleeng granting access.
    public static let accessNotGranted = OutcomeErrorCode(rawValue: "ACCESS_NOT_GRANTED")
    /// `failed`: getAccessStatus error 1, the customer token is invalid.
    public static let cleengInvalidCustomerToken = OutcomeErrorCode(rawValue: "CLEENG_INVALID_CUSTOMER_TOKEN")
    /// `failed`: getAccessStatus error 4, Cleeng does not know the offer.
    public static let cleengOfferNotFound = OutcomeErrorCode(rawValue: "CLEENG_OFFER_NOT_FOUND")
    /// `failed`: getAccessStatus error 16, the arguments are invalid.
    public static let cleengInvalidArguments = OutcomeErrorCode(rawValue: "CLEENG_INVALID_ARGUMENTS")

    /// `failed`: a getAccessStatus error that ends polling: the named ones above, CLEENG_ERROR_<code> for others.
    public static func cleengError(_ code: Int64) -> OutcomeErrorCode {
        switch code {
        case CleengAccessStatus.ErrorCode.invalidCustomerToken: .cleengInvalidCustomerToken
        case CleengAccessStatus.ErrorCode.offerNotFound: .cleengOfferNotFound
        case CleengAccessStatus.ErrorCode.invalidArguments: .cleengInvalidArguments
        default: OutcomeErrorCode(rawValue: "CLEENG_ERROR_\(code)")
        }
    }
}

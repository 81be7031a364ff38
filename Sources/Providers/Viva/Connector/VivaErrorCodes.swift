import PaypipeCore

/// Viva's outcome and callback codes; the shared MISSING_FIELD, INVALID_FIELD, AMOUNT_MISMATCH
/// and REFERENCE_MISMATCH are the catalogue's own.
extension OutcomeErrorCode {
    // MARK: Verdicts

    /// `failed`: the sale failed or was cancelled (the result says so, or Viva records E or X).
    public static let vivaSaleFailed = OutcomeErrorCode(rawValue: "VIVA_SALE_FAILED")
    /// `failed`: Viva records the sale as refunded (R).
    public static let vivaRefunded = OutcomeErrorCode(rawValue: "VIVA_REFUNDED")
    /// `failed`: Viva's refund answered this non-zero `ErrorCode` (VIVA_REFUND_<code>), or
    /// records the refund as failed (VIVA_REFUND_0).
    public static func vivaRefundRefused(_ errorCode: Int64) -> OutcomeErrorCode { OutcomeErrorCode(rawValue: "VIVA_REFUND_\(errorCode)") }
    /// `failed`: Viva refused the merchant's API credentials for a refund.
    public static let vivaUnauthorized = OutcomeErrorCode(rawValue: "VIVA_UNAUTHORIZED")
    /// `failed`: a Viva sale was handed an HTTP response, which it never asks for (a pipeline bug).
    public static let internalError = OutcomeErrorCode(rawValue: "INTERNAL")

    // MARK: Refused results (the forwarded URI, and Viva's confirmation of it)

    /// 400: the URI is not `scheme://host?key=value&…` as Viva writes it.
    public static let malformedURI = OutcomeErrorCode(rawValue: "MALFORMED_URI")
    /// 400: a query value is not percent-encoded UTF-8 free of control characters.
    public static let invalidEncoding = OutcomeErrorCode(rawValue: "INVALID_ENCODING")
    /// 400: a query key appears more than once.
    public static let duplicateParameter = OutcomeErrorCode(rawValue: "DUPLICATE_PARAMETER")
    /// 400: the result's scheme is not the callback scheme the order's sale URL named.
    public static let wrongScheme = OutcomeErrorCode(rawValue: "WRONG_CALLBACK_SCHEME")
    /// 400: the URI's host and path are not a sale result's (`<callback>://result`) or a sale request's.
    public static let wrongHost = OutcomeErrorCode(rawValue: "WRONG_HOST")
    /// 400: the URI's `action` is not `sale`.
    public static let wrongAction = OutcomeErrorCode(rawValue: "WRONG_ACTION")
    /// 400: `accountNumber` is not masked (only its first 6 and last 4 digits may show).
    public static let unmaskedPAN = OutcomeErrorCode(rawValue: "UNMASKED_PAN")
    /// 403: the merchant has no Viva API credentials to confirm with and does not accept unconfirmed results.
    public static let confirmationUnavailable = OutcomeErrorCode(rawValue: "CONFIRMATION_UNAVAILABLE")
    /// 404: Viva does not know the result's transactionId.
    public static let transactionNotFound = OutcomeErrorCode(rawValue: "TRANSACTION_NOT_FOUND")
    /// 409: Viva has not finished the transaction (statusId A or unknown); forward the result again later.
    public static let notFinal = OutcomeErrorCode(rawValue: "NOT_FINAL")
    /// 503: Viva's token or transactions API could not be asked right now.
    public static let vivaUnavailable = OutcomeErrorCode(rawValue: "VIVA_UNAVAILABLE")
}

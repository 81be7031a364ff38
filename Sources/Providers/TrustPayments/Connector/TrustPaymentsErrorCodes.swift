import PaypipeCore

/// Trust Payments' outcome and callback codes. Which `errorcode` gives which is `TPErrorCode`'s table.
extension OutcomeErrorCode {
    // MARK: Verdicts from an `errorcode`

    /// `failed`: errorcode 70000, the payment was declined.
    public static let declined = OutcomeErrorCode(rawValue: "DECLINED")
    /// `failed`: errorcode 60014, or a reference query that finds no transaction to update.
    public static let referenceNotFound = OutcomeErrorCode(rawValue: "REFERENCE_NOT_FOUND")
    /// `failed`: errorcode 60017, the transaction cannot be updated.
    public static let notUpdatable = OutcomeErrorCode(rawValue: "NOT_UPDATABLE")
    /// `failed`: errorcode 60022 (unauthenticated).
    public static let unauthenticated = OutcomeErrorCode(rawValue: "UNAUTHENTICATED")
    /// `failed`: errorcode 20018 or 20019, a precondition of the subscription is not met.
    public static let subscriptionPrecondition = OutcomeErrorCode(rawValue: "SUBSCRIPTION_PRECONDITION")
    /// `failed`: a response JWT's payment entry carries errorcode 60010 (bank system error).
    public static let bankSystemError = OutcomeErrorCode(rawValue: "BANK_SYSTEM_ERROR")
    /// `failed`: a response JWT's payment entry carries errorcode 50005 (timeout).
    public static let timeout = OutcomeErrorCode(rawValue: "TIMEOUT")

    /// `failed`: an `errorcode` the table gives no name (TP_ERROR_<errorcode>, at most 16 characters of it).
    public static func tpError(_ errorcode: String) -> OutcomeErrorCode {
        OutcomeErrorCode(rawValue: "TP_ERROR_\(errorcode.prefix(16))")
    }

    // MARK: A REFUND's errorcode (`TPErrorCode.refundMeaning`)

    /// `failed`: errorcode 20004, Trust Payments has no such parent transaction.
    public static let refundParentNotFound = OutcomeErrorCode(rawValue: "REFUND_PARENT_NOT_FOUND")
    /// `failed`: errorcode 20005 or 20012, the AUTH has not settled (before settlement, lower or
    /// cancel it with `transactionUpdate` instead).
    public static let refundParentNotSettled = OutcomeErrorCode(rawValue: "REFUND_PARENT_NOT_SETTLED")
    /// `failed`: errorcode 20006, the parent is not an AUTH.
    public static let refundParentNotAuth = OutcomeErrorCode(rawValue: "REFUND_PARENT_NOT_AUTH")
    /// `failed`: errorcode 20007, more than the AUTH has left to refund.
    public static let refundAmountTooGreat = OutcomeErrorCode(rawValue: "REFUND_AMOUNT_TOO_GREAT")
    /// `failed`: errorcode 20011, the parent AUTH was declined.
    public static let refundParentDeclined = OutcomeErrorCode(rawValue: "REFUND_PARENT_DECLINED")
    /// `failed`: errorcode 20022, below the smallest amount Trust Payments refunds.
    public static let refundBelowMinimum = OutcomeErrorCode(rawValue: "REFUND_BELOW_MINIMUM")
    /// `failed`: errorcode 20034, the payment type takes no refunds.
    public static let refundNotSupported = OutcomeErrorCode(rawValue: "REFUND_NOT_SUPPORTED")
    /// `failed`: errorcode 40001, Trust Payments cannot process the refund.
    public static let refundNotProcessed = OutcomeErrorCode(rawValue: "REFUND_NOT_PROCESSED")

    // MARK: Other verdicts

    /// `failed`: the web services refused the credentials (HTTP 401 or 403).
    public static let unauthorized = OutcomeErrorCode(rawValue: "UNAUTHORIZED")
    /// `failed`: a response JWT has no AUTH or ACCOUNTCHECK entry and no entry with an error.
    public static let noPaymentResult = OutcomeErrorCode(rawValue: "NO_PAYMENT_RESULT")
    /// `failed` (the first payment was taken): the SUBSCRIPTION entry is missing or has a non-zero errorcode.
    public static let subscriptionNotScheduled = OutcomeErrorCode(rawValue: "SUBSCRIPTION_NOT_SCHEDULED")
    /// `failed` (the first payment was taken): the SUBSCRIPTION entry differs from the signed request.
    public static let subscriptionMismatch = OutcomeErrorCode(rawValue: "SUBSCRIPTION_MISMATCH")

    // MARK: Refused response JWTs and notifications

    /// 401: an `alg` other than HS256 (none, HS384, RS256...), refused before any signature is read.
    public static let algorithmNotAllowed = OutcomeErrorCode(rawValue: "ALG_NOT_ALLOWED")
    /// 400: no `iat` claim, so the token's age cannot be checked.
    public static let missingIssuedAt = OutcomeErrorCode(rawValue: "MISSING_IAT")
    /// 400: `iat` further ahead of the validator's clock than the allowed skew.
    public static let issuedInFuture = OutcomeErrorCode(rawValue: "IAT_IN_FUTURE")
    /// 409: the callback names an order that is not a `subscriptionJwt` with a signed subscription request.
    public static let operationMismatch = OutcomeErrorCode(rawValue: "OPERATION_MISMATCH")
    /// 400: the payment entry carries no `orderreference`.
    public static let missingOrderReference = OutcomeErrorCode(rawValue: "MISSING_ORDERREFERENCE")
    /// 409: an entry's `orderreference` names another order.
    public static let orderReferenceMismatch = OutcomeErrorCode(rawValue: "ORDERREFERENCE_MISMATCH")
}

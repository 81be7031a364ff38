/// Every `error.code` the pipeline writes: in an outcome (`Outcome.ErrorInfo`, from a
/// `ProviderVerdict.failed`, a stage or the ledger) and in a refused callback's answer
/// (`CallbackRejection`). One catalogue, in the manner of swift-service-lifecycle's
/// `ServiceGroupError.Code`: a struct around the code's text with a static member per code.
///
/// The pipeline's own codes are declared here; a provider declares its own in its module, in
/// one file (`extension OutcomeErrorCode { public static let … }`, e.g. `NetsErrorCodes.swift`),
/// and codes built from a provider's numbers are static functions there. Producers use the
/// members, never literals: the string-literal conformance is there so tests can compare with
/// the text they expect. `rawValue` is the text written to JSON, unchanged.
/// Order-level refusals (`rejected` outcomes) keep their own typed codes, `Rejection.Code`.
public struct OutcomeErrorCode: RawRepresentable, Hashable, Sendable, ExpressibleByStringLiteral, CustomStringConvertible {
    public let rawValue: String

    public init(rawValue: String) { self.rawValue = rawValue }

    public init(stringLiteral value: String) { self.rawValue = value }

    /// A `Rejection`'s code where an outcome or verdict carries it (e.g. a pending order whose
    /// params no longer read ends `failed` with the rule it broke).
    public init(_ code: Rejection.Code) { self.rawValue = code.rawValue }

    public var description: String { rawValue }
}

// MARK: - Outcomes the pipeline itself decides

extension OutcomeErrorCode {
    /// `unknown`: money may have moved and nothing more can tell; an operator decides.
    public static let needsReview = OutcomeErrorCode(rawValue: "NEEDS_REVIEW")
    /// `failed`: an operator resolved the order in review: the provider did not take the money
    /// (the outcome's `resolution` says who and why).
    public static let resolvedByOperator = OutcomeErrorCode(rawValue: "RESOLVED_BY_OPERATOR")
    /// `unknown`: the provider's answer is not known yet; the ledger redelivers the order, resolved first.
    public static let outcomeUnknown = OutcomeErrorCode(rawValue: "OUTCOME_UNKNOWN")
    /// `failed`: still pending at the provider at its last status check, which confirms nothing was taken.
    public static let expired = OutcomeErrorCode(rawValue: "EXPIRED")
    /// `failed`: the provider kept answering "retry" until the submitter's attempts ran out.
    public static let providerUnavailable = OutcomeErrorCode(rawValue: "PROVIDER_UNAVAILABLE")
    /// `failed`: a pending order reached a poller whose provider is not polled.
    public static let notPolled = OutcomeErrorCode(rawValue: "NOT_POLLED")
    /// `failed`: a polled order ended undecided, and its provider's polling policy names no code.
    public static let notDecided = OutcomeErrorCode(rawValue: "NOT_DECIDED")
}

// MARK: - Verdicts several providers give

extension OutcomeErrorCode {
    /// `failed`: the provider's (or an authentic callback's) amount or currency is not the order's.
    public static let amountMismatch = OutcomeErrorCode(rawValue: "AMOUNT_MISMATCH")
    /// `failed`, or a refused callback: a reference the provider gives is not the order's.
    public static let referenceMismatch = OutcomeErrorCode(rawValue: "REFERENCE_MISMATCH")

    /// `failed`: the provider refused the request with this HTTP 4xx status and no finer code (HTTP_<status>).
    public static func http(_ status: Int) -> OutcomeErrorCode { OutcomeErrorCode(rawValue: "HTTP_\(status)") }
}

// MARK: - Refused callbacks (`CallbackRejection`)

extension OutcomeErrorCode {
    /// 400: the callback cannot be read (the default reason of `CallbackRejection.malformed`).
    public static let malformed = OutcomeErrorCode(rawValue: "MALFORMED")
    /// 400: a field the callback must carry is missing.
    public static let missingField = OutcomeErrorCode(rawValue: "MISSING_FIELD")
    /// 400: a callback field is ill-formed; also a Trust Payments `failed` verdict (errorcode 30000).
    public static let invalidField = OutcomeErrorCode(rawValue: "INVALID_FIELD")
    /// 400: a field the sender never sends (a notification whose fields could be re-split under its signature).
    public static let unknownField = OutcomeErrorCode(rawValue: "UNKNOWN_FIELD")
    /// 413: the body is larger than the provider's documents ever are.
    public static let tooLarge = OutcomeErrorCode(rawValue: "TOO_LARGE")
    /// 401: the signature does not verify.
    public static let badSignature = OutcomeErrorCode(rawValue: "BAD_SIGNATURE")
    /// 401: the callback carries no signature.
    public static let missingSignature = OutcomeErrorCode(rawValue: "MISSING_SIGNATURE")
    /// 401: the checksum does not verify.
    public static let badChecksum = OutcomeErrorCode(rawValue: "BAD_CHECKSUM")
    /// 401: the callback carries no checksum.
    public static let missingChecksum = OutcomeErrorCode(rawValue: "MISSING_CHECKSUM")
    /// 401: the Authorization header does not match.
    public static let badAuthorization = OutcomeErrorCode(rawValue: "BAD_AUTHORIZATION")
    /// 401: the callback carries no Authorization header.
    public static let missingAuthorization = OutcomeErrorCode(rawValue: "MISSING_AUTHORIZATION")
    /// 400: authentic but outside its validity window (e.g. a JWT `iat` too old).
    public static let stale = OutcomeErrorCode(rawValue: "STALE")
    /// 404: no order of this provider and merchant matches the callback.
    public static let orderNotFound = OutcomeErrorCode(rawValue: "ORDER_NOT_FOUND")
    /// 404: no subscription of the merchant has the reference the callback names.
    public static let subscriptionNotFound = OutcomeErrorCode(rawValue: "SUBSCRIPTION_NOT_FOUND")
    /// 404: a forwarded body names a merchant without this provider's settings.
    public static let unknownMerchant = OutcomeErrorCode(rawValue: "UNKNOWN_MERCHANT")
    /// 503: the ledger did not answer; the provider delivers the callback again.
    public static let ledgerUnavailable = OutcomeErrorCode(rawValue: "LEDGER_UNAVAILABLE")
    /// 429: too many callbacks from one address, or for one order, on a rate-limited route.
    public static let rateLimited = OutcomeErrorCode(rawValue: "RATE_LIMITED")
}

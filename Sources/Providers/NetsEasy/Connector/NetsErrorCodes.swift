import PaypipeCore

/// Nets Easy's outcome and webhook codes; the shared MISSING_AUTHORIZATION / BAD_AUTHORIZATION,
/// INVALID_FIELD, TOO_LARGE, AMOUNT_MISMATCH and REFERENCE_MISMATCH are the catalogue's own.
extension OutcomeErrorCode {
    // MARK: Verdicts

    /// `failed`: Nets rejected the request (HTTP 400), with its validation messages.
    public static let netsBadRequest = OutcomeErrorCode(rawValue: "NETS_BAD_REQUEST")
    /// `failed`: Nets refused the merchant's secret key (HTTP 401).
    public static let netsUnauthorized = OutcomeErrorCode(rawValue: "NETS_UNAUTHORIZED")
    /// `failed`: Nets declined the payment or charge (HTTP 402) and gave no usable `code`.
    public static let netsDeclined = OutcomeErrorCode(rawValue: "NETS_DECLINED")
    /// `failed`: Nets declined the payment or charge (HTTP 402) with this `code` (NETS_DECLINED_<code>),
    /// which says whether it may be retried (`NetsDeclines`).
    public static func netsDeclined(_ code: String) -> OutcomeErrorCode { OutcomeErrorCode(rawValue: "NETS_DECLINED_\(code)") }
    /// `failed`: Nets refused access to the resource (HTTP 403).
    public static let netsForbidden = OutcomeErrorCode(rawValue: "NETS_FORBIDDEN")
    /// `failed`: Nets does not know the payment or subscription (HTTP 404).
    public static let netsNotFound = OutcomeErrorCode(rawValue: "NETS_NOT_FOUND")
    /// `failed`: a 2xx answer without what it must carry (payment object, subscription id, integer fields).
    public static let netsInvalidResponse = OutcomeErrorCode(rawValue: "NETS_INVALID_RESPONSE")
    /// `failed`: the payment has no subscription (checkout not completed, or not a subscription payment).
    public static let netsSubscriptionNotFound = OutcomeErrorCode(rawValue: "NETS_SUBSCRIPTION_NOT_FOUND")
    /// `failed`: a response to a request this module did not build, or whose follow-up it cannot derive.
    public static let netsUnknownRequest = OutcomeErrorCode(rawValue: "NETS_UNKNOWN_REQUEST")
    /// `failed`: the checkout was terminated with nothing taken (the customer abandoned it).
    public static let netsCheckoutAbandoned = OutcomeErrorCode(rawValue: "NETS_CHECKOUT_ABANDONED")
    /// `failed`: an authentic `payment.reservation.failed` webhook.
    public static let netsReservationFailed = OutcomeErrorCode(rawValue: "NETS_RESERVATION_FAILED")

    /// `failed`: Nets shows the refund Failed, Cancelled or Expired: nothing was given back.
    public static let netsRefundFailed = OutcomeErrorCode(rawValue: "NETS_REFUND_FAILED")

    /// `failed`: Nets answered this 4xx (410-499) or unexpected status to a request that cannot have taken effect (NETS_HTTP_<status>).
    public static func netsHTTP(_ status: Int) -> OutcomeErrorCode { OutcomeErrorCode(rawValue: "NETS_HTTP_\(status)") }

    // MARK: Refused webhooks

    /// 401: the merchant has no webhook secret, so nothing can be authentic.
    public static let webhookNotConfigured = OutcomeErrorCode(rawValue: "WEBHOOK_NOT_CONFIGURED")
    /// 400: the body is not a JSON object.
    public static let invalidJSON = OutcomeErrorCode(rawValue: "INVALID_JSON")
    /// 503: the completed checkout's subscription could not be read from Nets; Nets delivers the webhook again.
    public static let netsUnavailable = OutcomeErrorCode(rawValue: "NETS_UNAVAILABLE")
    /// 409: an authentic subscription charge webhook that the payment read back from Nets does
    /// not bear out (another subscription's payment, no such payment, or a failure of a payment
    /// Nets shows charged); nothing is recorded.
    public static let netsWebhookUnconfirmed = OutcomeErrorCode(rawValue: "NETS_WEBHOOK_UNCONFIRMED")
}

import PaypipeCore

/// A subscription charge's webhook is believed only as far as Nets itself shows it: the
/// charge's payment, read back (`GET /v1/payments/{paymentId}`), must belong to the subscription
/// the webhook names, and hold the charge it reports (a charge created) or none (a charge that
/// failed). The webhook's `Authorization` is a fixed value that travels in every payment
/// creation, so it proves little on its own. The amount is the one Nets shows, and the event is
/// keyed by the charge (or the failed payment), not by the delivery's id, so a replay under a
/// new id is the same event.
///
/// The payment's shape: Nets' payment API reference (Retrieve payment: `payment.charges[]` with
/// `chargeId`, `amount`, `created`, `orderItems`; `payment.subscription.id`), as in
/// Nets-eCom/php-payment-sdk `tests/Fixture/RetrievePaymentResultFixture.php`.
enum NetsRenewalConfirmation {
    /// What a read-back payment says about one subscription charge.
    struct ChargedPayment: Equatable {
        var subscriptionId: String?
        var currency: String?
        /// chargeId → amount.
        var charges: [String: Int64]

        /// nil for an answer that is not a payment.
        init?(_ response: HTTPResponseSpec) {
            guard response.status == 200, let payment = (try? JSONValue.parse(response.body))?["payment"], case .object = payment else {
                return nil
            }
            subscriptionId = payment["subscription"]?["id"]?.stringValue
            currency = payment["orderDetails"]?["currency"]?.stringValue
            var charges: [String: Int64] = [:]
            for charge in payment["charges"]?.arrayValue ?? [] {
                guard let id = charge["chargeId"]?.stringValue, let amount = charge["amount"]?.integerValue else { return nil }
                charges[id] = amount
            }
            self.charges = charges
        }
    }

    /// The renewal event `event` reports, as `payment` (its payment read back) confirms it.
    /// `event` is a charge event of a subscription (`subscriptionId` set); 409 when Nets shows
    /// otherwise, 503 (deliver again later) when Nets does not show the charge yet.
    static func renewal(
        _ event: NetsWebhookEvent, subscriptionId: String, merchant: String, payment: ChargedPayment
    ) throws(CallbackRejection) -> SubscriptionEvent {
        func unconfirmed(_ detail: String) -> CallbackRejection {
            CallbackRejection(status: 409, code: .netsWebhookUnconfirmed, "webhook \(event.event) of payment \(event.paymentId): \(detail)")
        }
        guard payment.subscriptionId == subscriptionId else {
            throw unconfirmed("Nets shows the payment under another subscription, or none")
        }
        switch event.kind {
        case .chargeCreated:
            guard let chargeId = event.chargeId, !chargeId.isEmpty else { throw .malformed("a charge webhook without data.chargeId") }
            guard let amount = payment.charges[chargeId] else {
                throw CallbackRejection(
                    status: 503, code: .netsUnavailable,
                    "Nets does not show charge \(chargeId) of payment \(event.paymentId) yet; deliver again later")
            }
            return SubscriptionEvent(
                merchant: merchant, provider: .nets, subscription: subscriptionId, dedupeKey: "charge|\(chargeId)", kind: .renewalSucceeded,
                amount: amount, currency: payment.currency ?? event.currency, providerReference: chargeId)
        case .chargeFailed, .reservationFailed:
            guard payment.charges.isEmpty else { throw unconfirmed("Nets shows a charge of the payment the webhook says failed") }
            return SubscriptionEvent(
                merchant: merchant, provider: .nets, subscription: subscriptionId, dedupeKey: "failed|\(event.paymentId)", kind: .renewalFailed,
                amount: event.amount, currency: payment.currency ?? event.currency, providerReference: event.chargeId ?? event.paymentId,
                reason: event.errorCode ?? event.errorMessage ?? "failed")
        default:
            throw unconfirmed("not a charge event")
        }
    }
}

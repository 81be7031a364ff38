import NetsEasy
import PaypipeCore
import Sandbox

/// Charging a checkout's reservation and refunding charges, as Nexi's payment API documents
/// them (PROVIDERS-MONEY §2: [NX-CHG], [NX-REF], [SNEC IChargeClient.cs, RefundInfo.cs]): a
/// charge takes at most what the checkout reserved less what is already charged ("no
/// over-charge"); a refund gives back at most what its charge took less what its other refunds
/// (those not failed) give back. Both answer only their new id.
extension NetsSandbox {
    /// `POST /v1/payments/{paymentId}/charges` `{amount}`: 201 `{chargeId}`; 404 for an unknown
    /// payment; 400 before the checkout completed, or beyond the reservation's rest.
    package mutating func chargeReservation(_ body: JSONValue, paymentId: String, key: String, now: Int64) -> HTTPResponseSpec {
        guard var payment = payments[paymentId] else { return HTTPResponseSpec(status: 404) }
        let amount = body["amount"]?.integerValue ?? 0
        var errors = ValidationErrors()
        let left = payment.reservedAmount - payment.chargedAmount
        if payment.subscriptionId == nil {
            errors.add("paymentId", "The payment \(paymentId) has no reservation to charge: its checkout is not completed.")
        } else if amount > left {
            errors.add("amount", "The amount \(amount) exceeds the \(left) left of the reserved amount \(payment.reservedAmount).")
        }
        guard errors.isEmpty else { return errors.response }
        let charge = PaymentCharge(chargeId: NetsSandbox.derivedId("payment-charge", key), amount: amount, createdEpochSeconds: now)
        payment.charges.append(charge)
        payments[paymentId] = payment
        return NetsSandbox.json(201, ["chargeId": .string(charge.chargeId)])
    }

    /// `POST /v1/charges/{chargeId}/refunds` `{amount}`: 201 `{refundId}`; 404 for an unknown
    /// charge; 400 beyond what the charge has left.
    package mutating func refund(_ body: JSONValue, chargeId: String, key: String, now: Int64) -> HTTPResponseSpec {
        guard let (paymentId, charged) = charge(chargeId) else { return HTTPResponseSpec(status: 404) }
        let amount = body["amount"]?.integerValue ?? 0
        let held = refunds.values.filter { $0.chargeId == chargeId && $0.holdsAmount }.reduce(Int64(0)) { $0 + $1.amount }
        guard amount <= charged - held else {
            var errors = ValidationErrors()
            errors.add("amount", "The amount \(amount) exceeds the \(charged - held) left to refund of charge \(chargeId) (charged \(charged)).")
            return errors.response
        }
        let refundId = NetsSandbox.derivedId("refund", key)
        let state = failNextRefund ? "Failed" : "Completed"
        failNextRefund = false
        refunds[refundId] = Refund(
            refundId: refundId, chargeId: chargeId, paymentId: paymentId, amount: amount, state: state, createdEpochSeconds: now)
        return NetsSandbox.json(201, ["refundId": .string(refundId)])
    }

    /// The payment a charge belongs to and the amount it took: a checkout's charge or a
    /// subscription charge's.
    func charge(_ chargeId: String) -> (paymentId: String, amount: Int64)? {
        for (paymentId, payment) in payments {
            if let charge = payment.charges.first(where: { $0.chargeId == chargeId }) { return (paymentId, charge.amount) }
        }
        for (paymentId, payment) in chargePayments where payment.chargeId == chargeId { return (paymentId, payment.amount) }
        return nil
    }

    /// What the payment's refunds give back, failed ones aside.
    func refunded(paymentId: String) -> Int64 {
        refunds.values.filter { $0.paymentId == paymentId && $0.state == "Completed" }.reduce(0) { $0 + $1.amount }
    }

    /// The payment's `refunds[]` as Nets' Retrieve payment shows them.
    func refundsJSON(paymentId: String) -> JSONValue {
        .array(
            refunds.values.filter { $0.paymentId == paymentId }.sorted { $0.refundId < $1.refundId }.map { refund in
                [
                    "refundId": .string(refund.refundId), "amount": .integer(refund.amount), "state": .string(refund.state),
                    "lastUpdated": .string(NetsSandbox.secondsTimestamp(milliseconds: refund.createdEpochSeconds * 1000)),
                ]
            })
    }

    /// Everything the subscription's payments moved: its checkout payment's charges, its
    /// subscription charges, and the completed refunds of both.
    public func totals(subscriptionId: String) -> Totals {
        var totals = Totals()
        var paymentIds: Set<String> = []
        if let paymentId = subscriptions[subscriptionId], let payment = payments[paymentId] {
            paymentIds.insert(paymentId)
            totals.charged += payment.chargedAmount
            totals.charges += payment.charges.count
        }
        for (paymentId, payment) in chargePayments where payment.subscriptionId == subscriptionId && payment.chargeId != nil {
            paymentIds.insert(paymentId)
            totals.charged += payment.amount
            totals.charges += 1
        }
        for refund in refunds.values where paymentIds.contains(refund.paymentId) && refund.state == "Completed" {
            totals.refunded += refund.amount
            totals.refunds += 1
        }
        return totals
    }

    /// The subscriptions the sandbox knows.
    public var subscriptionIds: [String] { subscriptions.keys.sorted() }
}

/// Money a succeeded order captured, as its provider names it: what a refund may give back.
public struct Capture: Sendable, Equatable {
    /// The provider's reference of the captured payment (a Nets chargeId, a Trust Payments
    /// transactionreference, a PhonePe transaction id, a Viva transaction id).
    public var reference: String
    /// Minor units.
    public var amount: Int64
    public var currency: String

    public init(reference: String, amount: Int64, currency: String) {
        self.reference = reference
        self.amount = amount
        self.currency = currency
    }
}

/// What a refund order gives back: part or all of one capture of an earlier order of the same
/// merchant and provider. Upstream names both, so the ledger can check the capture belongs to
/// that order and keep every refund of it within what it captured.
public struct RefundTarget: Sendable, Equatable {
    /// The name every provider's refund operation goes by, which lets the ledger pass over
    /// every other outcome without reading its refunds.
    public static let operationName = "refund"

    /// `params.refundOf`: the order (upstream's, or a scheduled cycle's) whose money is refunded.
    public var originalOrderId: String
    /// The provider's reference of the capture refunded (its own parameter name per provider).
    public var captureReference: String

    public init(originalOrderId: String, captureReference: String) {
        self.originalOrderId = originalOrderId
        self.captureReference = captureReference
    }
}

/// A provider's refunds, as the ledger sees them: it admits a refund order only when its
/// target is a capture of a succeeded order and the amounts refunded of that capture, this one
/// included, stay within the amount captured; a refund that failed gives its amount back.
public protocol Refunding: Sendable {
    /// The capture a refund order gives back; nil when `order` is not a refund.
    func refundTarget(of order: Order) -> RefundTarget?
    /// The captures a succeeded outcome of `order` reports; empty when it captured nothing.
    func captures(of order: Order, outcome: Outcome) -> [Capture]
    /// Whether the provider takes a subscription's renewals by itself, reported only as
    /// `renewal.succeeded` events (no order of paypipe's made them): such a renewal is refunded
    /// by naming the order that opened the subscription and the renewal's `providerReference`.
    var refundsRenewalsThroughTheFirstOrder: Bool { get }
}

extension Refunding {
    public var refundsRenewalsThroughTheFirstOrder: Bool { false }
}

extension ParamReader {
    /// `params.refundOf`: the orderId of the order whose money a refund gives back.
    package func refundOf() throws(Rejection) -> String {
        let orderId = try string("refundOf")
        guard Order.isValidOrderId(orderId) else { throw invalid("refundOf", "must be an orderId (1-64 characters of [A-Za-z0-9._:-])") }
        return orderId
    }
}

import PaypipeCore

/// One authentic Nets webhook delivery, parsed:
/// `{id, event, timestamp, merchantId, data: {paymentId, ...}}`.
public struct NetsWebhookEvent: Sendable, Equatable {
    public enum Kind: Sendable, Equatable, Hashable {
        case checkoutCompleted, reservationCreated, reservationFailed, chargeCreated, chargeFailed
        /// Any other event name: parsed and treated as informational.
        case other(String)

        public init(eventName: String) {
            switch eventName {
            case "payment.checkout.completed": self = .checkoutCompleted
            case "payment.reservation.created", "payment.reservation.created.v2": self = .reservationCreated
            case "payment.reservation.failed": self = .reservationFailed
            case "payment.charge.created", "payment.charge.created.v2": self = .chargeCreated
            case "payment.charge.failed", "payment.charge.failed.v2": self = .chargeFailed
            default: self = .other(eventName)
            }
        }

        /// The canonical name (the one registered or emitted by the sandbox).
        public var eventName: String {
            switch self {
            case .checkoutCompleted: "payment.checkout.completed"
            case .reservationCreated: "payment.reservation.created"
            case .reservationFailed: "payment.reservation.failed"
            case .chargeCreated: "payment.charge.created.v2"
            case .chargeFailed: "payment.charge.failed"
            case .other(let name): name
            }
        }
    }

    /// Nets' event id: the dedupe key (Nets redelivers until it gets a 200).
    public let id: String
    /// The event name exactly as received.
    public let event: String
    public let kind: Kind
    public let timestamp: String?
    /// Nets sends an integer; kept as text so either form is accepted.
    public let merchantId: String?
    public let paymentId: String
    public let chargeId: String?
    /// `data.order.amount.amount`, or `data.amount.amount` for reservation and charge events.
    public let amount: Int64?
    public let currency: String?
    /// `data.order.reference`, when present.
    public let reference: String?
    /// `data.error.message` of a failed reservation or charge, when present.
    public let errorMessage: String?
    /// `data.subscriptionId` of a charge event (v2): set for a subscription's charge, empty or
    /// absent for any other payment's.
    public var subscriptionId: String?
    /// `data.error.code` of a failed reservation or charge, when present.
    public var errorCode: String?

    public init(
        id: String, event: String, timestamp: String? = nil, merchantId: String? = nil, paymentId: String,
        chargeId: String? = nil, amount: Int64? = nil, currency: String? = nil, reference: String? = nil,
        errorMessage: String? = nil
    ) {
        self.id = id
        self.event = event
        self.kind = Kind(eventName: event)
        self.timestamp = timestamp
        self.merchantId = merchantId
        self.paymentId = paymentId
        self.chargeId = chargeId
        self.amount = amount
        self.currency = currency
        self.reference = reference
        self.errorMessage = errorMessage
    }
}

import NetsEasy
import PaypipeCore
import Sandbox

/// The facts a webhook delivery reports.
public struct NetsWebhookContent: Sendable, Equatable {
    public var kind: NetsWebhookEvent.Kind
    public var eventId: String
    public var paymentId: String
    public var amount: Int64
    public var currency: String
    public var reference: String?
    public var chargeId: String?
    public var merchantId: Int64
    public var timestampMilliseconds: Int64
    /// A subscription charge's `data.subscriptionId`.
    public var subscriptionId: String?
    /// The event name as registered (e.g. `payment.charge.failed.v2`); nil: the kind's own.
    public var eventName: String?
    /// The order's items, sent as `data.order.orderItems` (checkout completed) or
    /// `data.orderItems` (reservation failed, charge events), as Nets' examples show; nil: none.
    public var orderItems: [JSONValue]?

    public init(
        kind: NetsWebhookEvent.Kind, eventId: String, paymentId: String, amount: Int64, currency: String,
        reference: String? = nil, chargeId: String? = nil, merchantId: Int64 = 100_017_120, timestampMilliseconds: Int64
    ) {
        self.kind = kind
        self.eventId = eventId
        self.paymentId = paymentId
        self.amount = amount
        self.currency = currency
        self.reference = reference
        self.chargeId = chargeId
        self.merchantId = merchantId
        self.timestampMilliseconds = timestampMilliseconds
    }
}

/// An HTTP POST Nets would make to a webhook URL.
public struct NetsWebhookDelivery: Sendable, Equatable {
    public var url: String?
    public var headers: [HTTPHeader]
    public var body: [UInt8]

    public var authorization: String? { headers.first { $0.name.lowercased() == "authorization" }?.value }
}

/// Deliberate faults for testing the callback validator.
public enum NetsWebhookTampering: Sendable, Equatable {
    case none
    /// Send this Authorization value instead of the registered one (a forgery).
    case authorization(String)
    /// Report this amount instead of the real one (authentic but inconsistent).
    case amount(Int64)
    /// Report this order reference instead of the real one.
    case reference(String)
}

extension NetsSandbox {
    /// The events whose envelope names the merchant `merchantNumber` instead of `merchantId`, as
    /// Nets' examples of them do (php-payment-sdk `tests/Model/Webhook/payloads/`
    /// `payment.charge.created.v2.json`, `payment.reservation.created.v2.json`; Nexi's reference
    /// for `payment.charge.failed.v2`). Other events, `payment.refund.initiated.v2` included, carry
    /// `merchantId`.
    package static let merchantNumberEvents: Set<String> = [
        "payment.charge.created.v2", "payment.charge.failed.v2", "payment.reservation.created.v2",
    ]

    /// The `error` of every failure Nets' examples show (`payment.reservation.failed`,
    /// `payment.charge.failed`, `payment.charge.failed.v2`), also the body of a declined charge's
    /// 402 (`{message, code, source}`, Nets' payment API reference).
    package static let declineError = declineError(code: declineCode)
    /// The code of Nets' examples, which a declined charge carries unless told another.
    public static let declineCode = "911"

    /// That error with another `code` (a decline the sandbox was told to give, `declineNext`).
    package static func declineError(code: String) -> JSONValue {
        ["code": .string(code), "message": "Error occurred", "source": "Internal"]
    }

    /// Nets' webhook timestamp form, `2025-06-13T05:05:39.3102+00:00`: an offset, not `Z`, and
    /// four fraction digits (every example in php-payment-sdk `tests/Model/Webhook/payloads/`).
    /// The sandbox stamps UTC, as Nets' 2025 examples are.
    package static func webhookTimestamp(milliseconds: Int64) -> String {
        // `Timestamp.iso8601` always ends `.mmmZ`.
        String(Timestamp.iso8601(milliseconds: milliseconds).dropLast()) + "0+00:00"
    }

    /// Builds a delivery: body `{id, event, timestamp, merchantId | merchantNumber, data: {paymentId, ...}}`
    /// with the data Nets puts in each event (checkout: `data.order`; reservation and charge:
    /// `data.amount`; failures: `data.error`; charge events and failed reservations:
    /// `data.orderItems`), and `Authorization` = the registered value.
    public static func webhookDelivery(
        _ content: NetsWebhookContent, authorization: String, url: String? = nil, tampering: NetsWebhookTampering = .none
    ) -> NetsWebhookDelivery {
        var amount = content.amount
        var reference = content.reference
        var sentAuthorization = authorization
        switch tampering {
        case .none: break
        case .authorization(let value): sentAuthorization = value
        case .amount(let value): amount = value
        case .reference(let value): reference = value
        }
        let money: JSONValue = ["amount": .integer(amount), "currency": .string(content.currency)]
        let items = content.orderItems.map { JSONValue.array($0) }
        var data: [String: JSONValue] = ["paymentId": .string(content.paymentId)]
        switch content.kind {
        case .checkoutCompleted:
            var order: [String: JSONValue] = ["amount": money]
            if let reference { order["reference"] = .string(reference) }
            if let items { order["orderItems"] = items }
            data["order"] = .object(order)
        case .reservationCreated:
            data["amount"] = money
            data["paymentMethod"] = "Visa"
            data["paymentType"] = "CARD"
        case .reservationFailed, .chargeFailed:
            data["amount"] = money
            data["error"] = declineError
            if let items { data["orderItems"] = items }
        case .chargeCreated:
            data["amount"] = money
            data["chargeId"] = .string(content.chargeId ?? derivedId("charge", content.eventId))
            // Both payment.charge.created.v2 examples carry them, with or without a subscription.
            data["paymentMethod"] = "Visa"
            data["paymentType"] = "CARD"
            if let items { data["orderItems"] = items }
        case .other:
            break
        }
        if let chargeId = content.chargeId { data["chargeId"] = .string(chargeId) }
        if let subscriptionId = content.subscriptionId {
            data["subscriptionId"] = .string(subscriptionId)
            data["paymentMethod"] = "Visa"
            data["paymentType"] = "CARD"
        }
        let eventName = content.eventName ?? content.kind.eventName
        var envelope: [String: JSONValue] = [
            "id": .string(content.eventId), "event": .string(eventName),
            "timestamp": .string(webhookTimestamp(milliseconds: content.timestampMilliseconds)), "data": .object(data),
        ]
        envelope[merchantNumberEvents.contains(eventName) ? "merchantNumber" : "merchantId"] = .integer(content.merchantId)
        let body = JSONValue.object(envelope)
        return NetsWebhookDelivery(
            url: url,
            headers: [HTTPHeader("Content-Type", "application/json"), HTTPHeader("Authorization", sentAuthorization)],
            body: body.bytes)
    }

    /// The same, with the merchant's configured webhook secret as the registered value.
    public static func webhookDelivery(
        _ content: NetsWebhookContent, config: NetsConfig, url: String? = nil, tampering: NetsWebhookTampering = .none
    ) -> NetsWebhookDelivery {
        webhookDelivery(content, authorization: config.webhookAuthorization.reveal(), url: url, tampering: tampering)
    }
}

import PaypipeCore

/// What an authentic event means for its order.
public enum NetsWebhookEffect: Sendable, Equatable {
    /// End the order with this verdict (succeeded, failed, or AMOUNT_MISMATCH / REFERENCE_MISMATCH).
    case apply(ProviderVerdict)
    /// Informational (reservation created, charge events, unknown events): answer 200, no change.
    case noChange(reason: String)
}

/// Nets webhooks (callback validator): the `Authorization` header carries the value
/// registered with the payment (`config.webhookAuthorization`); Nets redelivers until it gets
/// a 200, so the validator dedupes on `event.id`.
public enum NetsWebhook {
    public static let maxBodyBytes = 64 * 1024

    /// Verifies and parses a delivery given its headers. Two `Authorization` headers are
    /// refused: which one a proxy honours is not ours to guess.
    ///
    /// Throws a forged rejection (401, `isForged`: bad or missing Authorization; change nothing,
    /// another merchant's secret may still match) or a malformed one (400/413: authentic sender
    /// but unreadable body; change nothing).
    public static func verify(headers: [HTTPHeader], body: [UInt8], config: NetsConfig) throws(CallbackRejection) -> NetsWebhookEvent {
        let values = headers.filter { $0.name.lowercased() == "authorization" }
        guard values.count <= 1 else {
            throw .forged(.badAuthorization, "more than one Authorization header")
        }
        return try verify(authorization: values.first?.value, body: body, config: config)
    }

    /// Verifies the Authorization value in constant time, then parses the body. The body is not
    /// read at all for a forged delivery.
    public static func verify(authorization: String?, body: [UInt8], config: NetsConfig) throws(CallbackRejection) -> NetsWebhookEvent {
        guard !config.webhookAuthorization.isEmpty else {
            throw .forged(
                .webhookNotConfigured, "no nets webhookAuthorization is configured for this merchant")
        }
        guard let authorization, !authorization.isEmpty else {
            throw .forged(.missingAuthorization, "the Authorization header is missing")
        }
        guard config.webhookAuthorization.matches(Array(authorization.utf8)) else {
            throw .forged(.badAuthorization, "the Authorization header does not match")
        }
        return try parse(body)
    }

    /// Parses `{id, event, timestamp, merchantId, data: {paymentId, ...}}` (no authentication).
    public static func parse(_ body: [UInt8]) throws(CallbackRejection) -> NetsWebhookEvent {
        func invalid(_ message: String) -> CallbackRejection {
            CallbackRejection.malformed(message, code: .invalidField)
        }
        guard body.count <= maxBodyBytes else {
            throw .tooLarge("body exceeds \(maxBodyBytes) bytes")
        }
        guard let root = try? JSONValue.parse(body), root.objectValue != nil else {
            throw .malformed("body is not a JSON object", code: .invalidJSON)
        }
        guard let id = root["id"]?.stringValue, (1...128).contains(id.unicodeScalars.count) else {
            throw invalid("id must be a string of 1-128 characters")
        }
        guard let event = root["event"]?.stringValue, (1...128).contains(event.unicodeScalars.count) else {
            throw invalid("event must be a string of 1-128 characters")
        }
        guard let data = root["data"], data.objectValue != nil else { throw invalid("data must be an object") }
        guard let paymentId = data["paymentId"]?.stringValue, NetsIdentifiers.isSafeId(paymentId) else {
            throw invalid("data.paymentId must be 1-64 characters of [A-Za-z0-9_-]")
        }
        let merchantId: String? =
            switch root["merchantId"] {
            case .integer(let number)?: String(number)
            case .string(let text)?: String(text.prefix(64))
            default: nil
            }
        // Checkout events carry the order (`data.order.amount.amount`); reservation and charge
        // events carry `data.amount.amount`.
        let amountObject = data["order"]?["amount"] ?? data["amount"]
        var amount: Int64?
        if let value = amountObject?["amount"], value != .null {
            // Nexi's own checkout.completed example quotes it ("10000"); other events give a number.
            switch value {
            case .integer(let number): amount = number
            case .string(let text) where (1...18).contains(text.utf8.count) && text.utf8.allSatisfy({ (48...57).contains($0) }): amount = Int64(text)
            default: throw invalid("the event amount must be an integer in minor units")
            }
        }
        let currency = amountObject?["currency"]?.stringValue
        let reference = data["order"]?["reference"]?.stringValue
        var subscriptionId: String?
        if let value = data["subscriptionId"]?.stringValue, !value.isEmpty {
            guard NetsIdentifiers.isSafeId(value) else { throw invalid("data.subscriptionId must be 1-64 characters of [A-Za-z0-9_-]") }
            subscriptionId = value
        }
        var parsed = NetsWebhookEvent(
            id: id, event: event, timestamp: root["timestamp"]?.stringValue.map { String($0.prefix(64)) },
            merchantId: merchantId, paymentId: paymentId, chargeId: data["chargeId"]?.stringValue.map { String($0.prefix(128)) },
            amount: amount, currency: currency.map { String($0.prefix(8)) }, reference: reference.map { String($0.prefix(256)) },
            errorMessage: data["error"]?["message"]?.stringValue.map { NetsPayments.clip($0) })
        parsed.subscriptionId = subscriptionId
        parsed.errorCode = (data["error"]?["code"]?.stringValue ?? data["error"]?["code"]?.integerValue.map(String.init)).map {
            String($0.prefix(32))
        }
        return parsed
    }

    /// Checks an event against the order it belongs to (found by paymentId) and says what
    /// changes. Any amount, currency or reference the event carries must equal the order's:
    /// a difference ends the order `failed` with AMOUNT_MISMATCH / REFERENCE_MISMATCH for a
    /// person to review (and the delivery is still answered 200). Otherwise:
    /// checkout completed → succeeded; reservation failed → failed; others → no change.
    public static func interpret(_ event: NetsWebhookEvent, for order: Order) -> NetsWebhookEffect {
        if let amount = event.amount, let expected = order.amount, amount != expected {
            return .apply(.failed(code: .amountMismatch, message: "webhook \(event.event) amount \(amount) != order amount \(expected)"))
        }
        if let currency = event.currency, let expected = order.currency, currency != expected {
            return .apply(.failed(code: .amountMismatch, message: "webhook \(event.event) currency \(currency) != order currency \(expected)"))
        }
        if let reference = event.reference, let expected = order.params["reference"]?.stringValue, reference != expected {
            return .apply(
                .failed(
                    code: .referenceMismatch,
                    message: NetsPayments.clip("webhook \(event.event) reference \"\(reference.prefix(128))\" != order reference \"\(expected)\"")))
        }
        switch event.kind {
        case .checkoutCompleted:
            var result: [String: JSONValue] = ["paymentId": .string(event.paymentId)]
            if let amount = event.amount { result["amount"] = .integer(amount) }
            return .apply(.succeeded(result))
        case .reservationFailed:
            return .apply(
                .failed(code: .netsReservationFailed, message: event.errorMessage.map { "reservation failed: \($0)" } ?? "reservation failed"))
        case .reservationCreated, .chargeCreated, .chargeFailed, .other:
            return .noChange(reason: "\(event.event) is informational for nets \(order.operation.rawValue)")
        }
    }
}

import NetsEasy
import PaypipeCore
import Sandbox

/// An emulator of Nets' subscription API for demos, tests and benchmarks: a plain value the
/// sandbox executable keeps behind a lock. It checks requests as Nets does (`check`), keeps
/// payments and subscriptions, answers a repeated Idempotency-Key with the first answer, and
/// builds the webhook deliveries Nets would send.
public struct NetsSandbox: Sendable {
    public struct Payment: Sendable, Equatable {
        public var paymentId: String
        public var amount: Int64
        public var currency: String
        public var reference: String?
        public var endDate: String
        public var endEpochSeconds: Int64
        public var interval: Int64
        public var createdEpochSeconds: Int64
        public var webhooks: [Webhook]
        /// Set once the customer completed the hosted page.
        public var subscriptionId: String?
        /// Set when the customer abandoned the checkout (`terminateCheckout`).
        public var terminatedMilliseconds: Int64?
        /// The order's items as created (the fields Nets' webhooks echo as `orderItems`).
        public var items: [JSONValue] = []
        /// `checkout.charge: true`: Nets charges the reservation as the checkout completes.
        public var chargeAtCheckout = false
        /// The charges of the reservation (`POST /v1/payments/{id}/charges`, or at checkout).
        public var charges: [PaymentCharge] = []

        public var chargedAmount: Int64 { charges.reduce(0) { $0 + $1.amount } }
        /// What the completed checkout reserved: the whole order.
        public var reservedAmount: Int64 { subscriptionId == nil ? 0 : amount }
    }

    public struct PaymentCharge: Sendable, Equatable {
        public var chargeId: String
        public var amount: Int64
        public var createdEpochSeconds: Int64
    }

    /// A refund of one charge. Nets settles a refund after it answered it; the sandbox settles
    /// it at once unless told to fail the next one (`failNextRefund`).
    public struct Refund: Sendable, Equatable {
        public var refundId: String
        public var chargeId: String
        public var paymentId: String
        public var amount: Int64
        public var state: String
        public var createdEpochSeconds: Int64

        /// Whether it gives money back (or may still): every state but the failed ones.
        var holdsAmount: Bool { !["Failed", "Cancelled", "Expired"].contains(state) }
    }

    /// Money a subscription moved, as the sandbox recorded it: what tests compare the
    /// pipeline's outcomes with.
    public struct Totals: Sendable, Equatable {
        public var charged: Int64 = 0
        public var charges = 0
        public var refunded: Int64 = 0
        public var refunds = 0
    }

    public struct Webhook: Sendable, Equatable {
        public var eventName: String
        public var url: String
        public var authorization: String
    }

    package struct Replay: Sendable {
        var fingerprint: String
        var response: HTTPResponseSpec
    }

    public var secretKey: Secret
    public var hostedPageBaseURL: String
    public var merchantId: Int64
    public package(set) var payments: [String: Payment] = [:]
    /// subscriptionId → paymentId.
    public private(set) var subscriptions: [String: String] = [:]
    package var replays: [String: Replay] = [:]

    /// A charge made, found again by its Idempotency-Key (`GET …/charges/status`).
    package struct Charge: Sendable {
        var subscriptionId: String
        var paymentId: String
        var chargeId: String
    }

    package var charges: [String: Charge] = [:]
    /// refundId → refund, in the order made.
    public package(set) var refunds: [String: Refund] = [:]
    /// How often each Idempotency-Key of a write was answered again from its first answer: a
    /// repeated charge or refund shows here, and moves no money.
    public package(set) var repeats: [String: Int] = [:]
    /// The next refund request ends Failed (a sandbox control, for tests).
    public var failNextRefund = false

    /// The payment a subscription charge makes in Nets (one per charge request): its charge
    /// when the card paid, none when it was declined.
    package struct ChargePayment: Sendable {
        var subscriptionId: String
        var amount: Int64
        var currency: String
        var chargeId: String?
        var createdEpochSeconds: Int64
        var items: [JSONValue]
    }

    /// paymentId → the subscription charge's payment, for `GET /v1/payments/{paymentId}`.
    package var chargePayments: [String: ChargePayment] = [:]
    /// Subscriptions whose next charge the card refuses (`declineNextCharge`).
    /// The `code` each one's 402 carries.
    public private(set) var declining: [String: String] = [:]
    /// Webhook deliveries the last requests made, for the emulator to send (`takeDeliveries`).
    package var outbox: [NetsWebhookDelivery] = []

    public init(secretKey: Secret, hostedPageBaseURL: String = "https://test.checkout.dibspayment.eu", merchantId: Int64 = 100_017_120) {
        self.secretKey = secretKey
        self.hostedPageBaseURL = hostedPageBaseURL
        self.merchantId = merchantId
    }

    /// Answers one request as Nets would. `now` is epoch seconds.
    public mutating func handle(_ request: HTTPRequestSpec, now: Int64) -> HTTPResponseSpec {
        if let refusal = NetsSandbox.check(request, secretKey: secretKey, now: now) { return refusal }
        guard let kind = NetsRequestKind(request) else { return HTTPResponseSpec(status: 404) }
        let trailing =
            switch kind {
            case .chargeSubscription, .terminatePayment, .chargePayment, .refundCharge: 1
            case .chargeStatus: 2
            default: 0
            }
        let id = NetsRequestKind.pathSegments(request.url).dropLast(trailing).last.map(String.init) ?? ""
        switch kind {
        case .fetchPayment: return paymentResponse(id)
        case .fetchSubscription: return subscriptionResponse(id)
        case .chargeStatus: return chargeStatusResponse(subscriptionId: id, key: request.header("Idempotency-Key"))
        case .terminatePayment: return terminate(paymentId: id, now: now)
        case .createPayment, .chargeSubscription, .chargePayment, .refundCharge:
            // `check` guarantees a valid key and a JSON object body for writes.
            let key = request.header("Idempotency-Key") ?? ""
            let fingerprint = Digest.sha256Hex(Array("\(request.method.rawValue) \(NetsPayments.pathOnly(request.url))\n".utf8) + request.body)
            if let replay = replays[key] {
                guard replay.fingerprint == fingerprint else {
                    var errors = ValidationErrors()
                    errors.add("Idempotency-Key", "The Idempotency-Key was already used for a different request.")
                    return errors.response
                }
                repeats[key, default: 0] += 1
                return replay.response
            }
            let body = (try? JSONValue.parse(request.body)) ?? .null
            let response =
                switch kind {
                case .createPayment: create(body, key: key, now: now)
                case .chargePayment: chargeReservation(body, paymentId: id, key: key, now: now)
                case .refundCharge: refund(body, chargeId: id, key: key, now: now)
                default: charge(body, subscriptionId: id, key: key, now: now)
                }
            if (200...299).contains(response.status) { replays[key] = Replay(fingerprint: fingerprint, response: response) }
            return response
        }
    }

    package mutating func create(_ body: JSONValue, key: String, now: Int64) -> HTTPResponseSpec {
        let paymentId = NetsSandbox.derivedId("payment", key)
        let order = body["order"]
        let endDate = body["subscription"]?["endDate"]?.stringValue ?? ""
        let hooks = NetsSandbox.webhooks(in: body)
        payments[paymentId] = Payment(
            paymentId: paymentId, amount: order?["amount"]?.integerValue ?? 0, currency: order?["currency"]?.stringValue ?? "",
            reference: order?["reference"]?.stringValue, endDate: endDate,
            endEpochSeconds: NetsEndDate(iso8601: endDate)?.epochSeconds ?? 0,
            interval: body["subscription"]?["interval"]?.integerValue ?? 0, createdEpochSeconds: now, webhooks: hooks,
            items: NetsSandbox.orderItems(order), chargeAtCheckout: body["checkout"]?["charge"]?.boolValue == true)
        let checkoutKey = NetsSandbox.derivedId("checkout", paymentId)
        return NetsSandbox.json(
            201,
            [
                "paymentId": .string(paymentId),
                "hostedPaymentPageUrl": .string("\(hostedPageBaseURL)/hostedpaymentpage/?checkoutKey=\(checkoutKey)&pid=\(paymentId)"),
            ])
    }

    package mutating func charge(_ body: JSONValue, subscriptionId: String, key: String, now: Int64) -> HTTPResponseSpec {
        guard let paymentId = subscriptions[subscriptionId], let payment = payments[paymentId] else {
            return HTTPResponseSpec(status: 404)
        }
        guard now < payment.endEpochSeconds else {
            var errors = ValidationErrors()
            errors.add("subscriptionId", "The subscription ended at \(payment.endDate).")
            return errors.response
        }
        let charge = Charge(
            subscriptionId: subscriptionId, paymentId: NetsSandbox.derivedId("charge-payment", key), chargeId: NetsSandbox.derivedId("charge", key))
        let amount = body["order"]?["amount"]?.integerValue ?? payment.amount
        let currency = body["order"]?["currency"]?.stringValue ?? payment.currency
        let chargedItems = NetsSandbox.orderItems(body["order"])
        let items = chargedItems.isEmpty ? payment.items : chargedItems
        // The webhooks the subscription's payment registered, and those of this charge request.
        let hooks = payment.webhooks + NetsSandbox.webhooks(in: body)
        let declineCode = declining.removeValue(forKey: subscriptionId)
        let declined = declineCode != nil
        chargePayments[charge.paymentId] = ChargePayment(
            subscriptionId: subscriptionId, amount: amount, currency: currency, chargeId: declined ? nil : charge.chargeId, createdEpochSeconds: now,
            items: items)
        if declined {
            outbox += NetsSandbox.chargeDeliveries(
                .chargeFailed, hooks: hooks, subscriptionId: subscriptionId, paymentId: charge.paymentId, chargeId: charge.chargeId,
                amount: amount, currency: currency, items: items, merchantId: merchantId, timestampMilliseconds: now * 1000)
            // Nets' payment API reference: a declined charge is 402 `{message, code, source}`.
            return NetsSandbox.json(402, NetsSandbox.declineError(code: declineCode ?? NetsSandbox.declineCode))
        }
        charges[key] = charge
        outbox += NetsSandbox.chargeDeliveries(
            .chargeCreated, hooks: hooks, subscriptionId: subscriptionId, paymentId: charge.paymentId, chargeId: charge.chargeId,
            amount: amount, currency: currency, items: items, merchantId: merchantId, timestampMilliseconds: now * 1000)
        // 200, not 201: Nets' payment API reference and php-payment-sdk `SubscriptionApiTest.php`.
        return NetsSandbox.json(200, ["paymentId": .string(charge.paymentId), "chargeId": .string(charge.chargeId)])
    }

    /// The card refuses the subscription's next charge with `code` (a sandbox control, for
    /// tests and demos; Nexi's decline codes, e.g. 51 insufficient funds, 41 lost card).
    public mutating func declineNextCharge(subscriptionId: String, code: String = NetsSandbox.declineCode) -> Bool {
        guard subscriptions[subscriptionId] != nil else { return false }
        declining[subscriptionId] = code
        return true
    }

    /// The deliveries the requests so far made, once.
    public mutating func takeDeliveries() -> [NetsWebhookDelivery] {
        defer { outbox = [] }
        return outbox
    }

    package static func webhooks(in body: JSONValue) -> [Webhook] {
        (body["notifications"]?["webHooks"]?.arrayValue ?? []).compactMap { hook in
            guard let name = hook["eventName"]?.stringValue, let url = hook["url"]?.stringValue,
                let authorization = hook["authorization"]?.stringValue
            else { return nil }
            return Webhook(eventName: name, url: url, authorization: authorization)
        }
    }

    /// A subscription charge's webhooks (`payment.charge.created.v2`, `payment.charge.failed.v2`
    /// in Nexi's reference, with `data.subscriptionId`), one per registered URL and event name.
    /// A `payment.charge.created.v2` event's id is its chargeId, as in Nets' example of it
    /// (php-payment-sdk `payment.charge.created.v2.json`); other events get a derived 32-hex id.
    package static func chargeDeliveries(
        _ kind: NetsWebhookEvent.Kind, hooks: [Webhook], subscriptionId: String, paymentId: String, chargeId: String, amount: Int64,
        currency: String, items: [JSONValue] = [], merchantId: Int64, timestampMilliseconds: Int64
    ) -> [NetsWebhookDelivery] {
        var seen: Set<String> = []
        return hooks.filter { NetsWebhookEvent.Kind(eventName: $0.eventName) == kind && seen.insert("\($0.eventName) \($0.url)").inserted }.map {
            hook in
            let eventId = hook.eventName == "payment.charge.created.v2" ? chargeId : NetsSandbox.derivedId("event-\(hook.eventName)", chargeId)
            var content = NetsWebhookContent(
                kind: kind, eventId: eventId, paymentId: paymentId, amount: amount,
                currency: currency, chargeId: chargeId, merchantId: merchantId, timestampMilliseconds: timestampMilliseconds)
            content.subscriptionId = subscriptionId
            content.eventName = hook.eventName
            if !items.isEmpty { content.orderItems = items }
            return NetsSandbox.webhookDelivery(content, authorization: hook.authorization, url: hook.url)
        }
    }

    /// `GET /v1/subscriptions/{id}/charges/status` with the charge's Idempotency-Key: 200
    /// `{paymentId, chargeId, completed}`, or 404 when no charge of that subscription has the key.
    package func chargeStatusResponse(subscriptionId: String, key: String?) -> HTTPResponseSpec {
        guard let key, let charge = charges[key], charge.subscriptionId == subscriptionId else { return HTTPResponseSpec(status: 404) }
        return NetsSandbox.json(200, ["paymentId": .string(charge.paymentId), "chargeId": .string(charge.chargeId), "completed": true])
    }

    /// `PUT /v1/payments/{id}/terminate`: 204 while the checkout is not completed (a terminated
    /// one stays terminated); 400 once it is, as Nets allows a terminate only before then.
    package mutating func terminate(paymentId: String, now: Int64) -> HTTPResponseSpec {
        guard let payment = payments[paymentId] else { return HTTPResponseSpec(status: 404) }
        guard payment.subscriptionId == nil else {
            var errors = ValidationErrors()
            errors.add("paymentId", "The checkout of payment \(paymentId) is completed and cannot be terminated.")
            return errors.response
        }
        if payment.terminatedMilliseconds == nil { payments[paymentId]?.terminatedMilliseconds = now * 1000 }
        return HTTPResponseSpec(status: 204)
    }

    package func paymentResponse(_ paymentId: String) -> HTTPResponseSpec {
        if let charged = chargePayments[paymentId] { return chargePaymentResponse(paymentId, charged) }
        guard let payment = payments[paymentId] else { return HTTPResponseSpec(status: 404) }
        var orderDetails: [String: JSONValue] = ["amount": .integer(payment.amount), "currency": .string(payment.currency)]
        if let reference = payment.reference { orderDetails["reference"] = .string(reference) }
        var object: [String: JSONValue] = [
            "paymentId": .string(payment.paymentId),
            "created": .string(NetsSandbox.secondsTimestamp(milliseconds: payment.createdEpochSeconds * 1000)),
            "orderDetails": .object(orderDetails),
        ]
        // Nets' summary lists only the amounts that moved; the hosted page reserves the whole order.
        var summary: [String: JSONValue] = payment.subscriptionId == nil ? [:] : ["reservedAmount": .integer(payment.amount)]
        if !payment.charges.isEmpty { summary["chargedAmount"] = .integer(payment.chargedAmount) }
        let refunded = refunded(paymentId: paymentId)
        if refunded > 0 { summary["refundedAmount"] = .integer(refunded) }
        object["summary"] = .object(summary)
        object["charges"] = .array(
            payment.charges.map { charge in
                [
                    "chargeId": .string(charge.chargeId), "amount": .integer(charge.amount),
                    "created": .string(NetsSandbox.secondsTimestamp(milliseconds: charge.createdEpochSeconds * 1000)),
                ]
            })
        object["refunds"] = refundsJSON(paymentId: paymentId)
        if let subscriptionId = payment.subscriptionId { object["subscription"] = ["id": .string(subscriptionId)] }
        if let terminated = payment.terminatedMilliseconds {
            object["terminated"] = .string(NetsSandbox.secondsTimestamp(milliseconds: terminated))
        }
        return NetsSandbox.json(200, ["payment": .object(object)])
    }

    /// A subscription charge's payment as Nets' Retrieve payment shows it: the charge (with its
    /// id, amount, time and items) and the charged amount, or nothing charged after a decline.
    package func chargePaymentResponse(_ paymentId: String, _ payment: ChargePayment) -> HTTPResponseSpec {
        let created = NetsSandbox.secondsTimestamp(milliseconds: payment.createdEpochSeconds * 1000)
        var object: [String: JSONValue] = [
            "paymentId": .string(paymentId), "created": .string(created),
            "orderDetails": ["amount": .integer(payment.amount), "currency": .string(payment.currency)],
            "subscription": ["id": .string(payment.subscriptionId)], "refunds": [], "charges": [],
            "summary": [:],
        ]
        if let chargeId = payment.chargeId {
            object["charges"] = [
                [
                    "chargeId": .string(chargeId), "amount": .integer(payment.amount), "created": .string(created),
                    "orderItems": .array(payment.items),
                ]
            ]
            var summary: [String: JSONValue] = ["reservedAmount": .integer(payment.amount), "chargedAmount": .integer(payment.amount)]
            let refunded = refunded(paymentId: paymentId)
            if refunded > 0 { summary["refundedAmount"] = .integer(refunded) }
            object["summary"] = .object(summary)
            object["refunds"] = refundsJSON(paymentId: paymentId)
        }
        return NetsSandbox.json(200, ["payment": .object(object)])
    }

    package func subscriptionResponse(_ subscriptionId: String) -> HTTPResponseSpec {
        guard let paymentId = subscriptions[subscriptionId], let payment = payments[paymentId] else {
            return HTTPResponseSpec(status: 404)
        }
        return NetsSandbox.json(
            200,
            [
                "subscriptionId": .string(subscriptionId), "frequency": 0, "interval": .integer(payment.interval),
                "endDate": .string(payment.endDate),
                "paymentDetails": [
                    "paymentType": "CARD", "paymentMethod": "Visa",
                    "cardDetails": ["maskedPan": "492500******0004", "expiryDate": "1230"],
                ],
            ])
    }

    /// The customer completed the hosted page: the subscription now exists, and the
    /// deliveries Nets would send to the webhooks registered for checkout completed.
    /// Empty when the payment is unknown.
    public mutating func completeCheckout(
        paymentId: String, timestampMilliseconds: Int64, variant: NetsWebhookVariant = .genuine
    ) -> [NetsWebhookDelivery] {
        guard var payment = payments[paymentId], payment.terminatedMilliseconds == nil else { return [] }
        if payment.subscriptionId == nil {
            let subscriptionId = NetsSandbox.derivedId("subscription", paymentId)
            payment.subscriptionId = subscriptionId
            subscriptions[subscriptionId] = paymentId
            if payment.chargeAtCheckout, payment.amount > 0 {
                payment.charges.append(
                    PaymentCharge(
                        chargeId: NetsSandbox.derivedId("checkout-charge", paymentId), amount: payment.amount,
                        createdEpochSeconds: timestampMilliseconds / 1000))
            }
            payments[paymentId] = payment
        }
        let tampering: NetsWebhookTampering =
            switch variant {
            case .genuine: .none
            case .wrongAuthorization: .authorization("sandbox-forged-authorization")
            case .wrongAmount: .amount(payment.amount + 1)
            }
        return deliveries(.checkoutCompleted, payment: payment, timestampMilliseconds: timestampMilliseconds, tampering: tampering)
    }

    /// The customer abandoned the hosted page and the checkout was terminated: `GET payment`
    /// then shows `terminated`, nothing reserved, and no webhook is sent.
    public mutating func terminateCheckout(paymentId: String, timestampMilliseconds: Int64) {
        guard payments[paymentId]?.subscriptionId == nil else { return }
        payments[paymentId]?.terminatedMilliseconds = timestampMilliseconds
    }

    /// The customer's card was refused: deliveries for the reservation-failed webhooks.
    public func failReservation(paymentId: String, timestampMilliseconds: Int64) -> [NetsWebhookDelivery] {
        guard let payment = payments[paymentId] else { return [] }
        return deliveries(.reservationFailed, payment: payment, timestampMilliseconds: timestampMilliseconds)
    }

    package func deliveries(
        _ kind: NetsWebhookEvent.Kind, payment: Payment, timestampMilliseconds: Int64, tampering: NetsWebhookTampering = .none
    ) -> [NetsWebhookDelivery] {
        payment.webhooks.filter { NetsWebhookEvent.Kind(eventName: $0.eventName) == kind }.map { hook in
            var content = NetsWebhookContent(
                kind: kind, eventId: NetsSandbox.derivedId("event-\(kind.eventName)", payment.paymentId),
                paymentId: payment.paymentId, amount: payment.amount, currency: payment.currency,
                reference: payment.reference, merchantId: merchantId, timestampMilliseconds: timestampMilliseconds)
            if !payment.items.isEmpty { content.orderItems = payment.items }
            return NetsSandbox.webhookDelivery(content, authorization: hook.authorization, url: hook.url, tampering: tampering)
        }
    }

    /// The item fields Nets' webhooks show in `orderItems` (php-payment-sdk
    /// `payment.checkout.completed.json`, `payment.charge.created.v2.json`, `payment.reservation.failed.json`).
    package static let orderItemFields: Set<String> = [
        "reference", "name", "quantity", "unit", "unitPrice", "taxRate", "taxAmount", "netTotalAmount", "grossTotalAmount",
    ]

    /// A request's `order.items`, reduced to the fields Nets echoes.
    package static func orderItems(_ order: JSONValue?) -> [JSONValue] {
        (order?["items"]?.arrayValue ?? []).compactMap { item in
            item.objectValue.map { JSONValue.object($0.filter { orderItemFields.contains($0.key) }) }
        }
    }

    /// `GET /v1/payments/{id}`'s date-time form, `2019-08-24T14:15:22Z` (whole seconds, as in
    /// php-payment-sdk `RetrievePaymentResultTest.php` and `PaymentTest.php`).
    package static func secondsTimestamp(milliseconds: Int64) -> String {
        // `Timestamp.iso8601` always ends `.mmmZ`; its seconds are the floor of the milliseconds.
        String(Timestamp.iso8601(milliseconds: milliseconds).dropLast(5)) + "Z"
    }

    /// 32 hex characters, like Nets' ids, derived so replays give the same ids.
    package static func derivedId(_ purpose: String, _ seed: String) -> String {
        String(Digest.sha256Hex(Array("\(purpose)\u{0}\(seed)".utf8)).prefix(32))
    }
}

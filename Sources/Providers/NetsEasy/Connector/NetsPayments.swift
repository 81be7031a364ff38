import PaypipeCore

/// Nets Easy (Nexi Checkout) subscriptions: request building (signer), response
/// classification (submitter) and the unknown-outcome resolution rule.
public enum NetsPayments {
    /// Required by Nets Easy's subscription documentation on the create call ("critical to
    /// identify the platform"); sent on every call, as its sample app does.
    public static let commercePlatformTag = "iOSSDK"
    /// The webhooks registered with each subscription payment: the two that end the order, and
    /// the subscription's later charges, succeeded or failed (subscription events).
    public static let registeredWebhookEvents = [
        NetsWebhookEvent.Kind.checkoutCompleted.eventName, NetsWebhookEvent.Kind.reservationFailed.eventName,
        NetsWebhookEvent.Kind.chargeCreated.eventName, "payment.charge.failed.v2",
    ]

    /// `schedule` is the ledger's (docs/protocol.md, "Schedules"): nothing Nets is sent.
    public static let createSubscriptionParams = ["endDate", "interval", "reference", "items", "checkoutUrl", "termsUrl", "schedule"]
    public static let getSubscriptionParams = ["paymentId"]
    public static let chargeSubscriptionParams = ["subscriptionId", "reference", "items"]

    /// The longest interval accepted, in days (Nets stores it as a 32-bit integer).
    public static let maxIntervalDays: Int64 = Int64(Int32.max)

    // MARK: Signer

    /// The first (or only) request for any Nets order.
    public static func sign(_ order: Order, config: NetsConfig, now: Int64, webhookURL: String? = nil) throws(Rejection) -> HTTPRequestSpec {
        switch order.operation {
        case .createSubscription: try createSubscription(order, config: config, now: now, webhookURL: webhookURL)
        case .getSubscription: try getSubscription(order, config: config)
        case .chargeSubscription: try chargeSubscription(order, config: config)
        case .netsChargePayment: try NetsFirstCharge.sign(order, config: config)
        case .netsRefund: try NetsRefunds.sign(order, config: config)
        default:
            throw Rejection(.unknownOperation, field: "operation", "operation \(order.operation.rawValue) is not a nets operation")
        }
    }

    /// `POST {baseURL}/v1/payments` with `order`, `checkout`, `subscription` and, when
    /// `webhookURL` is given, `notifications.webHooks` for checkout completed / reservation failed.
    /// `now` (epoch seconds) is only for Nets' "endDate must be in the future" rule.
    public static func createSubscription(
        _ order: Order, config: NetsConfig, now: Int64, webhookURL: String? = nil
    ) throws(Rejection) -> HTTPRequestSpec {
        try requireOperation(order, .createSubscription)
        let params = try ParamReader(order.params, allowed: createSubscriptionParams, operation: "nets createSubscription")
        let endDateText = try params.string("endDate", length: 1...64)
        guard let endDate = NetsEndDate(iso8601: endDateText) else {
            throw params.invalid(
                "endDate", "must be an ISO 8601 date-time with an offset, e.g. 2030-07-18T00:00:00+01:00 or 2030-07-17T23:00:00Z")
        }
        guard endDate.isAfter(epochSeconds: now) else {
            throw params.invalid("endDate", "must be in the future (Nets refuses a past end date), got \(endDate.formatted)")
        }
        let interval = try params.integer("interval", in: 0...maxIntervalDays)
        let reference = try params.netsText("reference")
        let checkoutURL = try params.netsOptionalURL("checkoutUrl")
        let termsURL = try params.netsOptionalURL("termsUrl")
        let orderBody = try orderBody(order, params: params, reference: reference, defaultItemName: "Subscription")

        // Nets' iOS SDK opens the hosted payment page and watches for the return URL.
        var checkout: [String: JSONValue] = ["integrationType": "HostedPaymentPage"]
        if let checkoutURL { checkout["returnUrl"] = .string(checkoutURL) }
        if let termsURL { checkout["termsUrl"] = .string(termsURL) }
        // A zero-amount (verification) subscription has nothing to charge.
        if config.firstPayment == .checkout, (order.amount ?? 0) > 0 { checkout["charge"] = true }

        var body: [String: JSONValue] = [
            "order": orderBody,
            "checkout": .object(checkout),
            "subscription": ["endDate": .string(endDate.formatted), "interval": .integer(interval)],
        ]
        if let webhookURL {
            guard NetsParams.isHTTPURL(webhookURL), webhookURL.utf8.count <= 256 else {
                throw Rejection(.invalidParam, field: "webhookURL", "the webhook URL must be an absolute http(s) URL of at most 256 characters")
            }
            guard !config.webhookAuthorization.isEmpty else {
                throw Rejection(.missingCredentials, field: "webhookAuthorization", "nets webhookAuthorization is not configured for this merchant")
            }
            let authorization = JSONValue.string(config.webhookAuthorization.reveal())
            body["notifications"] = [
                "webHooks": .array(
                    registeredWebhookEvents.map { event in
                        ["eventName": .string(event), "url": .string(webhookURL), "authorization": authorization]
                    })
            ]
        }
        return try post(
            config: config, path: "/v1/payments", body: .object(body),
            idempotencyKey: NetsIdentifiers.idempotencyKey(for: order.key), includePlatformTag: true)
    }

    /// Step 1 of getSubscription: `GET {baseURL}/v1/payments/{paymentId}`. Step 2 is built by
    /// `handle(_:to:)` from this request and its response (so the submitter needs no secret).
    public static func getSubscription(_ order: Order, config: NetsConfig) throws(Rejection) -> HTTPRequestSpec {
        try requireOperation(order, .getSubscription)
        let params = try ParamReader(order.params, allowed: getSubscriptionParams, operation: "nets getSubscription")
        return try fetchPayment(paymentId: params.netsSafeId("paymentId"), config: config)
    }

    /// `GET {baseURL}/v1/payments/{paymentId}`.
    public static func fetchPayment(paymentId: String, config: NetsConfig) throws(Rejection) -> HTTPRequestSpec {
        guard NetsIdentifiers.isSafeId(paymentId) else {
            throw Rejection.invalidParam("paymentId", "must be 1-64 characters of [A-Za-z0-9_-] (it is placed in the request URL)")
        }
        return try get(config: config, path: "/v1/payments/\(paymentId)")
    }

    /// `GET {baseURL}/v1/subscriptions/{subscriptionId}`.
    public static func fetchSubscription(subscriptionId: String, config: NetsConfig) throws(Rejection) -> HTTPRequestSpec {
        guard NetsIdentifiers.isSafeId(subscriptionId) else {
            throw Rejection.invalidParam("subscriptionId", "must be 1-64 characters of [A-Za-z0-9_-] (it is placed in the request URL)")
        }
        return try get(config: config, path: "/v1/subscriptions/\(subscriptionId)")
    }

    /// `POST {baseURL}/v1/subscriptions/{subscriptionId}/charges` with `{"order": {...}}` and the
    /// order's deterministic `Idempotency-Key`.
    public static func chargeSubscription(_ order: Order, config: NetsConfig) throws(Rejection) -> HTTPRequestSpec {
        try requireOperation(order, .chargeSubscription)
        let params = try ParamReader(order.params, allowed: chargeSubscriptionParams, operation: "nets chargeSubscription")
        let subscriptionId = try params.netsSafeId("subscriptionId")
        let reference = try params.netsText("reference")
        let orderBody = try orderBody(order, params: params, reference: reference, defaultItemName: "Subscription charge")
        return try post(
            config: config, path: "/v1/subscriptions/\(subscriptionId)/charges", body: ["order": orderBody],
            idempotencyKey: NetsIdentifiers.idempotencyKey(for: order.key), includePlatformTag: true)
    }

    /// The `Idempotency-Key` this module sends for an order.
    public static func idempotencyKey(for key: OrderKey) -> String { NetsIdentifiers.idempotencyKey(for: key) }

    // MARK: Request assembly

    static func requireOperation(_ order: Order, _ expected: Operation) throws(Rejection) {
        guard order.operation == expected else {
            throw Rejection(.unknownOperation, field: "operation", "expected nets \(expected.rawValue), got \(order.operation.rawValue)")
        }
    }

    static func baseURL(_ config: NetsConfig) throws(Rejection) -> String {
        var base = config.baseURL
        while base.hasSuffix("/") { base.removeLast() }
        guard NetsParams.isHTTPURL(base), !base.contains("?"), !base.contains("#") else {
            throw Rejection(.missingCredentials, field: "baseURL", "nets baseURL must be an absolute http(s) URL without query or fragment")
        }
        return base
    }

    static func authorizationHeaders(_ config: NetsConfig) throws(Rejection) -> [HTTPHeader] {
        guard !config.secretKey.isEmpty else {
            throw Rejection(.missingCredentials, field: "secretKey", "nets secretKey is not configured for this merchant")
        }
        // Nets takes the raw secret key, no "Bearer"/"Token" scheme.
        return [HTTPHeader("Authorization", config.secretKey.reveal()), HTTPHeader("commercePlatformTag", commercePlatformTag)]
    }

    static func get(config: NetsConfig, path: String) throws(Rejection) -> HTTPRequestSpec {
        var headers = try authorizationHeaders(config)
        headers.append(HTTPHeader("Accept", "application/json"))
        return HTTPRequestSpec(method: .GET, url: try baseURL(config) + path, headers: headers)
    }

    static func post(
        config: NetsConfig, path: String, body: JSONValue, idempotencyKey: String, includePlatformTag: Bool
    ) throws(Rejection) -> HTTPRequestSpec {
        var headers = try authorizationHeaders(config)
        headers.append(HTTPHeader("Content-Type", "application/json"))
        headers.append(HTTPHeader("Accept", "application/json"))
        headers.append(HTTPHeader("Idempotency-Key", idempotencyKey))
        return HTTPRequestSpec(method: .POST, url: try baseURL(config) + path, headers: headers, body: body.bytes)
    }
}

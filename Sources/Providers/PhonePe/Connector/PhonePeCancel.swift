import PaypipeCore

extension Operation {
    public static let cancelPhonePe = Operation(.phonepe, SubscriptionCancel.operationName)
}

extension PhonePeRules {
    /// PhonePe's recurring reference, "Cancel Subscription" (PROVIDERS-LIFECYCLE §3, [PP-CANCEL]).
    public static let subscriptionCancelPath = "/v3/recurring/subscription/cancel"
    /// The cancel's answer while PhonePe ends the mandate; its SUBSCRIPTION callback confirms it.
    public static let cancelInProgress = "CANCEL_IN_PROGRESS"
    /// Refusals of a cancel that say the mandate is already over or on its way out (the failure
    /// codes of "Cancel Subscription"; `SUBSCRIPTION_CANCEL_IN_PROGRES` is spelt as PhonePe
    /// lists it, and the complete spelling is taken too): the cancel has nothing left to do.
    public static let alreadyEndedCodes: Set<String> = [
        "SUBSCRIPTION_NOT_ACTIVE", "SUBSCRIPTION_EXPIRED", "SUBSCRIPTION_FAILED", "SUBSCRIPTION_REVOKE_IN_PROGRESS",
        "SUBSCRIPTION_ALREADY_REVOKED", "SUBSCRIPTION_CANCEL_IN_PROGRES", "SUBSCRIPTION_CANCEL_IN_PROGRESS", "SUBSCRIPTION_ALREADY_CANCELLED",
    ]
}

/// A PhonePe mandate cancelled by the merchant (`POST /v3/recurring/subscription/cancel`,
/// body `{"request": base64({merchantId, merchantUserId, subscriptionId})}`, X-VERIFY over the
/// payload and the path, X-CALLBACK-URL for the SUBSCRIPTION callback that follows).
///
/// The same request resolves a lost answer: a cancel that took effect is refused the second
/// time with a code that says the mandate is cancelled (or cancelling), which reads as the
/// order's success, and one that did not takes effect now. The subscription-status call would
/// need the merchantSubscriptionId, which the v3 auth flow paypipe runs never gives it.
public struct PhonePeCancel: Sendable, Equatable {
    public var subscriptionId: String
    public var merchantUserId: String
    public var at: SubscriptionCancel.When

    public init(order: Order) throws(Rejection) {
        let cancel = try SubscriptionCancel(order: order, fromUpstream: false)
        guard PhonePeRules.isIdentifier(cancel.subscription, maxLength: PhonePeRules.subscriptionIdMaxLength) else {
            throw Rejection.invalidParam(
                "subscription", "must be a PhonePe subscriptionId (1-\(PhonePeRules.subscriptionIdMaxLength) of [A-Za-z0-9_-])")
        }
        guard let user = cancel.record?.target?["merchantUserId"]?.stringValue,
            PhonePeRules.isIdentifier(user, maxLength: PhonePeRules.merchantUserIdMaxLength)
        else {
            throw Rejection(
                .invalidParam, field: "params.subscription", "the ledger holds no merchantUserId for subscription \(cancel.subscription.prefix(64))")
        }
        subscriptionId = cancel.subscription
        merchantUserId = user
        at = cancel.at
    }

    /// The signed cancel.
    func request(merchant: PhonePeMerchant) throws(Rejection) -> HTTPRequestSpec {
        let (baseURL, merchantId) = try merchant.endpoint.get()
        var writer = JSONObjectWriter(capacity: 160)
        writer.string("merchantId", merchantId)
        writer.string("merchantUserId", merchantUserId)
        writer.string("subscriptionId", subscriptionId)
        let payload = Base64.encodeToString(writer.finish(), .standard)
        let path = PhonePeRules.subscriptionCancelPath
        return HTTPRequestSpec(
            method: .POST, url: baseURL + path,
            headers: [
                HTTPHeader("Content-Type", "application/json"),
                HTTPHeader("X-VERIFY", merchant.checksum.xVerify(payloadBase64: payload, apiPath: path)),
                HTTPHeader("X-CALLBACK-URL", merchant.config.callbackURL),
            ],
            body: Array("{\"request\":\"\(payload)\"}".utf8))
    }

    /// PhonePe's answer: `CANCEL_IN_PROGRESS` (or a mandate already over) is the order's
    /// success; any other refusal with PhonePe's own code changed nothing.
    public func classify(_ response: HTTPResponseSpec) -> ProviderVerdict {
        let status = response.status
        if status == 429 || status >= 500 { return .unknown(reason: "PhonePe subscription cancel answered HTTP \(status)") }
        guard let envelope = PhonePeResponse(json: response.body) else {
            return .unknown(reason: "PhonePe subscription cancel answered HTTP \(status) without a readable response envelope")
        }
        var result: [String: JSONValue] = ["subscription": .string(subscriptionId), "at": .string(at.rawValue)]
        if envelope.code == "SUCCESS", envelope.success != false, let data = envelope.data {
            guard let state = data["state"]?.stringValue, PhonePeRules.isIdentifier(state, maxLength: 32) else {
                return .unknown(reason: "PhonePe subscription cancel answered SUCCESS without a state")
            }
            guard state == PhonePeRules.cancelInProgress || state == "CANCELLED" else {
                return .unknown(reason: "PhonePe subscription cancel answered state \(state)")
            }
            result["state"] = .string(state)
            return .succeeded(result)
        }
        guard let code = envelope.code, PhonePeRules.isIdentifier(code, maxLength: 64), code != "INTERNAL_SERVER_ERROR" else {
            return .unknown(reason: "PhonePe subscription cancel answered HTTP \(status) without a code")
        }
        if PhonePeRules.alreadyEndedCodes.contains(code) {
            result["alreadyEnded"] = .string(code)
            return .succeeded(result)
        }
        return .failed(code: .phonePe(code), message: envelope.shortMessage)
    }
}

import PaypipeCore

/// A signed `POST /v3/recurring/auth/init` (PhonePe's recurring auth/init documentation) and, built
/// with it, the signed auth-status request that resolves its outcome later. The signer makes both
/// because only it holds the salt; the status request has no timestamp, so it stays valid for as
/// long as it is needed.
public struct PhonePeAuthInit: Sendable, Equatable {
    public let params: PhonePeAuthInitParams
    public let merchantId: String
    public let request: HTTPRequestSpec
    public let statusRequest: HTTPRequestSpec

    public var authRequestId: String { params.authRequestId }

    /// Signs with a merchant's settings checked once (`PhonePeMerchant`): the signer's connector
    /// keeps one per merchant, so an order costs no config copy and no settings check.
    public init(order: Order, merchant: PhonePeMerchant) throws(Rejection) {
        let (baseURL, merchantId) = try merchant.endpoint.get()
        var params = try PhonePeAuthInitParams(order: order)
        if params.merchantCallBackScheme == nil { params.merchantCallBackScheme = try merchant.configuredCallBackScheme.get() }
        let payloadBase64 = Base64.encodeToString(Self.payload(params, merchantId: merchantId), .standard)

        self.params = params
        self.merchantId = merchantId
        request = HTTPRequestSpec(
            method: .POST, url: baseURL + PhonePeRules.authInitPath,
            headers: [
                HTTPHeader("Content-Type", "application/json"),
                HTTPHeader("X-VERIFY", merchant.checksum.xVerify(payloadBase64: payloadBase64, apiPath: PhonePeRules.authInitPath)),
                HTTPHeader("X-CALLBACK-URL", merchant.config.callbackURL),
            ],
            body: Array("{\"request\":\"\(payloadBase64)\"}".utf8))
        statusRequest = PhonePeAuthStatus.request(
            baseURL: baseURL, merchantId: merchantId, authRequestId: params.authRequestId, checksum: merchant.checksum)
    }

    public init(order: Order, config: PhonePeConfig) throws(Rejection) {
        try self.init(order: order, merchant: PhonePeMerchant(config: config))
    }

    /// The merchant's `phonepe.callbackScheme`, for an order that names no
    /// `deviceContext.merchantCallBackScheme` (mandatory in PhonePe's auth/init request
    /// table). `init(order:merchant:)` takes the order's own first.
    static func configuredCallBackScheme(_ config: PhonePeConfig) throws(Rejection) -> String {
        guard let configured = config.callbackScheme else {
            throw Rejection(
                .missingParam, field: "params.merchantCallBackScheme",
                "params.merchantCallBackScheme is required when the merchant config sets no phonepe.callbackScheme (PhonePe makes deviceContext.merchantCallBackScheme mandatory)"
            )
        }
        guard PhonePeRules.isURLScheme(configured) else {
            throw Rejection(
                .phonePeInvalidConfig, field: "phonepe.callbackScheme",
                "phonepe.callbackScheme must be a URL scheme: a letter, then letters, digits, '+', '-' or '.', at most \(PhonePeRules.callBackSchemeMaxLength) characters"
            )
        }
        return configured
    }

    /// The JSON that is base64-encoded into `{"request": ...}`, per PhonePe's auth/init
    /// request-parameter table. Its sample also carries `message` and
    /// `deviceContext.isPPAppPresent`, which its table does not define and the server cannot know;
    /// they are left out. Written member by member in key order, the canonical form: building a
    /// `JSONValue` object and sorting its keys would cost more than the rest of signing but the
    /// hashes.
    static func payload(_ params: PhonePeAuthInitParams, merchantId: String) -> [UInt8] {
        var writer = JSONObjectWriter(capacity: 384)
        if params.authWorkflowType == .transaction, let amount = params.amount { writer.integer("amount", amount) }
        writer.string("authRequestId", params.authRequestId)
        writer.object("deviceContext") { device in
            device.string("deviceOS", PhonePeRules.deviceOS)
            if let scheme = params.merchantCallBackScheme { device.string("merchantCallBackScheme", scheme) }
        }
        writer.string("merchantId", merchantId)
        writer.string("merchantUserId", params.merchantUserId)
        writer.string("paymentScope", PhonePeRules.paymentScope)
        writer.string("subscriptionId", params.subscriptionId)
        return writer.finish()
    }
}

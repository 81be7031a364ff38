import PaypipeCore

/// A signed `POST /v3/recurring/auth/init` (seed 002) and, built with it, the signed auth-status
/// request that resolves its outcome later. The signer makes both because only it holds the
/// salt; the status request has no timestamp, so it stays valid for as long as it is needed.
public struct PhonePeAuthInit: Sendable, Equatable {
    public let params: PhonePeAuthInitParams
    public let merchantId: String
    /// The JSON that is base64-encoded into `{"request": ...}`.
    public let payload: JSONValue
    public let request: HTTPRequestSpec
    public let statusRequest: HTTPRequestSpec

    public var authRequestId: String { params.authRequestId }

    public init(order: Order, config: PhonePeConfig, checksum: PhonePeChecksum) throws(Rejection) {
        let (baseURL, merchantId) = try config.validated()
        guard checksum.saltIndex == config.saltIndex else {
            throw Rejection(.phonePeInvalidConfig, field: "phonepe.saltIndex", "the signer's salt index differs from phonepe.saltIndex")
        }
        let params = try PhonePeAuthInitParams(order: order)
        let payload = Self.payload(params, merchantId: merchantId)
        let payloadBase64 = Base64.encodeToString(payload.bytes, .standard)

        self.params = params
        self.merchantId = merchantId
        self.payload = payload
        request = HTTPRequestSpec(
            method: .POST, url: baseURL + PhonePeRules.authInitPath,
            headers: [
                HTTPHeader("Content-Type", "application/json"),
                HTTPHeader("X-VERIFY", checksum.xVerify(payloadBase64: payloadBase64, apiPath: PhonePeRules.authInitPath)),
                HTTPHeader("X-CALLBACK-URL", config.callbackURL),
            ],
            body: Array("{\"request\":\"\(payloadBase64)\"}".utf8))
        statusRequest = PhonePeAuthStatus.request(
            baseURL: baseURL, merchantId: merchantId, authRequestId: params.authRequestId, checksum: checksum)
    }

    public init(order: Order, config: PhonePeConfig) throws(Rejection) {
        try self.init(order: order, config: config, checksum: PhonePeChecksum(config: config))
    }

    /// The payload per the seed's request-parameter table. The seed's sample also carries
    /// `message` and `deviceContext.isPPAppPresent`, which its table does not define and the
    /// server cannot know; they are left out.
    public static func payload(_ params: PhonePeAuthInitParams, merchantId: String) -> JSONValue {
        var deviceContext: [String: JSONValue] = ["deviceOS": .string(PhonePeRules.deviceOS)]
        if let scheme = params.merchantCallBackScheme { deviceContext["merchantCallBackScheme"] = .string(scheme) }
        var object: [String: JSONValue] = [
            "merchantId": .string(merchantId),
            "merchantUserId": .string(params.merchantUserId),
            "subscriptionId": .string(params.subscriptionId),
            "authRequestId": .string(params.authRequestId),
            "paymentScope": .string(PhonePeRules.paymentScope),
            "deviceContext": .object(deviceContext),
        ]
        if params.authWorkflowType == .transaction, let amount = params.amount { object["amount"] = .integer(amount) }
        return .object(object)
    }
}

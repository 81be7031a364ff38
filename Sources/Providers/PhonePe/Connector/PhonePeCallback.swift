import PaypipeCore

/// `data.callbackType`. Kept open: a type this module does not know is carried, not rejected.
public struct PhonePeCallbackType: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }

    public static let auth = PhonePeCallbackType(rawValue: "AUTH")
    public static let notify = PhonePeCallbackType(rawValue: "NOTIFY")
    public static let debit = PhonePeCallbackType(rawValue: "DEBIT")
    public static let subscription = PhonePeCallbackType(rawValue: "SUBSCRIPTION")
}

/// A PhonePe S2S callback body `{"response": base64(JSON)}`, decoded but NOT yet authenticated.
/// Its claimed ids serve only to find the order (and so the merchant whose salt verifies it);
/// nothing else may be read before `authenticate`.
public struct PhonePeCallbackEnvelope: Sendable, Equatable {
    public let responseBase64: String
    private let decoded: PhonePeCallback

    /// The authRequestId the body claims (for the order lookup only).
    public var claimedAuthRequestId: String { decoded.authRequestId }
    /// The merchantId the body claims (for the config lookup only).
    public var claimedMerchantId: String { decoded.merchantId }

    public init(body: some Collection<UInt8>) throws(CallbackRejection) {
        let response = try PhonePeCallback.responseField(body)
        responseBase64 = response
        decoded = try PhonePeCallback(responseBase64: response)
    }

    /// Checks `X-VERIFY = sha256hex(response + saltKey) + "###" + saltIndex` in constant time.
    public func authenticate(xVerify: String?, checksum: PhonePeChecksum) throws(CallbackRejection) -> PhonePeCallback {
        try PhonePeCallback.checkChecksum(xVerify, response: responseBase64, checksum: checksum)
        return decoded
    }
}

/// An authenticated S2S callback (PhonePe's recurring documentation, "S2S Callback").
public struct PhonePeCallback: Sendable, Equatable {
    public let responseBase64: String
    public let success: Bool?
    public let code: String?
    public let message: String?
    public let callbackType: PhonePeCallbackType
    public let merchantId: String
    public let authRequestId: String
    /// transactionDetails + subscriptionDetails.
    public let state: PhonePeAuthState
    /// The decoded `data`, for the callbacks about a subscription (`subscriptionEvents`).
    public let data: [String: JSONValue]

    /// Providers redeliver: the same auth reaching the same states is the same event.
    public var dedupeKey: String {
        "\(authRequestId)|\(callbackType.rawValue)|\(state.transaction?.state ?? "-")|\(state.subscription?.state ?? "-")"
    }

    /// One step for a validator that already knows the merchant: the checksum is checked
    /// before anything is decoded, so forged bodies cost one SHA-256.
    public static func authenticate(
        body: some Collection<UInt8>, xVerify: String?, checksum: PhonePeChecksum
    ) throws(CallbackRejection) -> PhonePeCallback {
        let response = try responseField(body)
        try checkChecksum(xVerify, response: response, checksum: checksum)
        return try PhonePeCallback(responseBase64: response)
    }

    // MARK: Decoding

    static func responseField(_ body: some Collection<UInt8>) throws(CallbackRejection) -> String {
        guard body.count <= PhonePeRules.maxDocumentBytes else {
            throw .tooLarge("callback body of \(body.count) bytes exceeds \(PhonePeRules.maxDocumentBytes)")
        }
        guard let document = try? JSONValue.parse(body), case .object(let object) = document else {
            throw .malformed("callback body is not a JSON object")
        }
        guard let response = object["response"]?.stringValue, !response.isEmpty else {
            throw .malformed("callback body has no \"response\" string")
        }
        return response
    }

    static func checkChecksum(_ xVerify: String?, response: String, checksum: PhonePeChecksum) throws(CallbackRejection) {
        guard let xVerify, !xVerify.isEmpty else {
            throw .forged(.missingChecksum, "X-VERIFY header is missing")
        }
        guard checksum.verify(xVerify, callbackResponse: response) else {
            throw .forged(.badChecksum, "X-VERIFY does not match the response and the configured salt index")
        }
    }

    init(responseBase64: String) throws(CallbackRejection) {
        guard let decoded = Base64.decode(responseBase64, .standard) else {
            throw .malformed("response is not valid base64")
        }
        guard let document = try? JSONValue.parse(decoded), case .object(let object) = document else {
            throw .malformed("decoded response is not a JSON object")
        }
        guard let data = object["data"]?.objectValue else {
            throw .malformed("decoded response has no data object")
        }
        let state: PhonePeAuthState
        do {
            state = try PhonePeAuthState(data: data)
        } catch {
            throw .malformed(error.description)
        }
        guard let type = data["callbackType"]?.stringValue, PhonePeRules.isIdentifier(type, maxLength: 32) else {
            throw .malformed("data.callbackType must be a word such as AUTH")
        }
        guard let merchantId = state.merchantId, PhonePeRules.isIdentifier(merchantId, maxLength: PhonePeRules.merchantIdMaxLength) else {
            throw .malformed("data.merchantId must be 1-\(PhonePeRules.merchantIdMaxLength) characters of [A-Za-z0-9_-]")
        }
        // Only an AUTH callback is about an authInit order; the others (a debit, its pre-debit
        // notification, the user revoking or pausing the mandate) name the subscription.
        let authRequestId = state.authRequestId ?? ""
        guard type != PhonePeCallbackType.auth.rawValue || PhonePeRules.isIdentifier(authRequestId, maxLength: 64) else {
            throw .malformed("data.authRequestId must be 1-64 characters of [A-Za-z0-9_-]")
        }
        self.responseBase64 = responseBase64
        self.data = data
        success = object["success"]?.boolValue
        code = object["code"]?.stringValue
        message = object["message"]?.stringValue
        callbackType = PhonePeCallbackType(rawValue: type)
        self.merchantId = merchantId
        self.authRequestId = authRequestId
        self.state = state
    }
}

/// What an authentic callback means for the order it names.
public enum PhonePeCallbackEffect: Sendable, Equatable {
    /// The order's verdict (terminal, or pending/unknown to be resolved with auth status).
    case verdict(ProviderVerdict)
    /// Authentic, but not about this authInit's outcome (e.g. a DEBIT or NOTIFY callback):
    /// acknowledge with 2xx and change nothing.
    case ignored(reason: String)
}

extension PhonePeCallback {
    /// Interprets the callback for the authInit it names. `merchantId` is the configured one.
    /// AUTH callbacks decide the order: states per `PhonePeAuthState.verdict`, with
    /// `AMOUNT_MISMATCH` / `REFERENCE_MISMATCH` when authentic data disagrees with the order.
    public func effect(expected: PhonePeAuthInitParams, merchantId: String) -> PhonePeCallbackEffect {
        guard callbackType == .auth else {
            return .ignored(reason: "\(callbackType.rawValue.prefix(32)) callbacks do not decide an authInit order")
        }
        let verdict = state.verdict(expected: expected, merchantId: merchantId)
        if case .pending = verdict, success == false {
            let code = code.flatMap { PhonePeRules.isIdentifier($0, maxLength: 64) ? OutcomeErrorCode.phonePe($0) : nil } ?? .authFailed
            return .verdict(.failed(code: code, message: "PhonePe callback reported success false"))
        }
        return .verdict(verdict)
    }

    /// As above, reading the expected references from the order. An order that is not a
    /// PhonePe authInit is not this callback's to decide.
    public func effect(order: Order, merchantId: String) -> PhonePeCallbackEffect {
        guard order.operation == .authInit else {
            return .ignored(reason: "order \(order.orderId) is not a phonepe authInit")
        }
        do {
            return effect(expected: try PhonePeAuthInitParams(order: order), merchantId: merchantId)
        } catch {
            return .verdict(.failed(code: OutcomeErrorCode(error.code), message: error.message))
        }
    }
}

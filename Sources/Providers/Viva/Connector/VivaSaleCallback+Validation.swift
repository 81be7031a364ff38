import PaypipeCore

/// A callback that passed every check: the parsed result and the verdict for the order.
public struct VivaCallbackValidation: Sendable, Equatable {
    public let callback: VivaSaleCallback
    /// `.succeeded(result)` or `.failed(code:message:)`; mismatches are `.failed` with
    /// `AMOUNT_MISMATCH` / `REFERENCE_MISMATCH` (answered 2xx, reviewed by a person).
    public let verdict: ProviderVerdict
    /// The callback's details, for the outcome's `result` whatever the verdict.
    public var result: [String: JSONValue] { callback.result }
}

extension VivaSaleCallback {
    /// The callback validator's work for `POST /callbacks/viva` `{"orderId", "uri"}`.
    ///
    /// Throws (answer `error.status`, count by `error.code`, change nothing) when the URI is
    /// malformed or is not a sale result for this app: bad encoding, repeated keys, missing or invalid
    /// fields, an unmasked card number, a scheme other than the order's callback (`params.callback`
    /// or the config's), an action other than sale. Otherwise returns the verdict: a
    /// clientTransactionId or amount that differs from the order's is a failed verdict for review;
    /// `tipAmount` is reported, not compared (the order's amount excludes the tip).
    public static func validate(uri: String, order: Order, config: VivaConfig) throws(CallbackRejection) -> VivaCallbackValidation {
        let callback = try VivaSaleCallback(uri: uri)
        try callback.requireScheme(of: order, config: config)
        let expectedReference = expectedReference(of: order)
        guard callback.clientTransactionId == expectedReference else {
            return VivaCallbackValidation(
                callback: callback,
                verdict: .failed(
                    code: .referenceMismatch,
                    message:
                        "callback clientTransactionId \(VivaText.printable(callback.clientTransactionId, limit: 64)) != order's \(VivaText.printable(expectedReference, limit: 64))"
                ))
        }
        guard let orderAmount = order.amount, callback.amount == orderAmount else {
            return VivaCallbackValidation(
                callback: callback,
                verdict: .failed(
                    code: .amountMismatch,
                    message: "callback amount \(callback.amount) != order amount \(order.amount.map { String($0) } ?? "(none)")"))
        }
        switch callback.status {
        case .success:
            return VivaCallbackValidation(callback: callback, verdict: .succeeded(callback.result))
        case .fail:
            let reason = callback.message.map { ": " + VivaText.printable($0, limit: 200) } ?? ""
            return VivaCallbackValidation(callback: callback, verdict: .failed(code: .vivaSaleFailed, message: "viva sale failed\(reason)"))
        }
    }

    /// The result must come back on the scheme the order's sale URL named (`params.callback` or the config's).
    func requireScheme(of order: Order, config: VivaConfig) throws(CallbackRejection) {
        let expectedScheme = order.params["callback"]?.stringValue ?? config.callback
        // RFC 3986 schemes are case-insensitive.
        guard callback.lowercased() == expectedScheme.lowercased() else {
            throw .viva(.wrongScheme, "the callback scheme is not the one this order's sale URL named")
        }
    }

    /// The clientTransactionId the order's sale URL carried.
    static func expectedReference(of order: Order) -> String {
        order.params["clientTransactionId"]?.stringValue ?? order.orderId
    }

    /// The same, straight from the forwarded body `{"orderId", "uri", "merchant"?}`. The caller has
    /// already loaded `order` by the body's orderId/merchant; this reads `uri` out of the body.
    public static func validate(body: JSONValue, order: Order, config: VivaConfig) throws(CallbackRejection) -> VivaCallbackValidation {
        guard let uri = body["uri"]?.stringValue else {
            throw .viva(.missingField, "the body must carry the callback as a string \"uri\"")
        }
        return try validate(uri: uri, order: order, config: config)
    }
}

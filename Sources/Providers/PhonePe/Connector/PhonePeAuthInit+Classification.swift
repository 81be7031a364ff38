import PaypipeCore

extension PhonePeAuthInit {
    /// Codes that mean PhonePe refused the auth request: nothing was created.
    public static let refusalCodes: Set<String> = [
        "SUBSCRIPTION_NOT_FOUND", "SUBSCRIPTION_EXPIRED", "INVALID_SUBSCRIPTION_STATE", "BAD_REQUEST",
    ]

    /// Redirect schemes the app may be handed: PhonePe's intent (`ppe://`) and UPI's (`upi://`).
    public static let redirectSchemes = ["ppe://", "upi://"]

    /// The submitter's classification table for an auth/init response.
    ///
    /// - SUCCESS with an INTENT redirect → `pending` with `redirectURL` and `authRequestId`.
    /// - INTERNAL_SERVER_ERROR, any 5xx, a 2xx that is not a JSON envelope, a SUCCESS without
    ///   a usable redirect, or INVALID_TRANSACTION_ID (this order's own earlier request reached
    ///   PhonePe) → `unknown` (the mandate request may exist: ask auth status).
    /// - 429 and 408 → `retry`: PhonePe's rate limiter / the server's read timeout answer before
    ///   the request is processed, and even if it had been, the resend carries the same
    ///   `authRequestId`, which PhonePe rejects as a duplicate, so no second mandate can arise.
    /// - The refusal codes and any other code → `failed` with that code.
    public static func classify(_ response: HTTPResponseSpec, authRequestId: String) -> ProviderVerdict {
        let status = response.status
        if status == 429 || status == 408 {
            return .retry(reason: "PhonePe answered HTTP \(status) before processing the auth request")
        }
        if status >= 500 {
            return .unknown(reason: "PhonePe answered HTTP \(status); the auth request may have been created")
        }
        guard let envelope = PhonePeResponse(json: response.body), let code = envelope.code else {
            if (400..<500).contains(status) {
                return .failed(code: .http(status), message: "PhonePe refused the auth request with HTTP \(status) and no response code")
            }
            return .unknown(reason: "PhonePe answered HTTP \(status) without a readable response envelope")
        }
        switch code {
        case "SUCCESS":
            guard (200..<300).contains(status), envelope.success == true else {
                return .unknown(
                    reason: "PhonePe answered code SUCCESS with HTTP \(status) and success \(envelope.success.map(String.init) ?? "absent")")
            }
            let data = envelope.data ?? [:]
            // PhonePe's auth/init field table says `redirectUrl`; its sample says `redirectURL`.
            guard let url = (data["redirectURL"] ?? data["redirectUrl"])?.stringValue, isUsableRedirect(url) else {
                return .unknown(reason: "PhonePe answered SUCCESS without a usable redirectURL")
            }
            if let type = data["redirectType"]?.stringValue, type != "INTENT" {
                return .unknown(reason: "PhonePe answered SUCCESS with redirectType \(type.prefix(32)), expected INTENT")
            }
            return .pending(["redirectURL": .string(url), "authRequestId": .string(authRequestId)])
        case "INTERNAL_SERVER_ERROR":
            return .unknown(reason: "PhonePe answered INTERNAL_SERVER_ERROR; the auth request may have been created")
        case PhonePeRules.duplicateCode:
            return .unknown(reason: "PhonePe has seen this authRequestId before; the earlier request decides")
        default:
            return .failed(code: .phonePe(code.prefix(64)), message: envelope.shortMessage)
        }
    }

    /// A redirect handed to the app must be PhonePe's or UPI's intent and carry no whitespace
    /// or control characters (it is opened as a URL verbatim).
    static func isUsableRedirect(_ url: String) -> Bool {
        let lowered = url.prefix(6).lowercased()
        guard redirectSchemes.contains(lowered), url.utf8.count > 6, url.utf8.count <= 4096 else { return false }
        return url.utf8.allSatisfy { $0 > 0x20 && $0 != 0x7F }
    }
}

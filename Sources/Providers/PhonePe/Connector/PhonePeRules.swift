import PaypipeCore

/// Every PhonePe-specific constant and limit in one place. PhonePe's recurring documentation gives
/// field names but no lengths or character sets; the limits below follow PhonePe's public
/// references for merchant-generated ids (letters, digits, `_` and `-`; transaction ids up to 35
/// characters) and accommodate that documentation's own examples. Items marked (unconfirmed) are
/// this module's choices.
public enum PhonePeRules {
    public static let authInitPath = "/v3/recurring/auth/init"
    public static let authStatusPathPrefix = "/v3/recurring/auth/status/"
    /// The pre-debit notification ("Recurring INIT"), the debit, and the debit's status.
    public static let debitInitPath = "/v3/recurring/debit/init"
    public static let debitExecutePath = "/v3/recurring/debit/execute"
    public static let debitStatusPathPrefix = "/v3/recurring/debit/status/"

    /// PhonePe's answer to a transaction id it has seen before ("Duplicate TransactionID"). The
    /// ids paypipe sends come from the order, so a duplicate is this order's own earlier request,
    /// which may have taken effect: its status call decides, never the refusal.
    public static let duplicateCode = "INVALID_TRANSACTION_ID"

    /// `authRequestId`: merchant's unique transaction id; it also appears in the status URL path.
    public static let authRequestIdMaxLength = 35
    /// `merchantUserId`: PhonePe's example is a 36-character UUID.
    public static let merchantUserIdMaxLength = 36
    /// `subscriptionId`: PhonePe-issued (25 characters in the examples). (unconfirmed upper bound)
    public static let subscriptionIdMaxLength = 64
    /// `merchantId`: PhonePe-issued MID, part of the status URL path. (unconfirmed upper bound)
    public static let merchantIdMaxLength = 64
    /// `merchantCallBackScheme`: an iOS URL scheme (RFC 3986 scheme syntax). (unconfirmed upper bound)
    public static let callBackSchemeMaxLength = 64

    /// The only `paymentScope` the iOS intent flow uses (documented as "Default: PHONEPE").
    public static let paymentScope = "PHONEPE"
    public static let deviceOS = "IOS"
    /// PhonePe settles in Indian rupees; `amount` is in paise.
    public static let currency = "INR"

    /// Status-call codes meaning PhonePe has no record of the auth request. (unconfirmed names)
    public static let notFoundCodes: Set<String> = ["TRANSACTION_NOT_FOUND", "AUTH_REQUEST_NOT_FOUND", "NOT_FOUND"]

    /// Largest callback/response body this module decodes; PhonePe's are a few hundred bytes.
    public static let maxDocumentBytes = 64 * 1024

    /// `[A-Za-z0-9_-]`: safe verbatim in a URL path, a query value and a JSON string.
    public static func isIdentifier(_ text: String, maxLength: Int) -> Bool {
        SafeIdentifier.isValid(text, maxLength: maxLength)
    }

    /// RFC 3986 scheme: `ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )`.
    public static func isURLScheme(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard let first = bytes.first, bytes.count <= callBackSchemeMaxLength, isAlpha(first) else { return false }
        return bytes.allSatisfy { byte in
            isAlpha(byte) || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
                || byte == UInt8(ascii: "+") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".")
        }
    }

    /// An absolute http(s) URL with no whitespace or control characters (it goes into a header
    /// or a request line verbatim, so CR/LF must never pass).
    public static func isHTTPURL(_ text: String) -> Bool {
        guard text.hasPrefix("http://") || text.hasPrefix("https://") else { return false }
        let bytes = text.utf8
        guard bytes.count <= 2048 else { return false }
        let hostStart = text.hasPrefix("https://") ? 8 : 7
        guard bytes.count > hostStart else { return false }
        return bytes.allSatisfy { $0 > 0x20 && $0 < 0x7F }
    }

    private static func isAlpha(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z")) || (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
    }
}

extension Rejection.Code {
    /// A merchant's PhonePe settings are unusable (the message names the setting, never a secret).
    static let phonePeInvalidConfig = Rejection.Code(rawValue: "INVALID_CONFIG")
}

extension PhonePeConfig {
    /// Checks the settings that end up in URLs and headers, so a bad config is a `rejected`
    /// outcome naming the setting rather than a malformed request.
    func validated() throws(Rejection) -> (baseURL: String, merchantId: String) {
        guard PhonePeRules.isHTTPURL(baseURL) else {
            throw Rejection(.phonePeInvalidConfig, field: "phonepe.baseURL", "phonepe.baseURL must be an absolute http(s) URL without spaces")
        }
        guard PhonePeRules.isIdentifier(merchantId, maxLength: PhonePeRules.merchantIdMaxLength) else {
            throw Rejection(
                .phonePeInvalidConfig, field: "phonepe.merchantId",
                "phonepe.merchantId must be 1-\(PhonePeRules.merchantIdMaxLength) characters of [A-Za-z0-9_-]")
        }
        guard !saltKey.isEmpty else {
            throw Rejection(.missingCredentials, field: "phonepe.saltKey", "phonepe.saltKey is empty")
        }
        guard !saltIndex.isEmpty, saltIndex.utf8.count <= 8, saltIndex.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
            throw Rejection(.phonePeInvalidConfig, field: "phonepe.saltIndex", "phonepe.saltIndex must be 1-8 digits")
        }
        guard PhonePeRules.isHTTPURL(callbackURL) else {
            throw Rejection(
                .phonePeInvalidConfig, field: "phonepe.callbackURL",
                "phonepe.callbackURL must be an absolute http(s) URL without spaces")
        }
        var base = baseURL
        while base.hasSuffix("/") { base.removeLast() }
        return (base, merchantId)
    }
}

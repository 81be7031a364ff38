import PaypipeCore

extension CleengReceipt {
    /// The signer's work for `appleReceipt`: `POST {receiptURL}` with HTTP Basic auth and the JSON
    /// body `{customerToken, offerId, receiptData, transactionId}` (Cleeng's Apple receipt
    /// documentation). `ipAddress` is not part of the receipt call; it only travels with
    /// getAccessStatus.
    public static func request(order: Order, config: CleengConfig) throws(Rejection) -> HTTPRequestSpec {
        try CleengReceipt(order: order).request(config: config)
    }

    public func request(config: CleengConfig) throws(Rejection) -> HTTPRequestSpec {
        let authorization = try CleengBasicAuth.headerValue(username: config.username, password: config.password)
        let body: JSONValue = [
            "customerToken": .string(customerToken), "offerId": .string(offerId),
            "receiptData": .string(receiptData), "transactionId": .string(transactionId),
        ]
        return HTTPRequestSpec(
            method: .POST, url: config.receiptURL,
            headers: [
                HTTPHeader("Authorization", authorization),
                HTTPHeader("Content-Type", "application/json"),
                HTTPHeader("Accept", "application/json"),
            ],
            body: body.bytes)
    }
}

/// HTTP Basic credentials (RFC 7617) for the receipt endpoint.
public enum CleengBasicAuth {
    /// `Basic base64(username:password)`. A username holding ':' cannot be expressed in Basic auth,
    /// and empty credentials would only earn a 401, so both are refused up front.
    public static func headerValue(username: String, password: Secret) throws(Rejection) -> String {
        guard !username.isEmpty, !password.isEmpty else {
            throw Rejection(.missingCredentials, field: "cleeng.username", "the cleeng username and password must both be configured")
        }
        guard !username.utf8.contains(UInt8(ascii: ":")) else {
            throw Rejection(.missingCredentials, field: "cleeng.username", "the cleeng username must not contain ':' (HTTP Basic auth)")
        }
        return "Basic " + Base64.encodeToString(Array(username.utf8) + [UInt8(ascii: ":")] + password.utf8, .standard)
    }

    /// Checks an incoming `Authorization` header against the expected credentials, in constant time.
    public static func matches(_ header: String?, username: String, password: Secret) -> Bool {
        guard let header else { return false }
        let trimmed = header.drop { $0 == " " }
        guard trimmed.count > 6, trimmed.prefix(6).lowercased() == "basic " else { return false }
        let encoded = String(trimmed.dropFirst(6)).trimmingSpaces
        guard let decoded = Base64.decode(encoded, .standard) else { return false }
        let expected = Array(username.utf8) + [UInt8(ascii: ":")] + password.utf8
        return ConstantTime.equals(decoded, expected)
    }
}

extension String {
    var trimmingSpaces: String {
        var view = Substring(self)
        while view.first == " " { view = view.dropFirst() }
        while view.last == " " { view = view.dropLast() }
        return String(view)
    }
}

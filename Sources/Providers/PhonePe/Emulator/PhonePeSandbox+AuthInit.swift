import Foundation
import PaypipeCore
import PhonePe
import Sandbox

/// The sandbox's answer to an auth/init: the HTTP response, and the mandate it created (nil
/// when it refused the request; set for an INTERNAL_SERVER_ERROR scenario, where it was created).
public struct PhonePeSandboxAuthInitReply: Sendable, Equatable {
    public var response: HTTPResponseSpec
    public var mandate: PhonePeSandboxMandate?
}

extension PhonePeSandbox {
    public func handleAuthInit(_ request: HTTPRequestSpec, authWorkflowType: PhonePeAuthWorkflowType? = nil) -> PhonePeSandboxAuthInitReply {
        handleAuthInit(path: Self.path(of: request.url), headers: request.headers, body: request.body, authWorkflowType: authWorkflowType)
    }

    /// Verifies an incoming `POST /v3/recurring/auth/init` as PhonePe would: path, headers,
    /// X-VERIFY over `request + path`, base64 + JSON payload, required fields, and the amount
    /// rule. PhonePe knows each subscription's workflow from its creation; pass it as
    /// `authWorkflowType` when the sandbox knows it, otherwise the payload decides (an amount
    /// means TRANSACTION).
    public func handleAuthInit(
        path: String, headers: [HTTPHeader], body: [UInt8], authWorkflowType: PhonePeAuthWorkflowType? = nil
    ) -> PhonePeSandboxAuthInitReply {
        switch verifyAuthInit(path: path, headers: headers, body: body, authWorkflowType: authWorkflowType) {
        case .failure(let refusal):
            return PhonePeSandboxAuthInitReply(response: refusal.response, mandate: nil)
        case .success(let mandate):
            return answer(for: mandate)
        }
    }

    /// The answer to an authentic auth/init for `mandate` seen for the first time (the emulator
    /// refuses a used authRequestId before this: `duplicateTransactionId`). It depends on the
    /// mandate alone.
    package func answer(for mandate: PhonePeSandboxMandate) -> PhonePeSandboxAuthInitReply {
        if let (status, code, message) = mandate.scenario.refusal {
            let created = mandate.scenario == .internalServerError ? mandate : nil
            return PhonePeSandboxAuthInitReply(response: Self.refusal(status, code, message), mandate: created)
        }
        let data: JSONValue = ["redirectType": "INTENT", "redirectURL": .string(redirectURL(for: mandate))]
        return PhonePeSandboxAuthInitReply(
            response: Self.envelope(
                status: 200, success: true, code: "SUCCESS", message: "Your request has been successfully completed.", data: data),
            mandate: mandate)
    }

    package struct Refusal: Error {
        let response: HTTPResponseSpec
        static func badRequest(_ message: String) -> Refusal { Refusal(response: PhonePeSandbox.refusal(400, "BAD_REQUEST", message)) }
    }

    package func verifyAuthInit(
        path: String, headers: [HTTPHeader], body: [UInt8], authWorkflowType: PhonePeAuthWorkflowType?
    ) -> Result<PhonePeSandboxMandate, Refusal> {
        let path = path.split(separator: "?", maxSplits: 1).first.map(String.init) ?? path
        guard path == Self.authInitPath else {
            return .failure(Refusal(response: Self.refusal(404, "NOT_FOUND", "No API at \(path.prefix(100))")))
        }
        guard let contentType = Self.header("Content-Type", in: headers), contentType.lowercased().hasPrefix("application/json") else {
            return .failure(.badRequest("Content-Type must be application/json"))
        }
        guard let callbackURL = Self.header("X-CALLBACK-URL", in: headers), PhonePeRules.isHTTPURL(callbackURL) else {
            return .failure(.badRequest("X-CALLBACK-URL header must be an absolute http(s) URL"))
        }
        guard body.count <= PhonePeRules.maxDocumentBytes, let document = try? JSONValue.parse(body),
            let request = document["request"]?.stringValue, !request.isEmpty
        else {
            return .failure(.badRequest("body must be {\"request\": base64 payload}"))
        }
        guard let xVerify = Self.header("X-VERIFY", in: headers) else {
            return .failure(Refusal(response: Self.refusal(401, "AUTHORIZATION_FAILED", "X-VERIFY header is missing")))
        }
        guard checksumMatches(xVerify, message: request + Self.authInitPath) else {
            return .failure(Refusal(response: Self.refusal(401, "AUTHORIZATION_FAILED", "X-VERIFY checksum mismatch")))
        }
        guard let decoded = Data(base64Encoded: request), let payloadValue = try? JSONValue.parse(Array(decoded)),
            case .object(let payload) = payloadValue
        else {
            return .failure(.badRequest("request must be base64 of a JSON object"))
        }
        return mandate(from: payload, callbackURL: callbackURL, authWorkflowType: authWorkflowType)
    }

    private func mandate(
        from payload: [String: JSONValue], callbackURL: String, authWorkflowType: PhonePeAuthWorkflowType?
    ) -> Result<PhonePeSandboxMandate, Refusal> {
        func requiredString(_ key: String) -> Result<String, Refusal> {
            guard let text = payload[key]?.stringValue, !text.isEmpty else { return .failure(.badRequest("\(key) is required (a non-empty string)")) }
            return .success(text)
        }
        let merchantId: String, merchantUserId: String, subscriptionId: String, authRequestId: String
        switch (requiredString("merchantId"), requiredString("merchantUserId"), requiredString("subscriptionId"), requiredString("authRequestId")) {
        case (.success(let a), .success(let b), .success(let c), .success(let d)):
            (merchantId, merchantUserId, subscriptionId, authRequestId) = (a, b, c, d)
        case (.failure(let e), _, _, _), (_, .failure(let e), _, _), (_, _, .failure(let e), _), (_, _, _, .failure(let e)): return .failure(e)
        }
        guard merchantId == self.merchantId else {
            return .failure(Refusal(response: Self.refusal(401, "AUTHORIZATION_FAILED", "merchantId does not match the checksum's key")))
        }
        guard PhonePeRules.isIdentifier(authRequestId, maxLength: PhonePeRules.authRequestIdMaxLength) else {
            return .failure(
                Refusal(
                    response: Self.refusal(
                        400, "INVALID_TRANSACTION_ID",
                        "authRequestId must be 1-\(PhonePeRules.authRequestIdMaxLength) characters of [A-Za-z0-9_-]")))
        }
        guard PhonePeRules.isIdentifier(merchantUserId, maxLength: PhonePeRules.merchantUserIdMaxLength) else {
            return .failure(.badRequest("merchantUserId must be 1-\(PhonePeRules.merchantUserIdMaxLength) characters of [A-Za-z0-9_-]"))
        }
        guard PhonePeRules.isIdentifier(subscriptionId, maxLength: PhonePeRules.subscriptionIdMaxLength) else {
            return .failure(Refusal(response: Self.refusal(400, "SUBSCRIPTION_NOT_FOUND", "Subscription not found.")))
        }
        if let scope = payload["paymentScope"], scope != .string(PhonePeRules.paymentScope) {
            return .failure(.badRequest("paymentScope must be PHONEPE for the PhonePe intent flow"))
        }
        guard let device = payload["deviceContext"]?.objectValue else {
            return .failure(.badRequest("deviceContext is required for the intent flow"))
        }
        guard device["deviceOS"] == .string(PhonePeRules.deviceOS) else {
            return .failure(.badRequest("deviceContext.deviceOS must be IOS"))
        }
        // PhonePe's recurring auth/init request table marks it mandatory ("Yes").
        guard let value = device["merchantCallBackScheme"] else {
            return .failure(.badRequest("deviceContext.merchantCallBackScheme is mandatory"))
        }
        guard let scheme = value.stringValue, PhonePeRules.isURLScheme(scheme) else {
            return .failure(.badRequest("deviceContext.merchantCallBackScheme must be a URL scheme"))
        }

        let amount: Int64?
        switch (authWorkflowType, payload["amount"]) {
        case (.pennyDrop, .some):
            return .failure(.badRequest("amount must not be passed when authWorkflowType is PENNY_DROP"))
        case (.pennyDrop, .none), (nil, .none):
            amount = nil
        case (.transaction, .none):
            return .failure(.badRequest("amount is mandatory when authWorkflowType is TRANSACTION"))
        case (.transaction, .some(let value)), (nil, .some(let value)):
            guard let paise = value.integerValue, paise > 0 else {
                return .failure(.badRequest("amount must be a positive integer in paise"))
            }
            amount = paise
        }

        return .success(
            PhonePeSandboxMandate(
                merchantId: merchantId, merchantUserId: merchantUserId, subscriptionId: subscriptionId, authRequestId: authRequestId,
                amount: amount, callbackURL: callbackURL, merchantCallBackScheme: scheme,
                scenario: PhonePeSandboxScenario(subscriptionId: subscriptionId)))
    }

    /// A UPI-mandate intent in the shape of PhonePe's auth/init sample. A PENNY_DROP mandate shows
    /// the ₹1.00 verification debit.
    public func redirectURL(for mandate: PhonePeSandboxMandate) -> String {
        let rupees = Self.rupees(mandate.amount ?? 100)
        let fields: [(String, String)] = [
            ("pn", mandate.merchantId), ("pa", mandate.merchantId.lowercased() + "@ybl"),
            ("tid", "YBL" + Digest.sha256Hex("tid/" + mandate.authRequestId).prefix(32)),
            ("tr", mandate.providerReferenceId), ("am", rupees), ("mam", rupees), ("cu", PhonePeRules.currency),
            ("url", "https://phonepe.com"), ("mc", "7299"), ("tn", "Payment for " + mandate.authRequestId),
            ("utm_source", mandate.authRequestId), ("utm_medium", mandate.merchantId), ("utm_campaign", "SUBSCRIBE_AUTH"),
        ]
        return "ppe://mandate?" + fields.map { "\($0.0)=\(Self.percentEncoded($0.1))" }.joined(separator: "&")
    }

    /// Paise as rupees with two decimals, without floating point: 39900 → "399.00".
    package static func rupees(_ paise: Int64) -> String {
        let cents = paise % 100
        return "\(paise / 100).\(cents < 10 ? "0" : "")\(cents)"
    }

    /// RFC 3986 query value: everything but unreserved characters and ":" "/" "@" is escaped (they are legal in a query value).
    package static func percentEncoded(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: ":"), UInt8(ascii: "/"), UInt8(ascii: "@"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let hex = Array("0123456789ABCDEF".unicodeScalars)
                out += "%"
                out.unicodeScalars.append(hex[Int(byte >> 4)])
                out.unicodeScalars.append(hex[Int(byte & 0x0F)])
            }
        }
        return out
    }
}

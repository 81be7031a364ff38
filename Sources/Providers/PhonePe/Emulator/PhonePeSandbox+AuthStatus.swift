import PaypipeCore
import PhonePe
import Sandbox

/// An incoming auth-status call after verification.
public enum PhonePeSandboxStatusQuery: Sendable, Equatable {
    /// Authentic: look the mandate up and answer with `authStatusResponse` (or `authStatusNotFound`).
    case valid(authRequestId: String)
    /// Refused as PhonePe would; answer with this response.
    case rejected(HTTPResponseSpec)
}

extension PhonePeSandbox {
    public func verifyAuthStatus(_ request: HTTPRequestSpec) -> PhonePeSandboxStatusQuery {
        verifyAuthStatus(path: Self.path(of: request.url), headers: request.headers)
    }

    /// Verifies `GET /v3/recurring/auth/status/{merchantId}/{authRequestId}` and its X-VERIFY
    /// (sha256hex(path + saltKey) + "###" + saltIndex).
    public func verifyAuthStatus(path: String, headers: [HTTPHeader]) -> PhonePeSandboxStatusQuery {
        let path = path.split(separator: "?", maxSplits: 1).first.map(String.init) ?? path
        guard path.hasPrefix(Self.authStatusPathPrefix) else {
            return .rejected(Self.refusal(404, "NOT_FOUND", "No API at \(path.prefix(100))"))
        }
        let ids = path.dropFirst(Self.authStatusPathPrefix.count).split(separator: "/", omittingEmptySubsequences: false)
        guard ids.count == 2, PhonePeRules.isIdentifier(String(ids[0]), maxLength: PhonePeRules.merchantIdMaxLength),
            PhonePeRules.isIdentifier(String(ids[1]), maxLength: 64)
        else {
            return .rejected(Self.refusal(400, "BAD_REQUEST", "path must be /v3/recurring/auth/status/{merchantId}/{authRequestId}"))
        }
        guard let xVerify = Self.header("X-VERIFY", in: headers), checksumMatches(xVerify, message: path) else {
            return .rejected(Self.refusal(401, "AUTHORIZATION_FAILED", "X-VERIFY checksum mismatch"))
        }
        guard ids[0] == merchantId else {
            return .rejected(Self.refusal(401, "AUTHORIZATION_FAILED", "merchantId does not match the checksum's key"))
        }
        return .valid(authRequestId: String(ids[1]))
    }

    /// The status response for a known mandate, shaped like PhonePe's auth-status samples.
    public func authStatusResponse(for mandate: PhonePeSandboxMandate, outcome: PhonePeSandboxAuthOutcome) -> HTTPResponseSpec {
        Self.envelope(
            status: 200, success: true, code: "SUCCESS", message: Self.message(for: outcome),
            data: .object(authData(for: mandate, outcome: outcome, amount: mandate.amount, namesAccount: true)))
    }

    /// The answer for an authRequestId the sandbox never accepted (`transactionNotFound`: HTTP
    /// 404 TRANSACTION_NOT_FOUND, as for an unknown debit; not documented for v3 recurring).
    public func authStatusNotFound(authRequestId: String) -> HTTPResponseSpec {
        Self.transactionNotFound(authRequestId)
    }
}

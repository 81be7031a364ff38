import PaypipeCore

/// `GET /v3/recurring/auth/status/{merchantId}/{authRequestId}`: resolves an `unknown` auth/init
/// and a callback that never came. PhonePe's reference lists only Content-Type and X-VERIFY for
/// this call, so no X-MERCHANT-ID header is sent.
public enum PhonePeAuthStatus {
    public static func path(merchantId: String, authRequestId: String) -> String {
        PhonePeRules.authStatusPathPrefix + merchantId + "/" + authRequestId
    }

    /// `baseURL` without a trailing slash; both ids already checked to be `[A-Za-z0-9_-]`.
    static func request(baseURL: String, merchantId: String, authRequestId: String, checksum: PhonePeChecksum) -> HTTPRequestSpec {
        let path = path(merchantId: merchantId, authRequestId: authRequestId)
        return HTTPRequestSpec(
            method: .GET, url: baseURL + path,
            headers: [HTTPHeader("Content-Type", "application/json"), HTTPHeader("X-VERIFY", checksum.xVerify(path: path))])
    }

    /// The status request for an authInit order (same `authRequestId` its auth/init carried).
    public static func request(order: Order, config: PhonePeConfig, checksum: PhonePeChecksum) throws(Rejection) -> HTTPRequestSpec {
        let (baseURL, merchantId) = try config.validated()
        let params = try PhonePeAuthInitParams(order: order)
        return request(baseURL: baseURL, merchantId: merchantId, authRequestId: params.authRequestId, checksum: checksum)
    }

    /// The verdict for the authInit order from a status response. A status call is read-only, so
    /// whatever does not settle the order (429, 5xx, INTERNAL_SERVER_ERROR, an unreadable body, a
    /// code this table does not know) is `unknown`: ask again later. It never returns `retry`,
    /// and nothing here is a reason to resend the auth/init.
    /// No record at PhonePe (a not-found code) means the auth/init never took effect and the app
    /// never got a redirect: `failed` with `AUTH_REQUEST_NOT_FOUND`.
    public static func classify(_ response: HTTPResponseSpec, expected: PhonePeAuthInitParams, merchantId: String) -> ProviderVerdict {
        let status = response.status
        if status == 429 || status >= 500 {
            return .unknown(reason: "PhonePe auth status answered HTTP \(status)")
        }
        guard let envelope = PhonePeResponse(json: response.body) else {
            return .unknown(reason: "PhonePe auth status answered HTTP \(status) without a readable response envelope")
        }
        let code = envelope.code ?? ""
        if PhonePeRules.notFoundCodes.contains(code) {
            return .failed(code: .authRequestNotFound, message: "PhonePe has no auth request \(expected.authRequestId) (\(code))")
        }
        guard code == "SUCCESS", envelope.success != false, let data = envelope.data else {
            return .unknown(reason: "PhonePe auth status answered HTTP \(status) code \(code.isEmpty ? "absent" : String(code.prefix(64)))")
        }
        let state: PhonePeAuthState
        do {
            state = try PhonePeAuthState(data: data)
        } catch {
            return .unknown(reason: "PhonePe auth status response is malformed: \(error.description)")
        }
        return state.verdict(expected: expected, merchantId: merchantId)
    }

    /// As above, reading the expected references from the order itself.
    public static func classify(_ response: HTTPResponseSpec, order: Order, merchantId: String) -> ProviderVerdict {
        do {
            return classify(response, expected: try PhonePeAuthInitParams(order: order), merchantId: merchantId)
        } catch {
            return .failed(code: OutcomeErrorCode(error.code), message: error.message)
        }
    }
}

import PaypipeCore

/// One getAccessStatus answer, read the way the poller needs it (Cleeng's JSON-RPC API
/// documentation).
public enum CleengAccessStatus: Sendable, Equatable {
    /// Access granted: terminal success.
    case granted(CleengAccessGrant)
    /// Not (yet) granted: keep polling.
    case notGranted
    /// A Cleeng error that no amount of waiting fixes (1, 4, 16): stop polling now.
    case fatalError(code: Int64, message: String)
    /// Anything that says nothing about the purchase (error 14, other error codes, transport
    /// failures, non-2xx, malformed bodies): keep polling; it never shortens the schedule.
    case transient(reason: String)

    /// Cleeng JSON-RPC error codes.
    public enum ErrorCode {
        public static let invalidCustomerToken: Int64 = 1
        public static let offerNotFound: Int64 = 4
        public static let ipLimitReached: Int64 = 14
        public static let invalidArguments: Int64 = 16
        /// Codes that end polling at once.
        public static let fatal: Set<Int64> = [invalidCustomerToken, offerNotFound, invalidArguments]
    }

    /// The verdict this answer settles, or nil when polling goes on.
    public var verdict: ProviderVerdict? {
        switch self {
        case .granted(let grant): .succeeded(grant.result)
        case .fatalError(let code, let message):
            .failed(code: .cleengError(code), message: "cleeng getAccessStatus error \(code): \(message)")
        case .notGranted, .transient: nil
        }
    }
}

public struct CleengAccessGrant: Sendable, Equatable {
    public var grantType: String?
    /// Unix seconds; nil for access that does not expire.
    public var expiresAt: Int64?
    public var purchasedDirectly: Bool?

    public init(grantType: String? = nil, expiresAt: Int64? = nil, purchasedDirectly: Bool? = nil) {
        self.grantType = grantType
        self.expiresAt = expiresAt
        self.purchasedDirectly = purchasedDirectly
    }

    /// The `succeeded` outcome's result: `{accessGranted, grantType, expiresAt}`.
    public var result: [String: JSONValue] {
        [
            "accessGranted": true,
            "grantType": grantType.map(JSONValue.string) ?? .null,
            "expiresAt": expiresAt.map(JSONValue.integer) ?? .null,
        ]
    }
}

/// getAccessStatus over Cleeng's JSON-RPC 2.0 API: the request the poller sends and the reading of
/// what comes back.
public enum CleengAccessStatusCall {
    /// `POST {apiURL}` `{"method":"getAccessStatus","params":{customerToken, offerId, ipAddress?},"jsonrpc":"2.0","id":n}`.
    /// The call needs no publisher credentials: the customer token is the authorisation.
    public static func request(receipt: CleengReceipt, config: CleengConfig, requestId: Int) -> HTTPRequestSpec {
        request(
            customerToken: receipt.customerToken, offerId: receipt.offerId, ipAddress: receipt.ipAddress,
            apiURL: config.apiURL, requestId: requestId)
    }

    /// The same, straight from the `appleReceipt` order (the poller holds the order, not the receipt).
    public static func request(order: Order, config: CleengConfig, requestId: Int) throws(Rejection) -> HTTPRequestSpec {
        request(receipt: try CleengReceipt(order: order), config: config, requestId: requestId)
    }

    public static func request(customerToken: String, offerId: String, ipAddress: String?, apiURL: String, requestId: Int) -> HTTPRequestSpec {
        var params: [String: JSONValue] = ["customerToken": .string(customerToken), "offerId": .string(offerId)]
        if let ipAddress { params["ipAddress"] = .string(ipAddress) }
        let body: JSONValue = [
            "method": "getAccessStatus", "params": .object(params), "jsonrpc": "2.0", "id": .integer(Int64(requestId)),
        ]
        return HTTPRequestSpec(
            method: .POST, url: apiURL,
            headers: [HTTPHeader("Content-Type", "application/json"), HTTPHeader("Accept", "application/json")],
            body: body.bytes)
    }

    /// Reads an HTTP answer. `expectedId`, when given, must match the response's `id`; a mismatch
    /// is treated as a malformed answer (keep polling) rather than trusted.
    public static func classify(_ response: HTTPResponseSpec, expectedId: Int? = nil) -> CleengAccessStatus {
        guard (200...299).contains(response.status) else {
            return .transient(reason: "getAccessStatus answered HTTP \(response.status)")
        }
        return classify(body: response.body, expectedId: expectedId)
    }

    public static func classify(body: [UInt8], expectedId: Int? = nil) -> CleengAccessStatus {
        guard let document = try? JSONValue.parse(body), case .object(let object) = document else {
            return .transient(reason: "getAccessStatus answered a body that is not a JSON object")
        }
        if let expectedId, object["id"] != .integer(Int64(expectedId)), object["id"] != .string(String(expectedId)) {
            return .transient(reason: "getAccessStatus answered for another request id")
        }
        if let error = object["error"], error != .null {
            guard let code = error["code"]?.integerValue else {
                return .transient(reason: "getAccessStatus answered an error without an integer code")
            }
            let message = CleengParamRules.printable(error["message"]?.stringValue ?? "", limit: 200)
            if CleengAccessStatus.ErrorCode.fatal.contains(code) {
                return .fatalError(code: code, message: message)
            }
            return .transient(reason: "getAccessStatus error \(code): \(message)")
        }
        guard let result = object["result"]?.objectValue, let accessGranted = result["accessGranted"]?.boolValue else {
            return .transient(reason: "getAccessStatus answered without result.accessGranted")
        }
        guard accessGranted else { return .notGranted }
        // Cleeng's grant is the truth about the purchase: an odd expiresAt must not turn it into a failure.
        var expiresAt: Int64?
        switch result["expiresAt"] {
        case .integer(let seconds)?: expiresAt = seconds
        case .string(let text)?: expiresAt = Int64(text)
        default: expiresAt = nil
        }
        return .granted(
            CleengAccessGrant(
                grantType: result["grantType"]?.stringValue, expiresAt: expiresAt,
                purchasedDirectly: result["purchasedDirectly"]?.boolValue))
    }

    /// A request that never produced a response: keep polling.
    public static func classifyTransportFailure(reason: String) -> CleengAccessStatus {
        .transient(reason: "getAccessStatus unreachable: \(CleengParamRules.printable(reason, limit: 200))")
    }
}

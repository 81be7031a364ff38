import Cleeng
import PaypipeCore
import Sandbox

/// What the provider sandbox needs to stand in for Cleeng: the receipt endpoint's checks and
/// answers, and getAccessStatus requests and responses.
public enum CleengSandbox {
    /// The result of checking one receipt POST: the response to send and, when accepted, the receipt
    /// (so the sandbox can grant access to it later).
    public struct ReceiptCheck: Sendable, Equatable {
        public let response: HTTPResponseSpec
        public let receipt: CleengReceipt?
    }

    /// Checks a receipt POST as Cleeng's endpoint would: method, HTTP Basic credentials (constant
    /// time), a JSON object body with non-empty `customerToken`, `offerId`, base64 `receiptData` and
    /// `transactionId`. Answers as Cleeng's receipt endpoint documents (developers.cleeng.com
    /// reference "apple-ios-and-tvos-payment", errors table; "ios-and-tvos": a 200 only confirms
    /// the request's structure): 200 with an empty body; 400 `REQ0001`; 401 `AUTH0001` without
    /// credentials, `AUTH0002` with wrong ones; errors as `{"code","message"}`. A 400 message
    /// names the field, never its value.
    public static func verifyReceiptRequest(_ request: HTTPRequestSpec, username: String, password: Secret) -> ReceiptCheck {
        guard request.method == .POST else {
            // Not documented by Cleeng; kept as it was.
            return ReceiptCheck(response: jsonResponse(405, ["error": "method not allowed"], headers: [HTTPHeader("Allow", "POST")]), receipt: nil)
        }
        let authorization = request.header("Authorization")
        guard isAuthorized(authorization, username: username, password: password) else {
            let refusal: JSONValue =
                authorization == nil
                ? ["code": "AUTH0001", "message": "Missing required JWT"] : ["code": "AUTH0002", "message": "Invalid JWT token"]
            return ReceiptCheck(
                response: jsonResponse(401, refusal, headers: [HTTPHeader("WWW-Authenticate", "Basic realm=\"Cleeng\"")]), receipt: nil)
        }
        guard let document = try? JSONValue.parse(request.body), case .object(let fields) = document else {
            return ReceiptCheck(response: jsonResponse(400, invalidRequestBody("the body is not a JSON object")), receipt: nil)
        }
        do {
            let receipt = try CleengReceipt(fields: fields)
            return ReceiptCheck(response: HTTPResponseSpec(status: 200, headers: [], body: []), receipt: receipt)
        } catch {
            let message = error.message.hasPrefix("params.") ? String(error.message.dropFirst("params.".count)) : error.message
            return ReceiptCheck(response: jsonResponse(400, invalidRequestBody(message)), receipt: nil)
        }
    }

    /// Cleeng's `REQ0001` "Invalid request body", the reason after a colon.
    package static func invalidRequestBody(_ reason: String) -> JSONValue {
        ["code": "REQ0001", "message": .string("Invalid request body: " + reason)]
    }

    /// HTTP Basic (RFC 7617) checked by the sandbox's own decoding, not the client's
    /// `CleengBasicAuth`, in constant time.
    package static func isAuthorized(_ header: String?, username: String, password: Secret) -> Bool {
        guard let credentials = SandboxCrypto.basicCredentials(header, lenient: true) else { return false }
        let userMatches = SandboxCrypto.constantTimeEquals(credentials.user, Array(username.utf8))
        let passwordMatches = SandboxCrypto.constantTimeEquals(credentials.password, password.utf8)
        return userMatches && passwordMatches
    }

    /// A getAccessStatus call as the sandbox received it.
    public struct AccessQuery: Sendable, Equatable {
        public let id: JSONValue
        public let customerToken: String
        public let offerId: String
        public let ipAddress: String?
    }

    /// A JSON-RPC error the sandbox answers with (`id` is null when the request had none).
    public struct RPCError: Error, Sendable, Equatable {
        public let id: JSONValue
        public let code: Int64
        public let message: String
        public var response: HTTPResponseSpec { CleengSandbox.accessStatusError(id: id, code: code, message: message) }
    }

    /// Reads a getAccessStatus request; malformed ones get Cleeng's error 16 (invalid arguments),
    /// a wrong method the JSON-RPC "method not found" (-32601). An empty `ipAddress` is read as
    /// absent: Cleeng's own v3 request example sends `"ipAddress": ""`.
    public static func parseAccessStatusRequest(_ body: [UInt8]) -> Result<AccessQuery, RPCError> {
        guard let document = try? JSONValue.parse(body), case .object(let object) = document else {
            return .failure(RPCError(id: .null, code: -32700, message: "Parse error"))
        }
        let id = object["id"] ?? .null
        func invalid(_ why: String) -> Result<AccessQuery, RPCError> {
            .failure(RPCError(id: id, code: CleengAccessStatus.ErrorCode.invalidArguments, message: "Invalid arguments: \(why)"))
        }
        guard object["jsonrpc"] == "2.0" else { return invalid("jsonrpc must be \"2.0\"") }
        guard object["method"] == "getAccessStatus" else {
            return .failure(RPCError(id: id, code: -32601, message: "Method not found"))
        }
        guard let params = object["params"]?.objectValue else { return invalid("params must be an object") }
        guard let token = params["customerToken"]?.stringValue, !token.isEmpty else { return invalid("customerToken is required") }
        guard let offerId = params["offerId"]?.stringValue, !offerId.isEmpty else { return invalid("offerId is required") }
        var ipAddress: String?
        if let ip = params["ipAddress"], ip != .null, ip != "" {
            guard let text = ip.stringValue, CleengParamRules.isIPAddress(text) else { return invalid("ipAddress is not an IP address") }
            ipAddress = text
        }
        return .success(AccessQuery(id: id, customerToken: token, offerId: offerId, ipAddress: ipAddress))
    }

    /// The grant type Cleeng's response examples show for a purchased offer.
    public static let directPurchase = "direct-purchase"

    /// The `id` as Cleeng answers it: every documented example answers request `"id": 1` with
    /// `"id": "1"` (developers.cleeng.com getAccessStatus, getAccessStatusForDevice,
    /// getCustomerEmail), so a number comes back as its decimal string; a string (or null) as sent.
    public static func answeredId(_ id: JSONValue) -> JSONValue {
        if case .integer(let number) = id { return .string(String(number)) }
        return id
    }

    /// Granted: `{"result":{"accessGranted":true,"grantType":"direct-purchase","expiresAt",
    /// "purchasedDirectly"},"id":"1","error":null,"jsonrpc":"2.0"}` (the v3 response example).
    /// Not granted (nil): `{"result":{"accessGranted":false,"expiresAt":null},"id":"1",
    /// "jsonrpc":"2.0"}`, with no `error` member, as the same JSON-RPC API answers in its
    /// verifyConcurrentAccess example (fixture getAccessStatusResponse--not-granted-no-error-member).
    public static func accessStatusResponse(id: JSONValue, grant: CleengAccessGrant?) -> HTTPResponseSpec {
        guard let grant else {
            return jsonResponse(200, ["result": ["accessGranted": false, "expiresAt": .null], "id": answeredId(id), "jsonrpc": "2.0"])
        }
        let result: JSONValue = [
            "accessGranted": true, "grantType": .string(grant.grantType ?? directPurchase),
            "expiresAt": grant.expiresAt.map(JSONValue.integer) ?? .null,
            "purchasedDirectly": .bool(grant.purchasedDirectly ?? true),
        ]
        return jsonResponse(200, ["result": result, "error": .null, "id": answeredId(id), "jsonrpc": "2.0"])
    }

    /// `{"result":null,"error":{"code","message"},"id":"1","jsonrpc":"2.0"}`, answered with HTTP
    /// 200 as JSON-RPC does.
    public static func accessStatusError(id: JSONValue, code: Int64, message: String) -> HTTPResponseSpec {
        jsonResponse(
            200,
            [
                "result": .null, "error": ["code": .integer(code), "message": .string(message)], "id": answeredId(id), "jsonrpc": "2.0",
            ])
    }

    /// Cleeng's wording for its documented error codes (v3 getAccessStatus "Error Codes").
    public static func standardMessage(for code: Int64) -> String {
        switch code {
        case CleengAccessStatus.ErrorCode.invalidCustomerToken: "Invalid customer token"
        case CleengAccessStatus.ErrorCode.offerNotFound: "Offer not found"
        case CleengAccessStatus.ErrorCode.ipLimitReached: "IP address limit exceed"
        case CleengAccessStatus.ErrorCode.invalidArguments: "Invalid arguments"
        default: "Error \(code)"
        }
    }

    package static func jsonResponse(_ status: Int, _ body: JSONValue, headers: [HTTPHeader] = []) -> HTTPResponseSpec {
        HTTPResponseSpec(
            status: status, headers: [HTTPHeader("Content-Type", "application/json")] + headers,
            body: body.bytes)
    }
}

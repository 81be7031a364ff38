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
    /// `transactionId`. Error bodies name the field, never its value.
    public static func verifyReceiptRequest(_ request: HTTPRequestSpec, username: String, password: Secret) -> ReceiptCheck {
        guard request.method == .POST else {
            return ReceiptCheck(response: jsonResponse(405, ["error": "method not allowed"], headers: [HTTPHeader("Allow", "POST")]), receipt: nil)
        }
        guard isAuthorized(request.header("Authorization"), username: username, password: password) else {
            return ReceiptCheck(
                response: jsonResponse(401, ["error": "unauthorized"], headers: [HTTPHeader("WWW-Authenticate", "Basic realm=\"Cleeng\"")]),
                receipt: nil)
        }
        guard let document = try? JSONValue.parse(request.body), case .object(let fields) = document else {
            return ReceiptCheck(response: jsonResponse(400, ["error": "body must be a JSON object"]), receipt: nil)
        }
        do {
            let receipt = try CleengReceipt(fields: fields)
            return ReceiptCheck(
                response: jsonResponse(200, ["success": true, "transactionId": .string(receipt.transactionId)]), receipt: receipt)
        } catch {
            let message = error.message.hasPrefix("params.") ? String(error.message.dropFirst("params.".count)) : error.message
            return ReceiptCheck(response: jsonResponse(400, ["error": .string(message)]), receipt: nil)
        }
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
    /// a wrong method the JSON-RPC "method not found" (-32601).
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
        if let ip = params["ipAddress"], ip != .null {
            guard let text = ip.stringValue, CleengParamRules.isIPAddress(text) else { return invalid("ipAddress is not an IP address") }
            ipAddress = text
        }
        return .success(AccessQuery(id: id, customerToken: token, offerId: offerId, ipAddress: ipAddress))
    }

    /// `{"result":{"accessGranted":true,...},"error":null,...}` or, with nil, the not-granted answer.
    public static func accessStatusResponse(id: JSONValue, grant: CleengAccessGrant?) -> HTTPResponseSpec {
        let result: JSONValue
        if let grant {
            result = [
                "accessGranted": true, "grantType": grant.grantType.map(JSONValue.string) ?? "purchase",
                "expiresAt": grant.expiresAt.map(JSONValue.integer) ?? .null,
                "purchasedDirectly": .bool(grant.purchasedDirectly ?? true),
            ]
        } else {
            result = ["accessGranted": false, "grantType": .null, "expiresAt": .null, "purchasedDirectly": false]
        }
        return jsonResponse(200, ["result": result, "error": .null, "id": id, "jsonrpc": "2.0"])
    }

    /// `{"result":null,"error":{"code","message"},...}`, answered with HTTP 200 as JSON-RPC does.
    public static func accessStatusError(id: JSONValue, code: Int64, message: String) -> HTTPResponseSpec {
        jsonResponse(
            200,
            [
                "result": .null, "error": ["code": .integer(code), "message": .string(message)], "id": id, "jsonrpc": "2.0",
            ])
    }

    /// Cleeng's wording for its documented error codes.
    public static func standardMessage(for code: Int64) -> String {
        switch code {
        case CleengAccessStatus.ErrorCode.invalidCustomerToken: "Invalid customer token"
        case CleengAccessStatus.ErrorCode.offerNotFound: "Offer not found"
        case CleengAccessStatus.ErrorCode.ipLimitReached: "IP limit reached"
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

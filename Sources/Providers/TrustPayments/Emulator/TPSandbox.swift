import Crypto
import Foundation
import PaypipeCore
import Sandbox
import TrustPayments

/// The provider side of Trust Payments, for the sandbox emulator: checks incoming requests the way
/// the gateway would and builds its answers. Pure: state (known transactions) comes in as values.
/// Test amounts (Trust Payments' testing documentation): `baseamount` 70000 declines (errorcode
/// 70000), 60010 returns a bank system error (60010), anything else (1050...) succeeds.
public enum TPSandbox {
    public static let declineAmount: Int64 = 70000
    public static let bankErrorAmount: Int64 = 60010

    // MARK: JSON API

    /// Answers `POST /json/`: HTTP 401 for bad Basic credentials, 400 for a body that is not a
    /// request envelope, otherwise 200 with one response entry per request and the
    /// `requestreference` echoed at the top level only (Trust Payments' samples put it nowhere
    /// else: pypi securetrading test_converter.py, the TRANSACTIONQUERY-for-subscriptions page);
    /// a request without one gets one in Trust Payments' own form (`W57-aubk3dr3`). `records`
    /// (when the emulator keeps state) are the transactions it knows: queries filter them and
    /// updates of other references get 60014; nil accepts any reference and answers a reference
    /// query with one synthetic record.
    public static func handleWebServices(
        body: [UInt8], headers: [HTTPHeader], config: TrustPaymentsConfig, records: [[String: JSONValue]]? = nil
    ) -> HTTPResponseSpec {
        guard let authorization = headers.first(where: { $0.name.lowercased() == "authorization" })?.value,
            isAuthorized(authorization, config: config)
        else {
            return HTTPResponseSpec(
                status: 401, headers: [HTTPHeader("WWW-Authenticate", "Basic realm=\"webservices\""), HTTPHeader("Content-Type", "text/plain")],
                body: Array("Unauthorized".utf8))
        }
        guard let document = try? JSONValue.parse(body), case .object(let envelope) = document else {
            return badRequest("body is not a JSON object")
        }
        guard envelope["alias"]?.stringValue == config.webservicesUser else { return badRequest("alias must be the web services user") }
        guard envelope["version"]?.stringValue == TPWebServices.version else { return badRequest("version must be \"1.00\"") }
        guard let requests = envelope["request"]?.arrayValue, !requests.isEmpty else { return badRequest("request must be a non-empty array") }

        var entries: [JSONValue] = []
        for request in requests {
            guard case .object(let fields) = request else { return badRequest("every request must be an object") }
            entries.append(.object(answer(fields, config: config, records: records)))
        }
        let reference = requests.first?["requestreference"]?.stringValue ?? requestReference(seed: body)
        let response: JSONValue = [
            "requestreference": .string(reference), "version": .string(TPWebServices.version),
            "response": .array(entries), "secrand": .string(String(Digest.sha256Hex(body + [1]).prefix(16))),
        ]
        return HTTPResponseSpec(status: 200, headers: [HTTPHeader("Content-Type", "application/json")], body: response.bytes)
    }

    package static func isAuthorized(_ header: String, config: TrustPaymentsConfig) -> Bool {
        guard header.hasPrefix("Basic "), let decoded = Data(base64Encoded: String(header.dropFirst(6))) else { return false }
        let bytes = Array(decoded)
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")) else { return false }
        let userMatches = SandboxCrypto.constantTimeEquals(bytes[..<colon], Array(config.webservicesUser.utf8))
        let passwordMatches = SandboxCrypto.constantTimeEquals(bytes[(colon + 1)...], config.webservicesPassword.utf8)
        return userMatches && passwordMatches
    }

    package static func badRequest(_ reason: String) -> HTTPResponseSpec {
        HTTPResponseSpec(status: 400, headers: [HTTPHeader("Content-Type", "text/plain")], body: Array(reason.utf8))
    }

    package static func error(_ code: String, _ message: String, field: String? = nil, type: String) -> [String: JSONValue] {
        var entry: [String: JSONValue] = ["errorcode": .string(code), "errormessage": .string(message), "requesttypedescription": .string(type)]
        if let field { entry["errordata"] = [.string(field)] }
        return entry
    }

    /// The entry Trust Payments writes when it cannot take a request as any request type:
    /// `requesttypedescription` "ERROR", errorcode 60018 "Invalid requesttype", the type(s) it
    /// was given as `errordata` (pypi securetrading test_converter.py bad_requesttype_json,
    /// module_test_api.py test_invalid_request_no_data). This sandbox runs TRANSACTIONUPDATE and
    /// TRANSACTIONQUERY and REFUND alone, so any other request type gets this entry here.
    package static func invalidRequestType(_ types: [String]) -> [String: JSONValue] {
        var entry: [String: JSONValue] = [
            "errorcode": "60018", "errormessage": "Invalid requesttype", "requesttypedescription": "ERROR",
        ]
        if !types.isEmpty { entry["errordata"] = .array(types.prefix(8).map { JSONValue.string(String($0.prefix(64))) }) }
        return entry
    }

    package static func answer(_ request: [String: JSONValue], config: TrustPaymentsConfig, records: [[String: JSONValue]]?) -> [String: JSONValue] {
        let types = request["requesttypedescriptions"]?.arrayValue?.compactMap(\.stringValue) ?? []
        guard types.count == 1, let type = types.first, ["TRANSACTIONUPDATE", "TRANSACTIONQUERY", "REFUND"].contains(type) else {
            return invalidRequestType(types)
        }
        if type == "REFUND" { return refund(request, config: config, records: records ?? []) }
        guard case .object(let filter)? = request["filter"] else { return error("30000", "Invalid field", field: "filter", type: type) }
        var filters: [String: [String]] = [:]
        for (name, value) in filter {
            guard let list = value.arrayValue, !list.isEmpty else { return error("30000", "Invalid field", field: name, type: type) }
            var values: [String] = []
            for item in list {
                guard let text = item["value"]?.stringValue else { return error("30000", "Invalid field", field: name, type: type) }
                values.append(text)
            }
            filters[name] = values
        }
        guard let sites = filters["sitereference"] else { return error("30000", "Invalid field", field: "sitereference", type: type) }
        guard sites.allSatisfy({ $0 == config.siteReference }) else {
            return error(TPErrorCode.unauthenticated, "Unauthenticated", field: "sitereference", type: type)
        }
        if let site = request["sitereference"], site.stringValue != config.siteReference {
            return error(TPErrorCode.unauthenticated, "Unauthenticated", field: "sitereference", type: type)
        }
        return type == "TRANSACTIONUPDATE"
            ? update(request, filters: filters, records: records) : query(filters: filters, config: config, records: records)
    }

    package static func update(_ request: [String: JSONValue], filters: [String: [String]], records: [[String: JSONValue]]?) -> [String: JSONValue] {
        let type = "TRANSACTIONUPDATE"
        guard let references = filters["transactionreference"], references.count == 1, let reference = references.first else {
            return error("30000", "Invalid field", field: "transactionreference", type: type)
        }
        guard case .object(let updates)? = request["updates"], !updates.isEmpty else {
            return error("30000", "Invalid field", field: "updates", type: type)
        }
        for key in updates.keys.sorted() {
            if TPWebServices.frozenFields.contains(key) { return error(TPErrorCode.notUpdatable, "Field not updatable", field: key, type: type) }
            guard TPWebServices.updatableFields.contains(key), let value = updates[key]?.stringValue, isValidUpdate(key, value) else {
                return error("30000", "Invalid field", field: key, type: type)
            }
        }
        if let records, !records.contains(where: { $0["transactionreference"]?.stringValue == reference }) {
            return error(TPErrorCode.referenceNotFound, "Transaction not found", field: "transactionreference", type: type)
        }
        // "3" is stopped permanently ("no way back"): only the same stop again is accepted.
        if let records, let stopped = records.first(where: { $0["transactionreference"]?.stringValue == reference }),
            stopped["transactionactive"]?.stringValue == "3",
            let changed = updates.keys.sorted().first(where: { $0 != "transactionactive" || updates[$0]?.stringValue != "3" })
        {
            return error(TPErrorCode.notUpdatable, "Field not updatable", field: changed, type: type)
        }
        switch updates["baseamount"]?.stringValue.flatMap({ Int64($0) }) {
        case declineAmount?: return error(TPErrorCode.declined, "Decline", type: type)
        case bankErrorAmount?: return error(TPErrorCode.bankSystemError, "Bank System Error", type: type)
        default: return ["errorcode": "0", "errormessage": "Ok", "requesttypedescription": .string(type)]
        }
    }

    package static func isValidUpdate(_ key: String, _ value: String) -> Bool {
        let digits = !value.isEmpty && value.utf8.allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
        switch key {
        case "baseamount": return digits && value.utf8.count <= 13 && (Int64(value) ?? 0) > 0
        case "subscriptionfinalnumber": return digits && value.utf8.count <= 5
        // Trust Payments' subscription notes: "0" inactive, "1" active, "3" stopped permanently;
        // "2" (pending the first AUTH's settlement) is the engine's own and cannot be set.
        case "transactionactive": return value == "0" || value == "1" || value == "3"
        case "subscriptionfrequency": return digits && value.utf8.count <= 11 && (Int64(value) ?? 0) >= 1
        case "subscriptionunit": return value == "DAY" || value == "MONTH"
        default: return false
        }
    }

    package static func query(filters: [String: [String]], config: TrustPaymentsConfig, records: [[String: JSONValue]]?) -> [String: JSONValue] {
        let type = "TRANSACTIONQUERY"
        let criteria = filters.filter { $0.key != "sitereference" }
        guard !criteria.isEmpty else { return error("30000", "Invalid field", field: "filter", type: type) }
        let found: [JSONValue]
        if let records {
            found = records.filter { record in
                filters.allSatisfy { name, values in record[name]?.stringValue.map(values.contains) ?? false }
            }.map(JSONValue.object)
        } else if let reference = criteria["transactionreference"]?.first, criteria.count == 1 {
            found = [
                [
                    "transactionreference": .string(reference), "sitereference": .string(config.siteReference),
                    "requesttypedescription": "SUBSCRIPTION", "errorcode": "0", "settlestatus": "0", "transactionactive": "2",
                ]
            ]
        } else {
            found = []
        }
        // No `found` member: Trust Payments' TRANSACTIONQUERY answers show `records` alone.
        return ["errorcode": "0", "errormessage": "Ok", "requesttypedescription": .string(type), "records": .array(found)]
    }

    /// `transactionstartedtimestamp` as Trust Payments' query records write it: `YYYY-MM-DD HH:MM:SS`, UTC.
    package static func timestamp(milliseconds: Int64) -> String {
        String(Timestamp.iso8601(milliseconds: milliseconds).prefix(19).map { $0 == "T" ? " " : $0 })
    }

    /// A transactionreference as Trust Payments writes them (`57-9-12345678`), derived from
    /// `seed` so that a replay gets the same one; no part starts with a zero, as no number does.
    package static func transactionReference(seed: String) -> String {
        var digits = Digest.sha256Hex(Array(seed.utf8)).utf8.prefix(8).map { $0 % 10 }
        if digits[0] == 0 { digits[0] = 1 }
        return "57-9-" + digits.map(String.init).joined()
    }

    /// A requestreference in Trust Payments' own form (`W57-aubk3dr3`, `W23-rd55dned`: `W`, two
    /// digits, `-`, eight lower-case letters or digits; swift-payments TestGatewayEndpoint.swift),
    /// derived from `seed` so that the same request gets the same one.
    package static func requestReference(seed: [UInt8]) -> String {
        let bytes = SHA256.hash(data: seed).prefix(10).map(Int.init)
        let alphabet = Array("abcdefghijklmnopqrstuvwxyz0123456789")
        let digits = String(1 + bytes[0] % 9) + String(bytes[1] % 10)
        return "W" + digits + "-" + String(bytes[2..<10].map { alphabet[$0 % alphabet.count] })
    }

    // MARK: Mobile SDK payment

    /// What the gateway produces for one SDK payment: the response JWT the app receives, the
    /// URL notification it posts, and the records a stateful emulator keeps for later queries.
    public struct Payment: Sendable, Equatable {
        public var responseJWT: String
        public var notificationBody: [UInt8]
        /// The transactions as a TRANSACTIONQUERY shows them (with `sitereference`).
        public var records: [[String: JSONValue]]
        /// The payment's `requestreference` (`W57-aubk3dr3` form), the sandbox ledger's key.
        public var requestReference: String
    }

    public struct RequestError: Error, Sendable, Equatable, CustomStringConvertible {
        public let reason: String
        public var description: String { "Trust Payments SDK request refused: \(reason)" }
    }

    /// Emulates the gateway processing an SDK JWT (what the app would send after the customer
    /// taps "Pay"): the JWT must be HS256 under the merchant's secret, issued by `jwtIssuer`
    /// for the merchant's site, with the Mobile SDK's subscription fields. Outcomes follow the test
    /// amounts; the AUTH settles immediately only in the sense that `settlestatus` starts at "0".
    /// The response JWT is shaped as Trust Payments' decoded sample (swift-payments
    /// TestGatewayEndpoint.swift): claims `aud` (the JWT user), `iat`, `payload` with
    /// `requestreference`, `version`, `response` and `secrand`; its entries carry no
    /// `sitereference` and no `requestreference`. A 60010 (bank system error) AUTH keeps
    /// `settlestatus` "0" as the corpus's 60010 sample does: its final status is unknown.
    public static func processPayment(jwt: String, config: TrustPaymentsConfig, now: Int64) throws(RequestError) -> Payment {
        let claimsBytes: [UInt8]
        do {
            claimsBytes = try TPSandboxJWT.verifiedClaims(jwt, key: config.jwtSecret.utf8)
        } catch {
            throw RequestError(reason: error.reason)
        }
        guard case .object(let claims)? = try? JSONValue.parse(claimsBytes) else { throw RequestError(reason: "JWT claims are not a JSON object") }
        guard claims["iss"]?.stringValue == config.jwtIssuer else { throw RequestError(reason: "iss is not the configured JWT user") }
        guard claims["iat"]?.integerValue != nil || claims["iat"]?.stringValue != nil else { throw RequestError(reason: "iat is missing") }
        // A standard JWT claim (RFC 7519): the gateway takes no payment on an expired token.
        if let exp = claims["exp"] {
            guard let expiresAt = exp.integerValue else { throw RequestError(reason: "exp is not a number") }
            guard now < expiresAt else { throw RequestError(reason: "the JWT expired at \(expiresAt)") }
        }
        guard case .object(let payload)? = claims["payload"] else { throw RequestError(reason: "payload is missing") }
        func field(_ name: String) throws(RequestError) -> String {
            guard let value = payload[name]?.stringValue, !value.isEmpty else { throw RequestError(reason: "payload.\(name) is missing") }
            return value
        }
        guard try field("sitereference") == config.siteReference else { throw RequestError(reason: "payload.sitereference is not this site") }
        guard let amount = Int64(try field("baseamount")), amount > 0 else {
            throw RequestError(reason: "payload.baseamount must be greater than zero")
        }
        let currency = try field("currencyiso3a")
        let orderReference = try field("orderreference")
        let types = payload["requesttypedescriptions"]?.arrayValue?.compactMap(\.stringValue) ?? []
        let freeTrial = types == ["ACCOUNTCHECK", "SUBSCRIPTION"]
        guard freeTrial || types == ["THREEDQUERY", "AUTH", "SUBSCRIPTION"] else {
            throw RequestError(reason: "payload.requesttypedescriptions is not a supported subscription sequence")
        }
        guard ["DAY", "MONTH"].contains(try field("subscriptionunit")) else {
            throw RequestError(reason: "payload.subscriptionunit must be DAY or MONTH")
        }
        guard ["RECURRING", "INSTALLMENT"].contains(try field("subscriptiontype")) else {
            throw RequestError(reason: "payload.subscriptiontype is invalid")
        }
        for name in ["subscriptionfrequency", "subscriptionnumber", "subscriptionfinalnumber"] {
            guard Int64(try field(name)) != nil else { throw RequestError(reason: "payload.\(name) must be numeric") }
        }

        let requestReference = Self.requestReference(seed: Array(jwt.utf8))
        func transactionReference(_ type: String) -> String {
            Self.transactionReference(seed: "\(config.siteReference)\u{0}\(orderReference)\u{0}\(type)")
        }
        func entry(_ type: String, _ errorcode: String, _ message: String) -> [String: JSONValue] {
            [
                "requesttypedescription": .string(type), "errorcode": .string(errorcode), "errormessage": .string(message),
                "transactionreference": .string(transactionReference(type)), "orderreference": .string(orderReference),
                "baseamount": .string(String(amount)), "currencyiso3a": .string(currency),
            ]
        }
        let paymentType = freeTrial ? "ACCOUNTCHECK" : "AUTH"
        var entries: [[String: JSONValue]] = freeTrial ? [] : [entry("THREEDQUERY", "0", "Ok")]
        var payment: [String: JSONValue]
        switch amount {
        case declineAmount: payment = entry(paymentType, TPErrorCode.declined, "Decline")
        case bankErrorAmount: payment = entry(paymentType, TPErrorCode.bankSystemError, "Bank System Error")
        default: payment = entry(paymentType, "0", "Ok")
        }
        // settlestatus 3 (cancelled) for a decline; 60010 leaves it "0" (the corpus's
        // response-jwt--auth-bank-system-error-60010): Trust Payments does not know the outcome.
        payment["settlestatus"] = payment["errorcode"]?.stringValue == TPErrorCode.declined ? "3" : "0"
        payment["paymenttypedescription"] = "VISA"
        entries.append(payment)
        if payment["errorcode"] == "0" {
            var subscription = entry("SUBSCRIPTION", "0", "Ok")
            for name in [
                "subscriptiontype", "subscriptionunit", "subscriptionfrequency", "subscriptionnumber", "subscriptionfinalnumber",
                "subscriptionbegindate",
            ] {
                if let value = payload[name] { subscription[name] = value }
            }
            subscription["transactionactive"] = payload["transactionactive"] ?? "2"
            subscription["parenttransactionreference"] = .string(transactionReference(paymentType))
            entries.append(subscription)
        }

        let responseClaims: JSONValue = [
            "aud": .string(config.jwtIssuer), "iat": .integer(now),
            "payload": [
                "requestreference": .string(requestReference), "version": .string(TPWebServices.version),
                "response": .array(entries.map(JSONValue.object)),
                "secrand": .string(String(SandboxCrypto.sha256Hex(Array(jwt.utf8) + [2]).prefix(16))),
            ],
        ]
        let responseJWT = TPSandboxJWT.sign(claims: responseClaims.bytes, key: config.jwtSecret.utf8)
        var notification: [TPSandboxNotification.Field] = []
        // The notification states baseamount and currencyiso3a (paypipe reads one without them
        // as undecided), the site and the payment's requestreference.
        var notified = payment
        notified["sitereference"] = .string(config.siteReference)
        notified["requestreference"] = .string(requestReference)
        for name in [
            "baseamount", "currencyiso3a", "errorcode", "orderreference", "paymenttypedescription", "requestreference", "requesttypedescription",
            "settlestatus", "sitereference", "transactionreference",
        ] {
            if let value = notified[name]?.stringValue { notification.append((name, value)) }
        }
        notification.append(("notificationreference", "N" + String(Digest.sha256Hex(Array(requestReference.utf8)).prefix(10))))
        return Payment(
            responseJWT: responseJWT,
            notificationBody: TPSandboxNotification.formBody(fields: notification, password: config.notificationPassword),
            records: entries.map { entry in entry.merging(["sitereference": .string(config.siteReference)]) { _, site in site } },
            requestReference: requestReference)
    }
}

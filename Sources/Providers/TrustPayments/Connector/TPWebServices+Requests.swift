import PaypipeCore

/// Trust Payments' server-side JSON API (its webservices API documentation):
/// `POST {baseURL}/json/`, HTTP Basic auth with the web services user, envelope
/// `{"alias","version":"1.00","request":[{…}]}`.
public enum TPWebServices {
    public static let version = "1.00"

    /// Update keys the API accepts for a subscription.
    public static let updatableFields: Set<String> = [
        "baseamount", "subscriptionfinalnumber", "transactionactive", "subscriptionfrequency", "subscriptionunit",
    ]
    /// Keys Trust Payments' subscription documentation says cannot be changed once the
    /// subscription exists.
    public static let frozenFields: Set<String> = ["subscriptionbegindate", "subscriptionnumber"]

    /// The `requestreference` for an order: alphanumeric, 18 characters, the same for every
    /// replay of the order, so the echoed value ties a response to its order. `purpose`
    /// separates the order's own request from the query that resolves it.
    public static func requestReference(for key: OrderKey, purpose: String = "") -> String {
        var material: [UInt8] = Array("tp-requestreference".utf8)
        for part in [purpose, key.merchant, key.orderId] {
            material.append(0)
            material += Array(part.utf8)
        }
        return "PP" + Digest.sha256Hex(material).prefix(16)
    }

    /// The URL of the JSON API under a configured base URL (with or without a trailing slash).
    public static func endpoint(baseURL: String) -> String {
        baseURL.hasSuffix("/") ? baseURL + "json/" : baseURL + "/json/"
    }

    /// The request the signer builds for a `transactionUpdate` or `transactionQuery` order.
    public static func request(for order: Order, config: TrustPaymentsConfig) throws(Rejection) -> TPWebServicesRequest {
        switch order.operation {
        case .transactionUpdate: try transactionUpdate(order: order, config: config)
        case .transactionQuery: try transactionQuery(order: order, config: config)
        case .enginePaymentQuery: try enginePaymentQuery(order: order, config: config)
        case .tpRefund: try refund(order: order, config: config)
        default:
            throw Rejection(.unknownOperation, field: "operation", "operation \(order.operation.rawValue) does not use the Trust Payments JSON API")
        }
    }

    public static func transactionUpdate(order: Order, config: TrustPaymentsConfig) throws(Rejection) -> TPWebServicesRequest {
        let params = try ParamReader(
            order.params, allowed: ["transactionReference", "updates", "subscription"], operation: "trustpayments transactionUpdate")
        let reference = try params.tpTransactionReference("transactionReference")
        if params.values["subscription"] != nil { _ = try params.tpTransactionReference("subscription") }
        // Checked before the unknown-key rule: these are real fields Trust Payments says cannot
        // change, which deserves that reason rather than "not a field".
        if case .object(let raw)? = params.values["updates"], let frozen = raw.keys.filter(frozenFields.contains).min() {
            throw params.invalid("updates.\(frozen)", "cannot be updated on an existing subscription")
        }
        let updates = try params.object("updates", allowed: updatableFields)
        let wireUpdates = try wireUpdates(updates)
        let requestReference = requestReference(for: order.key)
        let entry: JSONValue = [
            "requestreference": .string(requestReference),
            "requesttypedescriptions": ["TRANSACTIONUPDATE"],
            "filter": filter(siteReference: config.siteReference, ("transactionreference", reference)),
            "updates": .object(wireUpdates.mapValues(JSONValue.string)),
        ]
        return TPWebServicesRequest(
            kind: .transactionUpdate, requestReference: requestReference, transactionReference: reference,
            updates: wireUpdates, http: httpRequest(entry: entry, config: config))
    }

    public static func transactionQuery(order: Order, config: TrustPaymentsConfig) throws(Rejection) -> TPWebServicesRequest {
        let params = try ParamReader(order.params, allowed: ["transactionReference"], operation: "trustpayments transactionQuery")
        let reference = try params.tpTransactionReference("transactionReference")
        return transactionQuery(
            filters: [("transactionreference", reference)], requestReference: requestReference(for: order.key),
            config: config, kind: .transactionQuery, transactionReference: reference)
    }

    /// The ledger's TRANSACTIONQUERY for an engine payment whose notification never came
    /// (`TPEngineReconciling`): filtered by the first order's `orderreference`; the answer's
    /// records are matched to the subscription on paypipe's side.
    public static func enginePaymentQuery(order: Order, config: TrustPaymentsConfig) throws(Rejection) -> TPWebServicesRequest {
        let params = try ParamReader(
            order.params, allowed: ["orderReference", "parentTransactionReference", "subscriptionNumber"],
            operation: "trustpayments enginePaymentQuery")
        guard let orderReference = params.values["orderReference"]?.stringValue, Order.isValidOrderId(orderReference) else {
            throw params.invalid("orderReference", "must be the orderId of the order that opened the subscription")
        }
        _ = try params.tpTransactionReference("parentTransactionReference")
        return transactionQuery(
            filters: [("orderreference", orderReference)], requestReference: requestReference(for: order.key, purpose: "enginequery"),
            config: config, kind: .transactionQuery, transactionReference: nil)
    }

    /// TRANSACTIONQUERY filtered by `orderreference`: resolves a `subscriptionJwt` order whose
    /// outcome is unknown (the app never returned the response JWT, no notification came).
    public static func orderQuery(for key: OrderKey, config: TrustPaymentsConfig) -> TPWebServicesRequest {
        transactionQuery(
            filters: [("orderreference", key.orderId)], requestReference: requestReference(for: key, purpose: "orderquery"),
            config: config, kind: .orderQuery, transactionReference: nil)
    }

    /// TRANSACTIONQUERY filtered by a transaction reference, with the reference of the order it
    /// resolves (an update whose outcome is unknown is checked with `resolveUpdate`).
    public static func referenceQuery(
        transactionReference: String, for key: OrderKey, config: TrustPaymentsConfig
    ) -> TPWebServicesRequest {
        transactionQuery(
            filters: [("transactionreference", transactionReference)],
            requestReference: requestReference(for: key, purpose: "referencequery"), config: config,
            kind: .transactionQuery, transactionReference: transactionReference)
    }

    static func transactionQuery(
        filters: [(String, String)], requestReference: String, config: TrustPaymentsConfig,
        kind: TPWebServicesRequest.Kind, transactionReference: String?
    ) -> TPWebServicesRequest {
        let entry: JSONValue = [
            "requestreference": .string(requestReference),
            "requesttypedescriptions": ["TRANSACTIONQUERY"],
            "filter": filter(siteReference: config.siteReference, filters),
        ]
        return TPWebServicesRequest(
            kind: kind, requestReference: requestReference, transactionReference: transactionReference, updates: [:],
            http: httpRequest(entry: entry, config: config))
    }

    static func filter(siteReference: String, _ filters: (String, String)...) -> JSONValue {
        filter(siteReference: siteReference, filters)
    }

    /// `{"sitereference":[{"value":…}],"<name>":[{"value":…}]}`
    static func filter(siteReference: String, _ filters: [(String, String)]) -> JSONValue {
        var object: [String: JSONValue] = ["sitereference": [["value": .string(siteReference)]]]
        for (name, value) in filters { object[name] = [["value": .string(value)]] }
        return .object(object)
    }

    static func httpRequest(entry: JSONValue, config: TrustPaymentsConfig) -> HTTPRequestSpec {
        let envelope: JSONValue = ["alias": .string(config.webservicesUser), "version": .string(version), "request": [entry]]
        return HTTPRequestSpec(
            method: .POST, url: endpoint(baseURL: config.baseURL),
            headers: [
                HTTPHeader("Authorization", basicAuthorization(user: config.webservicesUser, password: config.webservicesPassword)),
                HTTPHeader("Content-Type", "application/json"),
                HTTPHeader("Accept", "application/json"),
            ],
            body: envelope.bytes)
    }

    static func basicAuthorization(user: String, password: Secret) -> String {
        "Basic " + Base64.encodeToString(Array((user + ":" + password.reveal()).utf8), .standard)
    }

    /// Validates `params.updates` (unknown and frozen keys are already refused) and writes
    /// every value as the string the API expects.
    static func wireUpdates(_ updates: ParamReader) throws(Rejection) -> [String: String] {
        guard !updates.values.isEmpty else {
            throw Rejection(
                .invalidParam, field: updates.path,
                "\(updates.path) must name at least one of: \(updatableFields.sorted().joined(separator: ", "))")
        }
        var wire: [String: String] = [:]
        for key in updates.values.keys.sorted() {
            switch key {
            case "baseamount":
                let amount = try updates.tpNumeric(key, maxDigits: 13)
                guard amount > 0 else { throw updates.invalid(key, "must be greater than zero") }
                wire[key] = String(amount)
            case "subscriptionfinalnumber":
                wire[key] = String(try updates.tpFinalNumber(key))
            case "transactionactive":
                // "0" suspends, "1" resumes; "2" (pending settlement) is the engine's own state.
                wire[key] = String(try updates.tpTransactionActive(key, allowed: 0...1))
            case "subscriptionfrequency":
                wire[key] = String(try updates.tpFrequency(key))
            case "subscriptionunit":
                wire[key] = try updates.tpUnit(key).rawValue
            default:
                // Unreachable: the reader admits updatableFields only.
                throw updates.invalid(key, "is not an updatable field")
            }
        }
        return wire
    }
}

/// A JSON API request as built by the signer, with what the submitter needs to classify the
/// response. It can be rebuilt from the `HTTPRequestSpec` alone (`init(http:)`), so only the
/// spec has to travel between stages.
public struct TPWebServicesRequest: Sendable, Equatable, CustomStringConvertible {
    public enum Kind: String, Sendable, Equatable {
        case transactionUpdate, transactionQuery, orderQuery, refund
        /// A query changes nothing: whatever happened to it, sending it again is safe.
        public var isReadOnly: Bool { self == .transactionQuery || self == .orderQuery }

        /// The `requesttypedescription` of the request and of the entry that answers it.
        public var requestType: String {
            switch self {
            case .transactionUpdate: "TRANSACTIONUPDATE"
            case .transactionQuery, .orderQuery: "TRANSACTIONQUERY"
            case .refund: "REFUND"
            }
        }
    }

    public var kind: Kind
    public var requestReference: String
    public var transactionReference: String?
    /// The updates as sent (wire strings); empty for queries.
    public var updates: [String: String]
    public var http: HTTPRequestSpec

    public init(kind: Kind, requestReference: String, transactionReference: String?, updates: [String: String], http: HTTPRequestSpec) {
        self.kind = kind
        self.requestReference = requestReference
        self.transactionReference = transactionReference
        self.updates = updates
        self.http = http
    }

    /// Recovers the request's identity from the body this module built; nil for any other body.
    public init?(http: HTTPRequestSpec) {
        guard let envelope = try? JSONValue.parse(http.body), let entry = envelope["request"]?.arrayValue?.first,
            let reference = entry["requestreference"]?.stringValue,
            let type = entry["requesttypedescriptions"]?.arrayValue?.first?.stringValue
        else { return nil }
        let filter = entry["filter"]
        let transactionReference = filter?["transactionreference"]?.arrayValue?.first?["value"]?.stringValue
        switch type {
        case "REFUND":
            let parent = entry["parenttransactionreference"]?.stringValue
            self.init(kind: .refund, requestReference: reference, transactionReference: parent, updates: [:], http: http)
        case "TRANSACTIONUPDATE":
            var updates: [String: String] = [:]
            for (key, value) in entry["updates"]?.objectValue ?? [:] {
                guard let text = value.stringValue else { return nil }
                updates[key] = text
            }
            self.init(kind: .transactionUpdate, requestReference: reference, transactionReference: transactionReference, updates: updates, http: http)
        case "TRANSACTIONQUERY":
            let kind: Kind = filter?["orderreference"] != nil ? .orderQuery : .transactionQuery
            self.init(kind: kind, requestReference: reference, transactionReference: transactionReference, updates: [:], http: http)
        default:
            return nil
        }
    }

    public var description: String { "TPWebServicesRequest(\(kind.rawValue), \(requestReference), \(http))" }
}

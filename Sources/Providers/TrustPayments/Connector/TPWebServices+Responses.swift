import PaypipeCore

/// A parsed JSON API response: `{"requestreference","version","response":[…],"secrand"}`.
public struct TPWebServicesResponse: Sendable, Equatable {
    public var requestReference: String
    public var version: String?
    public var entries: [[String: JSONValue]]

    public init(requestReference: String, version: String?, entries: [[String: JSONValue]]) {
        self.requestReference = requestReference
        self.version = version
        self.entries = entries
    }

    public struct ParseError: Error, Sendable, Equatable, CustomStringConvertible {
        public let reason: String
        public var description: String { "Trust Payments response: \(reason)" }
    }

    public init(body: [UInt8]) throws(ParseError) {
        let document: JSONValue
        do {
            document = try JSONValue.parse(body)
        } catch {
            throw ParseError(reason: "body is not JSON (\(error.reason))")
        }
        guard case .object(let object) = document else { throw ParseError(reason: "body is not a JSON object") }
        guard let reference = object["requestreference"]?.stringValue else { throw ParseError(reason: "requestreference is missing") }
        guard let list = object["response"]?.arrayValue, !list.isEmpty else { throw ParseError(reason: "response is missing or empty") }
        var entries: [[String: JSONValue]] = []
        for item in list {
            guard let entry = item.objectValue else { throw ParseError(reason: "a response entry is not an object") }
            entries.append(entry)
        }
        self.init(requestReference: reference, version: object["version"]?.stringValue, entries: entries)
    }

    /// The entry answering `requestType`, or the only entry there is.
    func entry(for requestType: String) -> [String: JSONValue]? {
        entries.first { $0["requesttypedescription"]?.stringValue == requestType } ?? (entries.count == 1 ? entries.first : nil)
    }
}

extension TPWebServices {
    /// The submitter's reading of a JSON API response (Trust Payments' error codes). A query
    /// changes nothing, so wherever an update would be `unknown` (it may have applied), a query
    /// is simply `retry`.
    public static func classify(_ response: HTTPResponseSpec, for request: TPWebServicesRequest) -> ProviderVerdict {
        let readOnly = request.kind.isReadOnly
        func uncertain(_ reason: String) -> ProviderVerdict { readOnly ? .retry(reason: reason) : .unknown(reason: reason) }

        switch response.status {
        case 200...299: break
        case 401, 403: return .failed(code: .unauthorized, message: "Trust Payments refused the web services credentials (HTTP \(response.status))")
        case 429: return .retry(reason: "HTTP 429: rate limited, request not processed")
        case 500...599: return uncertain("HTTP \(response.status) from Trust Payments")
        case 400...499: return .failed(code: .http(response.status), message: "Trust Payments answered HTTP \(response.status)")
        default: return uncertain("unexpected HTTP \(response.status) from Trust Payments")
        }
        let parsed: TPWebServicesResponse
        do {
            parsed = try TPWebServicesResponse(body: response.body)
        } catch {
            return uncertain(error.description)
        }
        // A response for another request is a transport fault: ours may still have been processed.
        guard parsed.requestReference == request.requestReference else {
            return uncertain("echoed requestreference does not match the one sent")
        }
        let requestType = request.kind.requestType
        guard let entry = parsed.entry(for: requestType) else { return uncertain("no \(requestType) entry in the response") }
        if let echoed = entry["requestreference"]?.stringValue, echoed != request.requestReference {
            return uncertain("echoed requestreference does not match the one sent")
        }
        guard let errorcode = TPErrorCode.read(entry["errorcode"]) else { return uncertain("response entry has no errorcode") }

        switch request.kind == .refund ? TPErrorCode.refundMeaning(of: errorcode) : TPErrorCode.meaning(of: errorcode) {
        case .ok:
            return .succeeded(successResult(entry, request: request))
        case .retry:
            return .retry(reason: "Trust Payments errorcode \(errorcode)\(messageSuffix(entry))")
        case .unknown:
            return uncertain("Trust Payments errorcode \(errorcode): outcome uncertain\(messageSuffix(entry))")
        case .failed(let code):
            return .failed(code: code, message: "Trust Payments errorcode \(errorcode)\(messageSuffix(entry))")
        }
    }

    static func successResult(_ entry: [String: JSONValue], request: TPWebServicesRequest) -> [String: JSONValue] {
        var result: [String: JSONValue] = ["requestReference": .string(request.requestReference)]
        switch request.kind {
        case .transactionUpdate:
            if let reference = request.transactionReference { result["transactionReference"] = .string(reference) }
            result["updates"] = .object(request.updates.mapValues(JSONValue.string))
        case .refund:
            return refundResult(entry, request: request)
        case .transactionQuery, .orderQuery:
            let records = entry["records"]?.arrayValue ?? []
            result["records"] = .array(records)
            result["found"] = .integer(Int64(entry["found"]?.stringValue ?? "") ?? Int64(records.count))
        }
        return result
    }

    static func messageSuffix(_ entry: [String: JSONValue]) -> String {
        var parts: [String] = []
        if let message = entry["errormessage"]?.stringValue, !message.isEmpty { parts.append(String(message.prefix(200))) }
        if let data = entry["errordata"] {
            let fields = (data.arrayValue ?? [data]).compactMap(\.stringValue).map { String($0.prefix(64)) }
            if !fields.isEmpty { parts.append("field: \(fields.joined(separator: ", "))") }
        }
        return parts.isEmpty ? "" : " (\(parts.joined(separator: "; ")))"
    }

    /// After an update's outcome was `unknown`: reads the reference query's answer and says
    /// whether the update is in place (`succeeded`), not in place (`retry`: updates set absolute
    /// values, so sending it again is harmless), or still not knowable.
    public static func resolveUpdate(
        queryResponse: HTTPResponseSpec, query: TPWebServicesRequest, update: TPWebServicesRequest
    ) -> ProviderVerdict {
        switch classify(queryResponse, for: query) {
        case .succeeded(let result):
            let records = result["records"]?.arrayValue ?? []
            guard let record = records.first(where: { $0["transactionreference"]?.stringValue == update.transactionReference }) ?? records.first
            else {
                return .failed(code: .referenceNotFound, message: "no transaction \(update.transactionReference ?? "") to update")
            }
            let applied = update.updates.allSatisfy { key, value in
                let current = record[key].flatMap { TPErrorCode.read($0) }
                return current == value
            }
            if applied {
                return .succeeded(successResult([:], request: update))
            }
            return .retry(reason: "the update is not in place at Trust Payments")
        case .failed(let code, let message):
            return .failed(code: code, message: message)
        case .retry(let reason), .unknown(let reason), .neverSeen(let reason):
            return .unknown(reason: "update still unresolved: \(reason)")
        case .pending(let result):
            return .pending(result)
        }
    }

    /// Resolves a `subscriptionJwt` order from an `orderQuery` answer: an AUTH (or, for a free
    /// trial, ACCOUNTCHECK) under this site and order decides; none yet means the customer has
    /// not paid (`pending`). The amount and currency are checked like the response JWT's.
    public static func classifyOrderQuery(
        _ response: HTTPResponseSpec, for request: TPWebServicesRequest, expected: TPExpectedOrder
    ) -> ProviderVerdict {
        let verdict = classify(response, for: request)
        guard case .succeeded(let result) = verdict else { return verdict }
        let records = (result["records"]?.arrayValue ?? []).compactMap(\.objectValue).filter { record in
            let type = record["requesttypedescription"]?.stringValue
            return (type == "AUTH" || type == "ACCOUNTCHECK")
                && record["orderreference"]?.stringValue == expected.orderId
                && (record["sitereference"]?.stringValue ?? expected.siteReference) == expected.siteReference
        }
        guard !records.isEmpty else { return .pending(["found": 0]) }
        if let paid = records.first(where: { TPErrorCode.read($0["errorcode"]) == TPErrorCode.ok }) {
            if let mismatch = expected.amountMismatch(in: paid, requireAmount: paid["requesttypedescription"]?.stringValue == "AUTH") {
                return .failed(code: .amountMismatch, message: mismatch)
            }
            return .succeeded(TPResponseCheck.summary(of: paid))
        }
        let codes = records.compactMap { TPErrorCode.read($0["errorcode"]) }
        if codes.contains(TPErrorCode.uncertain) {
            return .unknown(reason: "Trust Payments reports an uncertain result (70001) for the order")
        }
        let code = codes.first ?? "unknown"
        if case .failed(let failure) = TPErrorCode.meaning(of: code) {
            return .failed(code: failure, message: "Trust Payments errorcode \(code) for the order's payment")
        }
        return .failed(code: .tpError(code), message: "Trust Payments errorcode \(code) for the order's payment")
    }
}

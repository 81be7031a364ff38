import PaypipeCore

/// Which Nets call a request is, read back from its method and URL.
public enum NetsRequestKind: String, Sendable, Equatable, CaseIterable {
    case createPayment, fetchPayment, fetchSubscription, chargeSubscription

    /// Whether sending it can change state at Nets (a payment or a charge).
    public var mayTakeEffect: Bool { self == .createPayment || self == .chargeSubscription }

    /// Recognises the four calls this module builds; nil for anything else.
    public init?(_ request: HTTPRequestSpec) {
        let segments = NetsRequestKind.pathSegments(request.url)
        let count = segments.count
        switch request.method {
        case .POST:
            if count >= 2, segments[count - 2] == "v1", segments[count - 1] == "payments" {
                self = .createPayment
            } else if count >= 4, segments[count - 4] == "v1", segments[count - 3] == "subscriptions",
                NetsIdentifiers.isSafeId(String(segments[count - 2])), segments[count - 1] == "charges"
            {
                self = .chargeSubscription
            } else {
                return nil
            }
        case .GET:
            guard count >= 3, segments[count - 3] == "v1", NetsIdentifiers.isSafeId(String(segments[count - 1])) else { return nil }
            switch segments[count - 2] {
            case "payments": self = .fetchPayment
            case "subscriptions": self = .fetchSubscription
            default: return nil
            }
        default:
            return nil
        }
    }

    /// The path's segments, without scheme, host, query or fragment.
    package static func pathSegments(_ url: String) -> [Substring] {
        var rest = Substring(url)
        let bytes = Array(rest.utf8.prefix(16))
        if let colon = bytes.firstIndex(of: UInt8(ascii: ":")), colon + 2 < bytes.count,
            bytes[colon + 1] == UInt8(ascii: "/"), bytes[colon + 2] == UInt8(ascii: "/")
        {
            rest = rest.dropFirst(colon + 3)
            guard let slash = rest.firstIndex(of: "/") else { return [] }
            rest = rest[slash...]
        }
        if let cut = rest.firstIndex(where: { $0 == "?" || $0 == "#" }) { rest = rest[..<cut] }
        return rest.split(separator: "/", omittingEmptySubsequences: true)
    }
}

/// What the submitter does with a Nets response.
public enum NetsNextAction: Sendable, Equatable {
    /// The order's verdict for this response.
    case finish(ProviderVerdict)
    /// getSubscription's second call (`GET /v1/subscriptions/{id}`), built from the first
    /// request's own headers so the submitter never needs the secret key itself.
    case send(HTTPRequestSpec)
}

/// How an `unknown` verdict is resolved.
public enum NetsResolution: Sendable, Equatable {
    /// Send this exact request again, same body and same `Idempotency-Key`. Nets keeps the
    /// first result per key: if the lost attempt took effect, the replay returns that result
    /// (the same paymentId or chargeId) and creates nothing new; if it did not, the replay is
    /// the first and only execution. So this is a status query that can also finish the job,
    /// not a blind resubmit. It works while Nets remembers the key, so resolve promptly.
    case replayWithSameIdempotencyKey(HTTPRequestSpec)
    /// A read: sending it again cannot change anything.
    case repeatRead(HTTPRequestSpec)
    /// Not safely resolvable automatically (a write without an idempotency key): a person decides.
    case manualReview(reason: String)
}

extension NetsPayments {
    /// Longest provider-supplied text copied into a verdict message.
    static let maxMessageLength = 500

    // MARK: Submitter

    /// The submitter's single entry point: classifies `response` to `request` (any request this
    /// module built) into a verdict, or into the next request of getSubscription.
    public static func handle(_ response: HTTPResponseSpec, to request: HTTPRequestSpec) -> NetsNextAction {
        guard let kind = NetsRequestKind(request) else {
            return .finish(.failed(code: "NETS_UNKNOWN_REQUEST", message: "the request is not one this module builds: \(request.method.rawValue) \(pathOnly(request.url))"))
        }
        switch kind {
        case .createPayment: return .finish(classifyCreate(response))
        case .chargeSubscription: return .finish(classifyCharge(response))
        case .fetchSubscription: return .finish(classifySubscription(response))
        case .fetchPayment:
            switch readPayment(response) {
            case .failure(let error): return .finish(error.verdict)
            case .success(let subscriptionId):
                guard let next = subscriptionRequest(following: request, subscriptionId: subscriptionId) else {
                    return .finish(.failed(code: "NETS_UNKNOWN_REQUEST", message: "cannot derive the subscription URL from the payment request"))
                }
                return .send(next)
            }
        }
    }

    /// Create: 201 `{paymentId, hostedPaymentPageUrl}` → `pending` (the customer still has to
    /// complete the hosted page; webhooks end the order).
    public static func classifyCreate(_ response: HTTPResponseSpec) -> ProviderVerdict {
        guard (200...299).contains(response.status) else { return classifyError(response, kind: .createPayment) }
        guard let body = try? JSONValue.parse(response.body),
            let paymentId = body["paymentId"]?.stringValue, NetsIdentifiers.isSafeId(paymentId),
            let pageURL = body["hostedPaymentPageUrl"]?.stringValue, NetsParams.isHTTPURL(pageURL)
        else {
            return .unknown(reason: "Nets answered \(response.status) without a usable paymentId and hostedPaymentPageUrl; the payment may exist: replay with the same Idempotency-Key")
        }
        return .pending(["paymentId": .string(paymentId), "hostedPaymentPageUrl": .string(pageURL)])
    }

    /// Charge: 201 `{paymentId, chargeId}` → `succeeded`.
    public static func classifyCharge(_ response: HTTPResponseSpec) -> ProviderVerdict {
        guard (200...299).contains(response.status) else { return classifyError(response, kind: .chargeSubscription) }
        guard let body = try? JSONValue.parse(response.body),
            let paymentId = body["paymentId"]?.stringValue, !paymentId.isEmpty, paymentId.utf8.count <= 128,
            let chargeId = body["chargeId"]?.stringValue, !chargeId.isEmpty, chargeId.utf8.count <= 128
        else {
            return .unknown(reason: "Nets answered \(response.status) without paymentId and chargeId; the charge may exist: replay with the same Idempotency-Key")
        }
        return .succeeded(["paymentId": .string(paymentId), "chargeId": .string(chargeId)])
    }

    /// getSubscription step 1: 200 `{"payment": {..., "subscription": {"id"}}}` → the
    /// subscription id, or the verdict that ends the order.
    public static func readPayment(_ response: HTTPResponseSpec) -> Result<String, NetsVerdictError> {
        guard (200...299).contains(response.status) else {
            return .failure(NetsVerdictError(classifyError(response, kind: .fetchPayment)))
        }
        guard let body = try? JSONValue.parse(response.body), let payment = body["payment"]?.objectValue else {
            return .failure(NetsVerdictError(.failed(code: "NETS_INVALID_RESPONSE", message: "Nets payment response has no payment object")))
        }
        guard let subscription = payment["subscription"], subscription != .null else {
            return .failure(NetsVerdictError(.failed(code: "NETS_SUBSCRIPTION_NOT_FOUND", message: "the payment has no subscription (checkout not completed, or not a subscription payment)")))
        }
        guard let id = subscription["id"]?.stringValue, NetsIdentifiers.isSafeId(id) else {
            return .failure(NetsVerdictError(.failed(code: "NETS_INVALID_RESPONSE", message: "payment.subscription.id is missing or not a safe id")))
        }
        return .success(id)
    }

    /// getSubscription step 2: 200 `{subscriptionId, frequency, interval, endDate, paymentDetails}`
    /// → `succeeded` with those fields. Card data is reduced to Nets' masked PAN and expiry.
    public static func classifySubscription(_ response: HTTPResponseSpec) -> ProviderVerdict {
        guard (200...299).contains(response.status) else { return classifyError(response, kind: .fetchSubscription) }
        guard let body = try? JSONValue.parse(response.body), body.objectValue != nil,
            let subscriptionId = body["subscriptionId"]?.stringValue, !subscriptionId.isEmpty, subscriptionId.utf8.count <= 128
        else {
            return .failed(code: "NETS_INVALID_RESPONSE", message: "Nets subscription response has no subscriptionId")
        }
        var result: [String: JSONValue] = ["subscriptionId": .string(subscriptionId)]
        for key in ["frequency", "interval"] {
            guard let value = body[key], value != .null else { continue }
            guard case .integer = value else {
                return .failed(code: "NETS_INVALID_RESPONSE", message: "Nets subscription \(key) is \(value.typeName), expected an integer")
            }
            result[key] = value
        }
        if let endDate = body["endDate"]?.stringValue { result["endDate"] = .string(String(endDate.prefix(64))) }
        if let details = body["paymentDetails"]?.objectValue { result["paymentDetails"] = .object(safePaymentDetails(details)) }
        return .succeeded(result)
    }

    /// Keeps the non-sensitive payment details; a PAN that is not masked (more than the first
    /// six and last four digits visible) is dropped rather than passed into outcomes.
    static func safePaymentDetails(_ details: [String: JSONValue]) -> [String: JSONValue] {
        var kept: [String: JSONValue] = [:]
        for key in ["paymentType", "paymentMethod"] {
            if let text = details[key]?.stringValue { kept[key] = .string(String(text.prefix(64))) }
        }
        if let card = details["cardDetails"]?.objectValue {
            var safeCard: [String: JSONValue] = [:]
            if let pan = card["maskedPan"]?.stringValue, pan.utf8.count <= 32, pan.filter(\.isNumber).count <= 10 {
                safeCard["maskedPan"] = .string(pan)
            }
            if let expiry = card["expiryDate"]?.stringValue { safeCard["expiryDate"] = .string(String(expiry.prefix(16))) }
            if !safeCard.isEmpty { kept["cardDetails"] = .object(safeCard) }
        }
        return kept
    }

    /// The one error table:
    /// - 400 `{"errors": {field: [messages]}}` → failed NETS_BAD_REQUEST with the messages;
    /// - 401 (no body) → failed NETS_UNAUTHORIZED (the secret key is wrong);
    /// - 402 `{"message","code","source"}` → failed NETS_DECLINED;
    /// - 403/404/other 4xx → failed;
    /// - 429 → retry (throttled before processing);
    /// - 408, 409, 5xx, anything unexpected → reads retry, writes are `unknown`: the payment or
    ///   charge may exist; resolve with `resolution(forUnknown:)`.
    public static func classifyError(_ response: HTTPResponseSpec, kind: NetsRequestKind) -> ProviderVerdict {
        let status = response.status
        let body = try? JSONValue.parse(response.body)
        switch status {
        case 400:
            return .failed(code: "NETS_BAD_REQUEST", message: clip("Nets rejected the request: " + validationMessages(body)))
        case 401:
            return .failed(code: "NETS_UNAUTHORIZED", message: "Nets refused the credentials (check the merchant's nets secretKey)")
        case 402:
            var parts: [String] = []
            if let message = body?["message"]?.stringValue { parts.append(message) }
            if let code = body?["code"] { parts.append("code \(code.stringValue ?? code.serialized)") }
            if let source = body?["source"]?.stringValue { parts.append("source \(source)") }
            return .failed(code: "NETS_DECLINED", message: clip("Nets declined: " + (parts.isEmpty ? "payment required" : parts.joined(separator: ", "))))
        case 403:
            return .failed(code: "NETS_FORBIDDEN", message: "Nets refused access to this resource")
        case 404:
            return .failed(code: "NETS_NOT_FOUND", message: "Nets does not know this \(kind == .fetchPayment ? "payment" : "subscription")")
        case 429:
            return .retry(reason: "Nets throttled the request (429)")
        case 408, 409, 425, 500...599:
            if kind.mayTakeEffect {
                return .unknown(reason: "Nets answered \(status); the \(kind == .createPayment ? "payment" : "charge") may have been made: replay with the same Idempotency-Key")
            }
            return .retry(reason: "Nets answered \(status) to a read")
        case 410...499:
            return .failed(code: "NETS_HTTP_\(status)", message: clip("Nets answered \(status)" + (body.map { ": " + validationMessages($0) } ?? "")))
        default:
            if kind.mayTakeEffect {
                return .unknown(reason: "Nets answered an unexpected status \(status); replay with the same Idempotency-Key")
            }
            return .failed(code: "NETS_HTTP_\(status)", message: "Nets answered an unexpected status \(status)")
        }
    }

    /// A timeout or connection error. Before any byte was sent nothing happened; after, a
    /// write may have taken effect.
    public static func classifyTransportFailure(kind: NetsRequestKind, requestMayHaveBeenSent: Bool, reason: String) -> ProviderVerdict {
        if requestMayHaveBeenSent && kind.mayTakeEffect {
            return .unknown(reason: clip("no answer from Nets (\(reason)); replay with the same Idempotency-Key"))
        }
        return .retry(reason: clip("no answer from Nets (\(reason))"))
    }

    /// How to resolve an `unknown` verdict for `request`. For create and charge: replay the
    /// identical request with its Idempotency-Key (see `NetsResolution`). There is no status
    /// call that could answer instead: before the answer we hold no paymentId to GET, and
    /// Nets has no lookup by our reference.
    public static func resolution(forUnknown request: HTTPRequestSpec) -> NetsResolution {
        guard let kind = NetsRequestKind(request) else {
            return .manualReview(reason: "the request is not one this module builds")
        }
        guard kind.mayTakeEffect else { return .repeatRead(request) }
        guard let key = request.header("Idempotency-Key"), NetsIdentifiers.isValidIdempotencyKey(key) else {
            return .manualReview(reason: "a Nets write without an Idempotency-Key cannot be replayed safely")
        }
        return .replayWithSameIdempotencyKey(request)
    }

    /// getSubscription's step 2 from step 1: same base URL and headers, new path.
    public static func subscriptionRequest(following paymentRequest: HTTPRequestSpec, subscriptionId: String) -> HTTPRequestSpec? {
        guard NetsIdentifiers.isSafeId(subscriptionId), NetsRequestKind(paymentRequest) == .fetchPayment,
            let paymentId = NetsRequestKind.pathSegments(paymentRequest.url).last
        else { return nil }
        let suffix = "/v1/payments/" + paymentId
        guard paymentRequest.url.hasSuffix(suffix) else { return nil }
        let base = paymentRequest.url.dropLast(suffix.count)
        return HTTPRequestSpec(method: .GET, url: base + "/v1/subscriptions/" + subscriptionId, headers: paymentRequest.headers)
    }

    // MARK: Helpers

    /// `field: message; field: message` from Nets' `{"errors": {field: [messages]}}`, or the
    /// body's `message`, or a generic text for bodies that are not JSON.
    static func validationMessages(_ body: JSONValue?) -> String {
        guard let body else { return "no details (body is not JSON)" }
        if let errors = body["errors"]?.objectValue, !errors.isEmpty {
            return errors.keys.sorted().map { field in
                let messages: [String] =
                    switch errors[field] {
                    case .array(let items)?: items.map { $0.stringValue ?? $0.serialized }
                    case .string(let text)?: [text]
                    case let other?: [other.serialized]
                    case nil: []
                    }
                return "\(field): \(messages.joined(separator: " "))"
            }.joined(separator: "; ")
        }
        if let message = body["message"]?.stringValue { return message }
        return "no details"
    }

    static func clip(_ text: String) -> String {
        let cleaned = String(String.UnicodeScalarView(text.unicodeScalars.map { $0.value < 0x20 ? " " : $0 }))
        return cleaned.count <= maxMessageLength ? cleaned : String(cleaned.prefix(maxMessageLength)) + "…"
    }

    package static func pathOnly(_ url: String) -> String {
        "/" + NetsRequestKind.pathSegments(url).prefix(6).joined(separator: "/")
    }
}

/// A verdict that ends getSubscription at step 1 (an `Error` so it fits `Result`).
public struct NetsVerdictError: Error, Sendable, Equatable {
    public let verdict: ProviderVerdict
    public init(_ verdict: ProviderVerdict) { self.verdict = verdict }
}

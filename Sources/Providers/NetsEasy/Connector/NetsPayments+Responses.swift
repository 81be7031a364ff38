import PaypipeCore

/// Which Nets call a request is, read back from its method and URL.
public enum NetsRequestKind: String, Sendable, Equatable, CaseIterable {
    case createPayment, fetchPayment, fetchSubscription, chargeSubscription
    /// `GET /v1/subscriptions/{id}/charges/status` with a charge's `Idempotency-Key`: what became of it.
    case chargeStatus
    /// `PUT /v1/payments/{id}/terminate`: ends a checkout the customer has not completed.
    case terminatePayment
    /// `POST /v1/payments/{id}/charges`: charges what a checkout reserved.
    case chargePayment
    /// `POST /v1/charges/{id}/refunds`: gives back part or all of a charge.
    case refundCharge

    /// Whether sending it can move money (a payment, a charge or a refund); a terminate only stops one.
    public var mayTakeEffect: Bool {
        switch self {
        case .createPayment, .chargeSubscription, .chargePayment, .refundCharge: true
        case .fetchPayment, .fetchSubscription, .chargeStatus, .terminatePayment: false
        }
    }

    /// Recognises the calls this module builds; nil for anything else.
    public init?(_ request: HTTPRequestSpec) {
        let segments = NetsRequestKind.pathSegments(request.url)
        let count = segments.count
        switch request.method {
        case .PUT:
            guard count >= 4, segments[count - 4] == "v1", segments[count - 3] == "payments", NetsIdentifiers.isSafeId(String(segments[count - 2])),
                segments[count - 1] == "terminate"
            else { return nil }
            self = .terminatePayment
        case .GET where count >= 5 && segments[count - 2] == "charges" && segments[count - 1] == "status":
            guard segments[count - 5] == "v1", segments[count - 4] == "subscriptions", NetsIdentifiers.isSafeId(String(segments[count - 3])) else {
                return nil
            }
            self = .chargeStatus
        case .POST:
            if count >= 2, segments[count - 2] == "v1", segments[count - 1] == "payments" {
                self = .createPayment
            } else if count >= 4, segments[count - 4] == "v1", NetsIdentifiers.isSafeId(String(segments[count - 2])) {
                switch (segments[count - 3], segments[count - 1]) {
                case ("subscriptions", "charges"): self = .chargeSubscription
                case ("payments", "charges"): self = .chargePayment
                case ("charges", "refunds"): self = .refundCharge
                default: return nil
                }
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
    /// A charge: read what became of it by its `Idempotency-Key`
    /// (`GET /v1/subscriptions/{id}/charges/status`), never send it again to find out. Whether
    /// Nets still honours a key after some time is not documented, so a resend could charge
    /// twice; the read cannot.
    case readChargeStatus(HTTPRequestSpec)
    /// A payment creation (no money moves until the customer completes the hosted page): send
    /// the same request again, same body and same `Idempotency-Key`. Nets keeps the first
    /// result per key; there is no read by our reference, since before the answer we hold no
    /// paymentId to GET.
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
            return .finish(
                .failed(
                    code: .netsUnknownRequest,
                    message: "the request is not one this module builds: \(request.method.rawValue) \(pathOnly(request.url))"))
        }
        switch kind {
        case .createPayment: return .finish(classifyCreate(response))
        case .chargeSubscription: return .finish(classifyCharge(response))
        case .chargePayment, .refundCharge:
            // Read with their order (`NetsConnector.read`), which says what each answer means.
            return .finish(.unknown(reason: "a \(kind.rawValue) answer is read with its order"))
        case .fetchSubscription: return .finish(classifySubscription(response))
        case .chargeStatus: return .finish(classifyChargeStatus(response, keyMayBeForgotten: true))
        case .terminatePayment:
            return .finish(.unknown(reason: "Nets answered \(response.status) to terminate; the payment must be read again"))
        case .fetchPayment:
            switch readPayment(response) {
            case .failure(let error): return .finish(error.verdict)
            case .success(let subscriptionId):
                guard let next = subscriptionRequest(following: request, subscriptionId: subscriptionId) else {
                    return .finish(.failed(code: .netsUnknownRequest, message: "cannot derive the subscription URL from the payment request"))
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
            return .unknown(
                reason:
                    "Nets answered \(response.status) without a usable paymentId and hostedPaymentPageUrl; the payment may exist: replay with the same Idempotency-Key"
            )
        }
        return .pending(["paymentId": .string(paymentId), "hostedPaymentPageUrl": .string(pageURL)])
    }

    /// Charge: 2xx (Nets documents 200) `{paymentId, chargeId}` → `succeeded`.
    public static func classifyCharge(_ response: HTTPResponseSpec) -> ProviderVerdict {
        guard (200...299).contains(response.status) else { return classifyError(response, kind: .chargeSubscription) }
        guard let body = try? JSONValue.parse(response.body),
            let paymentId = body["paymentId"]?.stringValue, !paymentId.isEmpty, paymentId.utf8.count <= 128,
            let chargeId = body["chargeId"]?.stringValue, !chargeId.isEmpty, chargeId.utf8.count <= 128
        else {
            return .unknown(
                reason:
                    "Nets answered \(response.status) without paymentId and chargeId; the charge may exist: read its status by its Idempotency-Key")
        }
        return .succeeded(["paymentId": .string(paymentId), "chargeId": .string(chargeId)])
    }

    /// A charge's status read by its `Idempotency-Key`: 200 `{paymentId, chargeId, completed}`.
    /// - completed → `succeeded` with the ids (the charge was made);
    /// - not completed → `unknown` (Nets does not say what an uncompleted charge becomes);
    /// - 404 → Nets knows no charge by this key: `neverSeen` while Nets can be trusted to still
    ///   remember the key, else `unknown` (`keyMayBeForgotten`: the charge may be older than that);
    /// - anything else → `unknown`: the read told nothing, so it is asked again or the order
    ///   goes to review, never sent again on a guess.
    public static func classifyChargeStatus(_ response: HTTPResponseSpec, keyMayBeForgotten: Bool) -> ProviderVerdict {
        switch response.status {
        case 200...299: break
        case 404:
            guard !keyMayBeForgotten else {
                return .unknown(
                    reason:
                        "Nets finds no charge by this Idempotency-Key, but the order is older than Nets can be trusted to remember it (timers.netsIdempotencyKeyLifetimeMs)"
                )
            }
            return .neverSeen(reason: "Nets finds no charge by this Idempotency-Key")
        default: return .unknown(reason: "Nets answered \(response.status) to the charge status read")
        }
        guard let body = try? JSONValue.parse(response.body), let completed = body["completed"]?.boolValue,
            let paymentId = body["paymentId"]?.stringValue, !paymentId.isEmpty, paymentId.utf8.count <= 128,
            let chargeId = body["chargeId"]?.stringValue, !chargeId.isEmpty, chargeId.utf8.count <= 128
        else {
            return .unknown(reason: "Nets answered \(response.status) to the charge status read without paymentId, chargeId and completed")
        }
        guard completed else { return .unknown(reason: "Nets shows charge \(chargeId.prefix(64)) by this key as not completed") }
        return .succeeded(["paymentId": .string(paymentId), "chargeId": .string(chargeId)])
    }

    /// getSubscription step 1: 200 `{"payment": {..., "subscription": {"id"}}}` → the
    /// subscription id, or the verdict that ends the order.
    public static func readPayment(_ response: HTTPResponseSpec) -> Result<String, NetsVerdictError> {
        guard (200...299).contains(response.status) else {
            return .failure(NetsVerdictError(classifyError(response, kind: .fetchPayment)))
        }
        guard let body = try? JSONValue.parse(response.body), let payment = body["payment"]?.objectValue else {
            return .failure(NetsVerdictError(.failed(code: .netsInvalidResponse, message: "Nets payment response has no payment object")))
        }
        guard let subscription = payment["subscription"], subscription != .null else {
            return .failure(
                NetsVerdictError(
                    .failed(
                        code: .netsSubscriptionNotFound,
                        message: "the payment has no subscription (checkout not completed, or not a subscription payment)")))
        }
        guard let id = subscription["id"]?.stringValue, NetsIdentifiers.isSafeId(id) else {
            return .failure(NetsVerdictError(.failed(code: .netsInvalidResponse, message: "payment.subscription.id is missing or not a safe id")))
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
            return .failed(code: .netsInvalidResponse, message: "Nets subscription response has no subscriptionId")
        }
        var result: [String: JSONValue] = ["subscriptionId": .string(subscriptionId)]
        for key in ["frequency", "interval"] {
            guard let value = body[key], value != .null else { continue }
            guard case .integer = value else {
                return .failed(code: .netsInvalidResponse, message: "Nets subscription \(key) is \(value.typeName), expected an integer")
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
    /// - 402 `{"message","code","source"}` → failed NETS_DECLINED_<code> (NETS_DECLINED when the
    ///   code is missing or not a short code of digits and capitals);
    /// - 403/404/other 4xx → failed;
    /// - 429 → retry (throttled before processing);
    /// - 408, 409, 5xx, anything unexpected → reads retry, writes are `unknown`: the payment or
    ///   charge may exist; resolve with `resolution(forUnknown:)`.
    public static func classifyError(_ response: HTTPResponseSpec, kind: NetsRequestKind) -> ProviderVerdict {
        let status = response.status
        let body = try? JSONValue.parse(response.body)
        switch status {
        case 400:
            return .failed(code: .netsBadRequest, message: clip("Nets rejected the request: " + validationMessages(body)))
        case 401:
            return .failed(code: .netsUnauthorized, message: "Nets refused the credentials (check the merchant's nets secretKey)")
        case 402:
            var parts: [String] = []
            if let message = body?["message"]?.stringValue { parts.append(message) }
            if let code = body?["code"] { parts.append("code \(code.stringValue ?? code.serialized)") }
            if let source = body?["source"]?.stringValue { parts.append("source \(source)") }
            return .failed(
                code: NetsDeclines.declineCode(body?["code"]).map(OutcomeErrorCode.netsDeclined) ?? .netsDeclined,
                message: clip("Nets declined: " + (parts.isEmpty ? "payment required" : parts.joined(separator: ", "))))
        case 403:
            return .failed(code: .netsForbidden, message: "Nets refused access to this resource")
        case 404:
            return .failed(code: .netsNotFound, message: "Nets does not know this \(kind == .fetchPayment ? "payment" : "subscription")")
        case 429:
            return .retry(reason: "Nets throttled the request (429)")
        case 408, 409, 425, 500...599:
            if kind.mayTakeEffect {
                return .unknown(reason: "Nets answered \(status); the \(kind == .createPayment ? "payment" : "charge") may have been made")
            }
            return .retry(reason: "Nets answered \(status) to a read")
        case 410...499:
            return .failed(code: .netsHTTP(status), message: clip("Nets answered \(status)" + (body.map { ": " + validationMessages($0) } ?? "")))
        default:
            if kind.mayTakeEffect {
                return .unknown(reason: "Nets answered an unexpected status \(status); the request may have taken effect")
            }
            return .failed(code: .netsHTTP(status), message: "Nets answered an unexpected status \(status)")
        }
    }

    /// A timeout or connection error. Before any byte was sent nothing happened; after, a
    /// write may have taken effect.
    public static func classifyTransportFailure(kind: NetsRequestKind, requestMayHaveBeenSent: Bool, reason: String) -> ProviderVerdict {
        if requestMayHaveBeenSent && kind.mayTakeEffect {
            return .unknown(reason: clip("no answer from Nets (\(reason)); the request may have taken effect"))
        }
        return .retry(reason: clip("no answer from Nets (\(reason))"))
    }

    /// How to resolve an `unknown` verdict for `request` (see `NetsResolution`): a charge is
    /// read by its Idempotency-Key, a payment creation is replayed with its key, a read is
    /// repeated.
    public static func resolution(forUnknown request: HTTPRequestSpec) -> NetsResolution {
        guard let kind = NetsRequestKind(request) else {
            return .manualReview(reason: "the request is not one this module builds")
        }
        guard kind.mayTakeEffect else { return .repeatRead(request) }
        guard let key = request.header("Idempotency-Key"), NetsIdentifiers.isValidIdempotencyKey(key) else {
            return .manualReview(reason: "a Nets write without an Idempotency-Key cannot be resolved safely")
        }
        guard kind == .chargeSubscription else { return .replayWithSameIdempotencyKey(request) }
        guard let status = chargeStatusRequest(following: request) else {
            return .manualReview(reason: "cannot derive the charge status URL from the charge request")
        }
        return .readChargeStatus(status)
    }

    /// The status read of a charge: `GET {base}/v1/subscriptions/{id}/charges/status` with the
    /// charge's own headers (its key and credentials; the submitter holds no secret) but no body.
    public static func chargeStatusRequest(following charge: HTTPRequestSpec) -> HTTPRequestSpec? {
        guard NetsRequestKind(charge) == .chargeSubscription, !charge.url.contains("?") else { return nil }
        let headers = charge.headers.filter { $0.name.lowercased() != "content-type" }
        return HTTPRequestSpec(method: .GET, url: charge.url + "/status", headers: headers)
    }

    /// `PUT {base}/v1/payments/{id}/terminate`, from the payment's `GET` (same base and credentials).
    public static func terminateRequest(following paymentRequest: HTTPRequestSpec) -> HTTPRequestSpec? {
        guard NetsRequestKind(paymentRequest) == .fetchPayment, !paymentRequest.url.contains("?") else { return nil }
        let headers = paymentRequest.headers.filter { $0.name.lowercased() != "accept" } + [HTTPHeader("Accept", "application/json")]
        return HTTPRequestSpec(method: .PUT, url: paymentRequest.url + "/terminate", headers: headers)
    }

    /// The payment's `GET` again, after a terminate.
    public static func paymentRequest(following terminate: HTTPRequestSpec) -> HTTPRequestSpec? {
        guard NetsRequestKind(terminate) == .terminatePayment, terminate.url.hasSuffix("/terminate") else { return nil }
        return HTTPRequestSpec(method: .GET, url: String(terminate.url.dropLast("/terminate".count)), headers: terminate.headers)
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

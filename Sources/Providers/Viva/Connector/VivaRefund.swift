import PaypipeCore

extension Operation {
    /// A refund (or same-day cancel) of a completed Sale through Viva's legacy transactions API.
    public static let vivaRefund = Operation(.viva, RefundTarget.operationName)
}

/// A refund of a Viva Sale: Viva's legacy "Cancel transaction" call ([VV-CANCEL-LEG] in
/// docs/protocol.md), `DELETE {api}/api/transactions/{transactionId}?amount={cents}`, which
/// cancels a card payment the same business day and refunds a cleared one, full or partial. The
/// page names Identity Server authentication, so the call carries the bearer token of the
/// merchant's API credentials (`viva.apiClientId` / `apiClientSecret`), fetched as the
/// confirmation fetches it: the order is signed as the token request, and the refund follows
/// it. The answer is `{TransactionId (the refund's), StatusId, ErrorCode (0 ok), ErrorText}`.
/// Viva documents no idempotency for this call, so a refund is never sent blind twice: an
/// uncertain answer reads the Sale (`GET /checkout/v2/transactions/{id}`), which settles only a
/// full refund (`statusId` R, Viva's "refunded"); anything else stays for a person.
public struct VivaRefund: Sendable, Equatable {
    static let allowedKeys: Set<String> = ["refundOf", "transactionId"]
    public static let path = "/api/transactions/"

    public var refundOf: String
    /// The Sale's transactionId.
    public var transactionId: String
    /// Cents.
    public var amount: Int64

    public init(order: Order) throws(Rejection) {
        guard order.operation == .vivaRefund else {
            throw Rejection(.unknownOperation, field: "operation", "expected viva refund, got \(order.operation.rawValue)")
        }
        let params = try ParamReader(order.params, allowed: Self.allowedKeys, operation: "viva refund")
        refundOf = try params.refundOf()
        transactionId = try params.string("transactionId", length: 1...64, charset: .identifier)
        guard let amount = order.amount, amount > 0 else { throw Rejection(.invalidParam, field: "amount", "amount must be positive cents") }
        self.amount = amount
    }

    /// `DELETE {api}/api/transactions/{transactionId}?amount={cents}` with the bearer token.
    public func request(api: VivaAPICredentials, token: Secret) -> HTTPRequestSpec {
        HTTPRequestSpec(
            method: .DELETE, url: api.apiURL + Self.path + VivaQuery.percentEncode(transactionId) + "?amount=\(amount)",
            headers: [HTTPHeader("Authorization", "Bearer " + token.reveal()), HTTPHeader("Accept", "application/json")])
    }

    /// The token endpoint's answer: the refund (or, resolving, the Sale's read) follows it. A
    /// token call moves no money, so whatever became of it, asking again is safe.
    public func readToken(_ response: HTTPResponseSpec, api: VivaAPICredentials, resolving: Bool) -> ProviderReading {
        guard response.status == 200, case .object(let object)? = try? JSONValue.parse(response.body),
            let token = object["access_token"]?.stringValue, !token.isEmpty
        else {
            if response.status == 401 || response.status == 403 {
                return .verdict(.failed(code: .vivaUnauthorized, message: "Viva refused the API credentials (HTTP \(response.status))"))
            }
            let reason = "Viva's token endpoint answered HTTP \(response.status) without an access_token"
            return .verdict(resolving ? .unknown(reason: reason) : .retry(reason: reason))
        }
        guard resolving else { return .followUp(request(api: api, token: Secret(token))) }
        return .followUp(VivaAPIRequests.transaction(transactionId, api: api, token: Secret(token)))
    }

    /// The refund's answer.
    public func classify(_ response: HTTPResponseSpec) -> ProviderVerdict {
        if response.status == 429 || response.status >= 500 { return .unknown(reason: "Viva's refund answered HTTP \(response.status)") }
        guard case .object(let object)? = try? JSONValue.parse(response.body) else {
            if (400...499).contains(response.status) { return .failed(code: .http(response.status), message: "Viva refused the refund") }
            return .unknown(reason: "Viva's refund answered HTTP \(response.status) without a JSON body")
        }
        let errorCode = object["ErrorCode"]?.integerValue
        let text = VivaText.printable(object["ErrorText"]?.stringValue ?? "", limit: 200)
        if let errorCode, errorCode != 0 {
            return .failed(code: .vivaRefundRefused(errorCode), message: "Viva refused the refund: \(text)")
        }
        guard (200...299).contains(response.status) else {
            return .failed(code: .http(response.status), message: "Viva refused the refund (HTTP \(response.status)) \(text)")
        }
        guard errorCode == 0, let refundId = object["TransactionId"]?.stringValue, !refundId.isEmpty else {
            return .unknown(reason: "Viva's refund answer has no ErrorCode 0 and TransactionId")
        }
        switch object["StatusId"]?.stringValue {
        case "F"?:
            return .succeeded([
                "transactionId": .string(refundId), "parentTransactionId": .string(transactionId), "amount": .integer(amount),
                "statusId": "F",
            ])
        case "E"?: return .failed(code: .vivaRefundRefused(0), message: "Viva records the refund as failed (E)")
        default:
            return .unknown(
                reason: "Viva has not finished the refund (StatusId \(VivaText.printable(object["StatusId"]?.stringValue ?? "-", limit: 8)))")
        }
    }

    /// The Sale's record after an uncertain answer: only a full refund shows for certain.
    public func resolve(_ response: HTTPResponseSpec) -> ProviderVerdict {
        guard response.status == 200, let sale = VivaTransaction(body: response.body) else {
            return .unknown(reason: "Viva's transaction read answered HTTP \(response.status)")
        }
        if sale.statusId == "R", sale.amount == amount {
            return .succeeded(["parentTransactionId": .string(transactionId), "amount": .integer(amount), "statusId": "R"])
        }
        return .unknown(
            reason: "Viva records the sale as \(VivaText.printable(sale.statusId, limit: 8)); whether this refund was made cannot be told")
    }
}

/// A Sale's capture and the capture a refund names, for the ledger.
struct VivaRefunding: Refunding {
    func refundTarget(of order: Order) -> RefundTarget? {
        (try? VivaRefund(order: order)).map { RefundTarget(originalOrderId: $0.refundOf, captureReference: $0.transactionId) }
    }

    /// A confirmed or accepted Sale took the amount Viva's record states under its transactionId.
    func captures(of order: Order, outcome: Outcome) -> [Capture] {
        guard order.operation == .sale, outcome.status == .succeeded, let transactionId = outcome.result?["transactionId"]?.stringValue,
            let amount = outcome.result?["amount"]?.integerValue ?? order.amount, let currency = order.currency
        else { return [] }
        return [Capture(reference: transactionId, amount: amount, currency: currency)]
    }
}

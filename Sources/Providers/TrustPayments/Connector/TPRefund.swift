import PaypipeCore

extension Operation {
    /// A REFUND of a settled AUTH (Trust Payments' REFUND article, [TP-REF] in docs/protocol.md).
    public static let tpRefund = Operation(.trustpayments, RefundTarget.operationName)
}

/// Trust Payments refunds over the JSON API: `REFUND` naming the AUTH as
/// `parenttransactionreference` and the amount as `baseamount` (the Magento module's
/// `Helper.php` and the Python SDK's `module_test_api.py` send a partial refund this way; with no
/// amount Trust Payments refunds the whole AUTH). Trust Payments knows no idempotency key for a
/// REFUND, and a REFUND sent twice refunds twice, so every refund carries its order's orderId as
/// `orderreference`: a lost answer is resolved by TRANSACTIONQUERY filtered by that
/// orderreference, and the REFUND is sent again only when that query proves it absent.
extension TPWebServices {
    static let refundParams: Set<String> = ["refundOf", "transactionReference"]

    /// The REFUND for a `refund` order. The amount is always stated, full or partial, so Trust
    /// Payments never gives back more than the order says.
    public static func refund(order: Order, config: TrustPaymentsConfig) throws(Rejection) -> TPWebServicesRequest {
        let params = try ParamReader(order.params, allowed: refundParams, operation: "trustpayments refund")
        _ = try params.refundOf()
        let parent = try params.tpTransactionReference("transactionReference")
        guard let amount = order.amount, amount > 0, amount <= ParamReader.tpMaxValue(digits: 13) else {
            throw Rejection(.invalidParam, field: "amount", "amount must be 1 to 13 digits of minor units (Trust Payments' baseamount)")
        }
        let requestReference = requestReference(for: order.key)
        let entry: JSONValue = [
            "requestreference": .string(requestReference),
            "requesttypedescriptions": ["REFUND"],
            "sitereference": .string(config.siteReference),
            "parenttransactionreference": .string(parent),
            "orderreference": .string(order.orderId),
            "baseamount": .string(String(amount)),
        ]
        return TPWebServicesRequest(
            kind: .refund, requestReference: requestReference, transactionReference: parent, updates: [:],
            http: httpRequest(entry: entry, config: config))
    }

    /// A REFUND's `succeeded` result: the refund's own transactionreference, the AUTH it gave
    /// money back from and the amount.
    static func refundResult(_ entry: [String: JSONValue], request: TPWebServicesRequest) -> [String: JSONValue] {
        var result: [String: JSONValue] = ["requestReference": .string(request.requestReference)]
        if let reference = entry["transactionreference"]?.stringValue { result["transactionReference"] = .string(reference) }
        if let parent = entry["parenttransactionreference"]?.stringValue ?? request.transactionReference {
            result["parentTransactionReference"] = .string(parent)
        }
        if let amount = entry["baseamount"].flatMap(TPErrorCode.read).flatMap({ Int64($0) }) ?? request.statedAmount {
            result["amount"] = .integer(amount)
        }
        let settlestatus = entry["settlestatus"].flatMap(TPErrorCode.read)
        if let settlestatus { result["settleStatus"] = .string(settlestatus) }
        result["settlement"] = .string(TPResponseCheck.settlement(settlestatus))
        return result
    }

    /// After a REFUND's answer was lost: reads the TRANSACTIONQUERY by its orderreference. The
    /// REFUND record decides; none means Trust Payments has not seen it, which allows sending it
    /// again only before a resubmit (`neverSeen`); otherwise the order stays `unknown`, since the
    /// lost request may still arrive.
    public static func resolveRefund(
        queryResponse: HTTPResponseSpec, query: TPWebServicesRequest, refund: TPWebServicesRequest, orderId: String, beforeResubmit: Bool
    ) -> ProviderVerdict {
        switch classify(queryResponse, for: query) {
        case .succeeded(let result):
            let records = (result["records"]?.arrayValue ?? []).compactMap(\.objectValue).filter { record in
                record["requesttypedescription"]?.stringValue == "REFUND" && record["orderreference"]?.stringValue == orderId
                    && (record["parenttransactionreference"]?.stringValue ?? refund.transactionReference) == refund.transactionReference
            }
            if let done = records.first(where: { TPErrorCode.read($0["errorcode"]) == TPErrorCode.ok }) {
                return .succeeded(refundResult(done, request: refund))
            }
            guard let record = records.first else {
                let reason = "Trust Payments has no REFUND with orderreference \(orderId)"
                return beforeResubmit ? .neverSeen(reason: reason) : .unknown(reason: reason)
            }
            let errorcode = TPErrorCode.read(record["errorcode"]) ?? "missing"
            switch TPErrorCode.refundMeaning(of: errorcode) {
            case .failed(let code): return .failed(code: code, message: "REFUND errorcode \(errorcode)\(messageSuffix(record))")
            case .ok, .retry, .unknown: return .unknown(reason: "the REFUND's result is uncertain (errorcode \(errorcode))")
            }
        case .failed(let code, let message):
            return .unknown(reason: "the refund query failed (\(code)): \(message)")
        case .retry(let reason), .unknown(let reason), .neverSeen(let reason):
            return .unknown(reason: "refund still unresolved: \(reason)")
        case .pending:
            return .unknown(reason: "refund still unresolved: the query did not answer")
        }
    }
}

extension TPWebServicesRequest {
    /// The `baseamount` a request states, read back from its body.
    var statedAmount: Int64? {
        guard let entry = (try? JSONValue.parse(http.body))?["request"]?.arrayValue?.first else { return nil }
        return entry["baseamount"].flatMap(TPErrorCode.read).flatMap { Int64($0) }
    }
}

extension TPErrorCode {
    public static let refundParentMissing = "20004"
    public static let refundParentNotSettled: Set<String> = ["20005", "20012"]
    public static let refundParentNotAuth = "20006"
    public static let refundAmountTooGreat = "20007"
    public static let refundParentDeclined = "20011"
    public static let refundBelowMinimum = "20022"
    public static let refundNotSupported = "20034"
    public static let refundNotProcessed = "40001"
    /// Trust Payments cannot tell yet whether the money moved (its error code guidance: contact
    /// it, assume neither outcome); 79000 is queued, to be checked later.
    public static let refundUncertain: Set<String> = ["60010", "60034", "99999", uncertain, timeout, "60020", "79000"]

    /// The REFUND's own reading of an errorcode (the codes from the Python SDK's
    /// `errormessages.json`, [TP-PYSDK]; their meaning for refunds from [TP-REF] and [TP-ERR]).
    /// Unlike an update, a REFUND that may have been processed is never `retry`: sending it
    /// again could refund twice, so every uncertain code is `unknown` and resolved by query.
    public static func refundMeaning(of errorcode: String) -> Meaning {
        switch errorcode {
        case ok: .ok
        case _ where refundUncertain.contains(errorcode): .unknown
        case refundParentMissing: .failed(code: .refundParentNotFound)
        case _ where refundParentNotSettled.contains(errorcode): .failed(code: .refundParentNotSettled)
        case refundParentNotAuth: .failed(code: .refundParentNotAuth)
        case refundAmountTooGreat: .failed(code: .refundAmountTooGreat)
        case refundParentDeclined: .failed(code: .refundParentDeclined)
        case refundBelowMinimum: .failed(code: .refundBelowMinimum)
        case refundNotSupported: .failed(code: .refundNotSupported)
        case refundNotProcessed: .failed(code: .refundNotProcessed)
        // Card schemes authorise refunds online: the issuer declined this one [TP-REF].
        case declined: .failed(code: .declined)
        default: meaning(of: errorcode) == .retry ? .unknown : meaning(of: errorcode)
        }
    }
}

/// The captures of a Trust Payments order and the capture a refund names, for the ledger.
struct TPRefunding: Refunding {
    /// The engine's automated payments are AUTHs of their own, refunded as any AUTH is.
    var refundsRenewalsThroughTheFirstOrder: Bool { true }

    func refundTarget(of order: Order) -> RefundTarget? {
        guard order.operation == .tpRefund, let params = try? ParamReader(order.params, allowed: TPWebServices.refundParams, operation: "")
        else { return nil }
        guard let original = try? params.refundOf(), let reference = try? params.tpTransactionReference("transactionReference") else {
            return nil
        }
        return RefundTarget(originalOrderId: original, captureReference: reference)
    }

    /// A `subscriptionJwt` that succeeded took its first AUTH (an ACCOUNTCHECK takes nothing);
    /// its result carries the AUTH's transactionreference and amount.
    func captures(of order: Order, outcome: Outcome) -> [Capture] {
        guard order.operation == .subscriptionJwt, outcome.status == .succeeded, let result = outcome.result,
            result["requestType"]?.stringValue ?? "AUTH" == "AUTH", let reference = result["transactionReference"]?.stringValue,
            !reference.isEmpty, let amount = result["amount"]?.integerValue ?? order.amount, amount > 0,
            let currency = result["currency"]?.stringValue ?? order.currency
        else { return [] }
        return [Capture(reference: reference, amount: amount, currency: currency)]
    }
}

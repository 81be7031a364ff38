import PaypipeCore

/// Interprets the entries of an authentic response (JWT or query record) against the order they
/// claim to answer. Trust Payments' Mobile SDK subscription documentation, "Handling the response":
/// AUTH errorcode "0" means the first payment's funds are reserved; the SUBSCRIPTION is scheduled
/// iff its errorcode is "0"; its `transactionactive` stays "2" (pending) until the AUTH settles
/// (`settlestatus` "100").
public enum TPResponseCheck {
    /// `settlestatus` values as Trust Payments documents them.
    public static func settlement(_ settlestatus: String?) -> String {
        switch settlestatus {
        case "0": "pendingSettlement"
        case "1": "pendingSettlementManual"
        case "2": "suspended"
        case "3": "cancelled"
        case "10": "settling"
        case "100": "settled"
        case nil: "notReported"
        default: "other"
        }
    }

    /// `transactionactive` of the SUBSCRIPTION: "2" pending the AUTH's settlement (default),
    /// "1" active, "0" suspended until changed.
    public static func subscriptionState(_ transactionactive: String?) -> String {
        switch transactionactive {
        case "0": "inactive"
        case "1": "active"
        case "2": "pendingSettlement"
        case nil: "notReported"
        default: "other"
        }
    }

    /// A verdict, and for a `failed` one after the payment was taken, the outcome's `result`
    /// (the payment's reference and amount, so nobody has to look the charge up).
    public struct Reading: Sendable, Equatable {
        public var verdict: ProviderVerdict
        public var failureResult: [String: JSONValue]?

        public init(_ verdict: ProviderVerdict, failureResult: [String: JSONValue]? = nil) {
            self.verdict = verdict
            self.failureResult = failureResult
        }
    }

    /// The verdict for a verified response JWT (or any list of response entries) about `expected`:
    /// `succeeded` / `failed` (declined, or `AMOUNT_MISMATCH` / `REFERENCE_MISMATCH` for review) /
    /// `unknown` (70001, and 60010 / 60034 whose final status Trust Payments does not know yet:
    /// resolve with an order query).
    /// `requireStatedFields`: a successful AUTH must state
    /// its `baseamount` and `currencyiso3a` (true for response JWTs, which always carry them).
    public static func evaluate(
        _ entries: [[String: JSONValue]], expected: TPExpectedOrder, requireStatedFields: Bool = true
    ) -> ProviderVerdict {
        read(entries, expected: expected, requireStatedFields: requireStatedFields).verdict
    }

    /// As `evaluate`, and when `expected.subscription` is known, the SUBSCRIPTION entry must say
    /// the subscription was scheduled as requested: its errorcode not "0" →
    /// `SUBSCRIPTION_NOT_SCHEDULED`; its fields differing from the request (or, with
    /// `requireStatedFields`, the entry or a field missing) → `SUBSCRIPTION_MISMATCH`. Both are
    /// `failed` with the payment's `result`, because the first payment was taken.
    public static func read(
        _ entries: [[String: JSONValue]], expected: TPExpectedOrder, requireStatedFields: Bool = true
    ) -> Reading {
        let payment =
            entries.first { $0["requesttypedescription"]?.stringValue == "AUTH" }
            ?? entries.first { $0["requesttypedescription"]?.stringValue == "ACCOUNTCHECK" }
        let subscription = entries.first { $0["requesttypedescription"]?.stringValue == "SUBSCRIPTION" }

        for entry in entries {
            // A present sitereference must be ours; an absent one is not a mismatch: Trust Payments'
            // own response JWT sample (SecureTrading/swift-payments TestGatewayEndpoint.swift) has
            // none, and the JWT is already bound to the merchant by its secret and to the order by
            // orderreference.
            if let mismatch = expected.referenceMismatch(in: entry, requireSite: false) {
                return Reading(.failed(code: .referenceMismatch, message: mismatch))
            }
        }

        guard let payment else {
            // Without a payment entry, an earlier step (3-D Secure, say) stopped the sequence.
            if let stopped = entries.first(where: { TPErrorCode.read($0["errorcode"]) != TPErrorCode.ok }) {
                return Reading(failure(stopped))
            }
            return Reading(.failed(code: .noPaymentResult, message: "the response has no AUTH or ACCOUNTCHECK entry"))
        }

        let paymentSucceeded = TPErrorCode.read(payment["errorcode"]) == TPErrorCode.ok
        let isAuth = payment["requesttypedescription"]?.stringValue == "AUTH"
        // An ACCOUNTCHECK takes no money; the recurring amount is the SUBSCRIPTION's.
        let amountEntry = isAuth ? payment : (subscription ?? payment)
        if let mismatch = expected.amountMismatch(in: amountEntry, requireAmount: paymentSucceeded && isAuth && requireStatedFields) {
            return Reading(.failed(code: .amountMismatch, message: mismatch))
        }
        guard paymentSucceeded else { return Reading(failure(payment)) }

        var result = summary(of: payment)
        if let subscription {
            let errorcode = TPErrorCode.read(subscription["errorcode"]) ?? ""
            let scheduled = errorcode == TPErrorCode.ok
            result["subscriptionScheduled"] = .bool(scheduled)
            result["subscriptionErrorcode"] = .string(errorcode)
            if let reference = subscription["transactionreference"]?.stringValue {
                result["subscriptionTransactionReference"] = .string(reference)
            }
            let active = subscription["transactionactive"].flatMap(TPErrorCode.read)
            if let active { result["transactionActive"] = .string(active) }
            result["subscriptionState"] = .string(scheduled ? subscriptionState(active) : "notScheduled")
            if expected.subscription != nil {
                // Trust Payments: "Any other errorcode values indicate that the subscription has
                // not been scheduled".
                guard scheduled else {
                    let message =
                        "SUBSCRIPTION errorcode \(errorcode.isEmpty ? "missing" : String(errorcode.prefix(16)))\(TPWebServices.messageSuffix(subscription)); the first payment was taken"
                    return Reading(.failed(code: .subscriptionNotScheduled, message: message), failureResult: result)
                }
                if let mismatch = expected.subscriptionMismatch(in: subscription, requireFields: requireStatedFields) {
                    return Reading(.failed(code: .subscriptionMismatch, message: mismatch + "; the first payment was taken"), failureResult: result)
                }
            }
        } else {
            result["subscriptionScheduled"] = false
            result["subscriptionState"] = "notScheduled"
            if expected.subscription != nil, requireStatedFields {
                return Reading(
                    .failed(code: .subscriptionNotScheduled, message: "the response has no SUBSCRIPTION entry; the first payment was taken"),
                    failureResult: result)
            }
        }
        return Reading(.succeeded(result))
    }

    /// The outcome `result` for a successful payment entry.
    static func summary(of entry: [String: JSONValue]) -> [String: JSONValue] {
        var result: [String: JSONValue] = [:]
        if let reference = entry["transactionreference"]?.stringValue { result["transactionReference"] = .string(reference) }
        if let type = entry["requesttypedescription"]?.stringValue { result["requestType"] = .string(type) }
        let settlestatus = entry["settlestatus"].flatMap(TPErrorCode.read)
        if let settlestatus { result["settleStatus"] = .string(settlestatus) }
        result["settlement"] = .string(settlement(settlestatus))
        if let amount = entry["baseamount"].flatMap(TPErrorCode.read), let minor = Int64(amount) { result["amount"] = .integer(minor) }
        if let currency = entry["currencyiso3a"]?.stringValue { result["currency"] = .string(currency) }
        return result
    }

    static func failure(_ entry: [String: JSONValue]) -> ProviderVerdict {
        let errorcode = TPErrorCode.read(entry["errorcode"]) ?? "missing"
        let type = entry["requesttypedescription"]?.stringValue ?? "response"
        let message = "\(type) errorcode \(errorcode)\(TPWebServices.messageSuffix(entry))"
        switch errorcode {
        case TPErrorCode.uncertain: return .unknown(reason: message)
        case _ where TPErrorCode.paymentStatusUnknown.contains(errorcode): return .unknown(reason: message + "; the payment's status is unknown")
        case TPErrorCode.timeout: return .failed(code: .timeout, message: message)
        default:
            if case .failed(let code) = TPErrorCode.meaning(of: errorcode) { return .failed(code: code, message: message) }
            return .failed(code: .tpError(errorcode), message: message)
        }
    }
}

import PaypipeCore

/// One payment leg of an auth: `transactionDetails.paymentModes[]`.
public struct PhonePePaymentMode: Sendable, Equatable {
    public var mode: String?
    public var amount: Int64?
    public var utr: String?

    public init(mode: String?, amount: Int64?, utr: String?) {
        self.mode = mode
        self.amount = amount
        self.utr = utr
    }
}

/// `transactionDetails` of a callback or an auth-status response.
public struct PhonePeTransactionDetails: Sendable, Equatable {
    public var providerReferenceId: String?
    /// Paise.
    public var amount: Int64?
    public var state: String?
    public var payResponseCode: String?
    public var paymentModes: [PhonePePaymentMode]

    public init(providerReferenceId: String?, amount: Int64?, state: String?, payResponseCode: String?, paymentModes: [PhonePePaymentMode]) {
        self.providerReferenceId = providerReferenceId
        self.amount = amount
        self.state = state
        self.payResponseCode = payResponseCode
        self.paymentModes = paymentModes
    }
}

/// `subscriptionDetails` of a callback or an auth-status response.
public struct PhonePeSubscriptionDetails: Sendable, Equatable {
    public var subscriptionId: String?
    public var state: String?

    public init(subscriptionId: String?, state: String?) {
        self.subscriptionId = subscriptionId
        self.state = state
    }
}

/// A field that is present but has the wrong JSON type.
public struct PhonePeFieldError: Error, Sendable, Equatable, CustomStringConvertible {
    public let field: String
    public let expected: String
    public var description: String { "\(field) must be \(expected)" }
}

/// The part of `data` that callbacks and auth-status responses share, and the one reading of
/// it into a verdict for an authInit order.
public struct PhonePeAuthState: Sendable, Equatable {
    public var merchantId: String?
    public var authRequestId: String?
    public var transaction: PhonePeTransactionDetails?
    public var subscription: PhonePeSubscriptionDetails?

    public init(merchantId: String?, authRequestId: String?, transaction: PhonePeTransactionDetails?, subscription: PhonePeSubscriptionDetails?) {
        self.merchantId = merchantId
        self.authRequestId = authRequestId
        self.transaction = transaction
        self.subscription = subscription
    }

    /// Unknown fields are ignored; a known field of the wrong type is an error naming it
    /// (an amount of "399.00" or 399.5 must never be read as some other number).
    public init(data: [String: JSONValue]) throws(PhonePeFieldError) {
        merchantId = try Self.string(data, "merchantId", in: "data")
        authRequestId = try Self.string(data, "authRequestId", in: "data")
        if let value = data["transactionDetails"], value != .null {
            guard let details = value.objectValue else { throw PhonePeFieldError(field: "data.transactionDetails", expected: "an object") }
            var modes: [PhonePePaymentMode] = []
            if let list = details["paymentModes"], list != .null {
                guard let array = list.arrayValue else {
                    throw PhonePeFieldError(field: "data.transactionDetails.paymentModes", expected: "an array")
                }
                for (index, element) in array.enumerated() {
                    let path = "data.transactionDetails.paymentModes[\(index)]"
                    guard let mode = element.objectValue else { throw PhonePeFieldError(field: path, expected: "an object") }
                    modes.append(
                        PhonePePaymentMode(
                            mode: try Self.string(mode, "mode", in: path), amount: try Self.integer(mode, "amount", in: path),
                            utr: try Self.string(mode, "utr", in: path)))
                }
            }
            let path = "data.transactionDetails"
            transaction = PhonePeTransactionDetails(
                providerReferenceId: try Self.string(details, "providerReferenceId", in: path),
                amount: try Self.integer(details, "amount", in: path), state: try Self.string(details, "state", in: path),
                payResponseCode: try Self.string(details, "payResponseCode", in: path), paymentModes: modes)
        } else {
            transaction = nil
        }
        if let value = data["subscriptionDetails"], value != .null {
            guard let details = value.objectValue else { throw PhonePeFieldError(field: "data.subscriptionDetails", expected: "an object") }
            subscription = PhonePeSubscriptionDetails(
                subscriptionId: try Self.string(details, "subscriptionId", in: "data.subscriptionDetails"),
                state: try Self.string(details, "state", in: "data.subscriptionDetails"))
        } else {
            subscription = nil
        }
    }

    private static func string(_ object: [String: JSONValue], _ key: String, in path: String) throws(PhonePeFieldError) -> String? {
        guard let value = object[key], value != .null else { return nil }
        guard let text = value.stringValue else { throw PhonePeFieldError(field: "\(path).\(key)", expected: "a string") }
        return text
    }

    private static func integer(_ object: [String: JSONValue], _ key: String, in path: String) throws(PhonePeFieldError) -> Int64? {
        guard let value = object[key], value != .null else { return nil }
        guard let number = value.integerValue else { throw PhonePeFieldError(field: "\(path).\(key)", expected: "an integer (paise)") }
        return number
    }
}

// MARK: - Verdict

extension PhonePeAuthState {
    /// Transaction states: the auth debit.
    static let completedTransactionStates: Set<String> = ["COMPLETED", "SUCCESS"]
    static let pendingTransactionStates: Set<String> = ["PENDING"]
    /// Subscription states: the mandate. (waiting/ended sets beyond CREATED/ACTIVE/FAILED: unconfirmed)
    static let waitingSubscriptionStates: Set<String> = ["CREATED", "PENDING", "AUTHORIZED", "INITIATED"]
    static let endedSubscriptionStates: Set<String> = ["CANCELLED", "REVOKED", "EXPIRED"]

    /// The authInit order's verdict from this state. References first (merchantId, authRequestId,
    /// subscriptionId: `REFERENCE_MISMATCH`), then the amount for TRANSACTION (`AMOUNT_MISMATCH`,
    /// also when a success carries no amount), then the states:
    ///
    /// | transaction | subscription | verdict |
    /// |---|---|---|
    /// | FAILED | any | failed (payResponseCode) |
    /// | COMPLETED/SUCCESS | FAILED | unknown (contradictory) |
    /// | COMPLETED/SUCCESS | other/absent | succeeded |
    /// | PENDING/absent | FAILED, CANCELLED, REVOKED, EXPIRED | failed |
    /// | absent | ACTIVE | succeeded |
    /// | PENDING | ACTIVE | pending |
    /// | PENDING/absent | CREATED/PENDING/absent | pending |
    /// | anything unrecognised | | unknown |
    public func verdict(expected: PhonePeAuthInitParams, merchantId: String) -> ProviderVerdict {
        if let received = self.merchantId, received != merchantId {
            return .failed(code: .referenceMismatch, message: "merchantId \(received.prefix(64)) is not this merchant's \(merchantId)")
        }
        if let received = authRequestId, received != expected.authRequestId {
            return .failed(code: .referenceMismatch, message: "authRequestId \(received.prefix(64)) != order's \(expected.authRequestId)")
        }
        if let received = subscription?.subscriptionId, received != expected.subscriptionId {
            return .failed(code: .referenceMismatch, message: "subscriptionId \(received.prefix(64)) != order's \(expected.subscriptionId)")
        }
        let expectedAmount = expected.authWorkflowType == .transaction ? expected.amount : nil
        if let expectedAmount, let received = transaction?.amount, received != expectedAmount {
            return .failed(code: .amountMismatch, message: "PhonePe amount \(received) != order amount \(expectedAmount)")
        }

        let verdict = stateVerdict(authRequestId: expected.authRequestId)
        if case .succeeded = verdict, let expectedAmount, transaction?.amount == nil {
            return .failed(code: .amountMismatch, message: "PhonePe reported success without an amount; order amount \(expectedAmount)")
        }
        return verdict
    }

    func stateVerdict(authRequestId: String) -> ProviderVerdict {
        let transactionState = transaction?.state
        let subscriptionState = subscription?.state
        let described = "transaction \(transactionState?.prefix(32) ?? "absent"), subscription \(subscriptionState?.prefix(32) ?? "absent")"

        if transactionState == "FAILED" {
            return .failed(code: failureCode(fallback: .authFailed), message: "PhonePe auth failed (\(described))")
        }
        if let transactionState, Self.completedTransactionStates.contains(transactionState) {
            if subscriptionState == "FAILED" {
                return .unknown(reason: "PhonePe reported a contradictory state (\(described))")
            }
            return .succeeded(result(authRequestId: authRequestId))
        }
        if let transactionState, !Self.pendingTransactionStates.contains(transactionState) {
            return .unknown(reason: "PhonePe reported an unrecognised state (\(described))")
        }
        // The auth debit is pending or absent (PENNY_DROP, or not yet attempted): the mandate decides.
        guard let subscriptionState else { return .pending(pendingResult(authRequestId: authRequestId)) }
        if subscriptionState == "FAILED" {
            return .failed(code: failureCode(fallback: .subscriptionFailed), message: "PhonePe mandate failed (\(described))")
        }
        if Self.endedSubscriptionStates.contains(subscriptionState) {
            return .failed(code: .subscriptionEnded(subscriptionState), message: "PhonePe mandate ended before authorisation (\(described))")
        }
        if subscriptionState == "ACTIVE" {
            return transactionState == nil ? .succeeded(result(authRequestId: authRequestId)) : .pending(pendingResult(authRequestId: authRequestId))
        }
        if Self.waitingSubscriptionStates.contains(subscriptionState) {
            return .pending(pendingResult(authRequestId: authRequestId))
        }
        return .unknown(reason: "PhonePe reported an unrecognised state (\(described))")
    }

    private func failureCode(fallback: OutcomeErrorCode) -> OutcomeErrorCode {
        guard let code = transaction?.payResponseCode, !code.isEmpty, code != "SUCCESS",
            PhonePeRules.isIdentifier(code, maxLength: 64)
        else { return fallback }
        return .phonePe(code)
    }

    private func result(authRequestId: String) -> [String: JSONValue] {
        var result: [String: JSONValue] = ["authRequestId": .string(authRequestId)]
        if let id = subscription?.subscriptionId { result["subscriptionId"] = .string(id) }
        if let state = subscription?.state { result["subscriptionState"] = .string(state) }
        if let state = transaction?.state { result["transactionState"] = .string(state) }
        if let id = transaction?.providerReferenceId { result["providerReferenceId"] = .string(id) }
        if let amount = transaction?.amount { result["amount"] = .integer(amount) }
        return result
    }

    private func pendingResult(authRequestId: String) -> [String: JSONValue] {
        var result: [String: JSONValue] = ["authRequestId": .string(authRequestId)]
        if let state = subscription?.state { result["subscriptionState"] = .string(state) }
        if let state = transaction?.state { result["transactionState"] = .string(state) }
        return result
    }
}

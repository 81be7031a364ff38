import PaypipeCore

/// The S2S callbacks about a mandate after its authorisation (PhonePe's recurring reference:
/// "Recurring INIT" sends NOTIFY, "Recurring Debit Execute" sends DEBIT, and the user revoking,
/// pausing or unpausing the mandate, or the merchant cancelling it, sends SUBSCRIPTION), as
/// subscription events. They name the subscription by PhonePe's `subscriptionId`; their fields
/// beyond `callbackType` are read in the debit-status shape the reference gives
/// (`transactionId`, `notificationDetails`, `transactionDetails`, `subscriptionDetails`).
extension PhonePeCallback {
    /// nil for an AUTH callback (the authInit order's), and for a debit still in progress.
    public func subscriptionEvent(merchant: String) throws(CallbackRejection) -> SubscriptionEvent? {
        guard callbackType != .auth else { return nil }
        let details = data["subscriptionDetails"]?.objectValue ?? [:]
        guard let subscription = details["subscriptionId"]?.stringValue ?? data["subscriptionId"]?.stringValue,
            PhonePeRules.isIdentifier(subscription, maxLength: PhonePeRules.subscriptionIdMaxLength)
        else {
            throw .malformed("data.subscriptionDetails.subscriptionId must be 1-\(PhonePeRules.subscriptionIdMaxLength) characters of [A-Za-z0-9_-]")
        }
        func event(
            _ kind: SubscriptionEvent.Kind, key: String, amount: Int64? = nil, reference: String? = nil, reason: String? = nil
        )
            -> SubscriptionEvent
        {
            SubscriptionEvent(
                merchant: merchant, provider: .phonepe, subscription: subscription, dedupeKey: "\(callbackType.rawValue)|\(key)", kind: kind,
                amount: amount, currency: amount == nil ? nil : "INR", providerReference: reference, reason: reason)
        }
        switch callbackType {
        case .debit:
            let transactionId = try identifier(data["transactionId"]?.stringValue, "data.transactionId")
            guard let transaction = state.transaction, let transactionState = transaction.state else {
                throw .malformed("a DEBIT callback needs data.transactionDetails.state")
            }
            let reference = transaction.providerReferenceId ?? transactionId
            switch transactionState {
            case "COMPLETED", "SUCCESS":
                return event(.renewalSucceeded, key: "\(transactionId)|COMPLETED", amount: transaction.amount, reference: reference)
            case "FAILED":
                return event(
                    .renewalFailed, key: "\(transactionId)|FAILED", amount: transaction.amount, reference: reference,
                    reason: transaction.payResponseCode.map { String($0.prefix(64)) } ?? "FAILED")
            default: return nil
            }
        case .notify:
            let notification = data["notificationDetails"]?.objectValue ?? [:]
            let notificationId = try identifier(notification["notificationId"]?.stringValue, "data.notificationDetails.notificationId")
            let amount = notification["amount"]?.integerValue
            switch notification["state"]?.stringValue {
            case "FAILED"?:
                return event(.renewalFailed, key: "\(notificationId)|FAILED", amount: amount, reference: notificationId, reason: "NOTIFY_FAILED")
            case nil: throw .malformed("a NOTIFY callback needs data.notificationDetails.state")
            default: return event(.renewalScheduled, key: notificationId, amount: amount, reference: notificationId)
            }
        default:
            guard let mandateState = details["state"]?.stringValue else {
                throw .malformed("a \(callbackType.rawValue.prefix(32)) callback needs data.subscriptionDetails.state")
            }
            let kind: SubscriptionEvent.Kind
            switch mandateState {
            case "REVOKED": kind = .mandateRevoked
            case "PAUSED": kind = .mandatePaused
            case "ACTIVE": kind = .mandateResumed
            case "CANCELLED": kind = .subscriptionCancelled
            case "EXPIRED": kind = .subscriptionEnded
            case "SUSPENDED": kind = .subscriptionSuspended
            default: return nil
            }
            let since = details["stateStartDate"].map { $0.stringValue ?? $0.integerValue.map(String.init) ?? "" } ?? ""
            return event(kind, key: "\(mandateState)|\(since)", reason: mandateState)
        }
    }

    private func identifier(_ value: String?, _ field: String) throws(CallbackRejection) -> String {
        guard let value, PhonePeRules.isIdentifier(value, maxLength: 64) else {
            throw .malformed("\(field) must be 1-64 characters of [A-Za-z0-9_-]")
        }
        return value
    }
}

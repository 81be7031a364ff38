import PaypipeCore

/// Which failed Trust Payments payments may be tried again (docs/protocol.md, "Declines"), by
/// the `errorcode` classes of ../shared/PROVIDERS-MONEY.md §1 ([TP-ERR], and the official list in
/// TP's SDK [TP-PYSDK errormessages.json]). Trust Payments' own engine charges its subscriptions,
/// so the ledger schedules none of them; the table classifies the outcomes of a payment order
/// and the `errorcode` a failed engine payment's notification reports (`renewal.failed`'s reason).
enum TrustPaymentsDeclines {
    /// By `errorcode`.
    static let table: [String: DeclineClass] = [
        // [TP-ERR] 70000: declined, "ask for another payment method"; TP does not split it.
        TPErrorCode.declined: .hard,
        // [TP-ERR] 71000: soft decline needing 3-D Secure; an engine payment runs without the
        // customer, so only the customer's action helps (inferred): not retried.
        "71000": .hard,
        // [TP-PYSDK] 72000 refer to issuer: only the customer's bank can clear it (inferred).
        "72000": .hard,
        // [TP-PYSDK] 60043 scheme restrictions.
        "60043": .hard,
        // [TP-PYSDK] 60042 insufficient funds; 88000 generic retry; 88888 soft-decline retry.
        "60042": .soft, "88000": .soft, "88888": .soft,
        // [TP-PYSDK] 79000 queued, 79001 record locked, 50005 / 60020 timeout.
        "79000": .soft, "79001": .soft, TPErrorCode.timeout: .soft, "60020": .soft,
        // [TP-ERR] 30000 a field error; [TP-PYSDK] 60022 unauthenticated: the merchant's request
        // or credentials.
        TPErrorCode.invalidField: .notADecline, TPErrorCode.unauthenticated: .notADecline,
    ]

    /// By outcome code (`TPErrorCode.verdict`'s names, TP_ERROR_<errorcode>) or by a bare `errorcode`.
    static func declineClass(of code: String) -> DeclineClass? {
        switch OutcomeErrorCode(rawValue: code) {
        // The web services refused the merchant's credentials, or the subscription request's fields.
        case .unauthorized, .subscriptionPrecondition, .subscriptionNotScheduled, .subscriptionMismatch: .notADecline
        case .declined: table[TPErrorCode.declined]
        case .timeout: table[TPErrorCode.timeout]
        case .invalidField: table[TPErrorCode.invalidField]
        case .unauthenticated: table[TPErrorCode.unauthenticated]
        default: table[code.hasPrefix("TP_ERROR_") ? String(code.dropFirst("TP_ERROR_".utf8.count)) : code]
        }
    }
}

/// What a failed scheduled charge says about the next attempt (docs/protocol.md, "Declines"):
/// whether trying the same customer's payment method again can help. Each provider classifies
/// its own codes (`ProviderConnector.declineClass(of:)`, a table in its Connector folder); the
/// pipeline's own codes are classified here; a code nobody names is `soft`, which is what every
/// decline was before the tables: retried by the policy, never given up on a guess.
public enum DeclineClass: String, Sendable, CaseIterable {
    /// The issuer, the bank or the mandate will not pay this way again (a lost or stolen card, a
    /// revoked mandate, an account that does not exist): retrying only costs scheme fees, so
    /// the cycle is given up at once.
    case hard
    /// It may pay later (insufficient funds, a technical failure, a generic refusal): the cycle
    /// is tried again by the merchant's retry days.
    case soft
    /// Not the customer's refusal: the merchant's configuration or credentials, or an answer a
    /// person must look at. Retrying changes nothing and the customer owes nothing yet, so the
    /// schedule waits in review.
    case notADecline = "not_a_decline"

    /// How a terminal `failed` or `rejected` outcome of a scheduled step counts. A `rejected`
    /// order broke a rule of ours (the merchant's config, the params): never the customer's.
    public static func of(_ outcome: Outcome, connector: (any ProviderConnector)?) -> DeclineClass {
        guard outcome.status != .rejected else { return .notADecline }
        guard let code = outcome.error?.code else { return .soft }
        return connector?.declineClass(of: code) ?? pipeline(code)
    }

    /// The pipeline's own failure codes (`OutcomeErrorCode`'s first sections).
    static func pipeline(_ code: String) -> DeclineClass {
        switch OutcomeErrorCode(rawValue: code) {
        // An answer that contradicts the order: someone must look before money is asked for again.
        case .amountMismatch, .referenceMismatch: .notADecline
        // Nothing was taken and nothing was refused (an expired pending order, a provider that
        // kept answering "retry", an operator's word that nothing was taken): the next attempt
        // may go through.
        default: .soft
        }
    }
}

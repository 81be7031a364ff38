import PaypipeCore

/// Which failed PhonePe debits may be tried again (docs/protocol.md, "Declines"). PhonePe
/// publishes no hard/soft split for autopay debits (../shared/PROVIDERS-MONEY.md §3): the
/// mandate states are final or not by PhonePe's own subscription states [PP-SUBST], and the
/// NPCI codes a failed debit's `payResponseCode` carries are classified by our policy, from a
/// third party's list [NPCI-JUS]. The codes are as the outcomes carry them: PhonePe's envelope
/// code or `payResponseCode` unchanged (`OutcomeErrorCode.phonePe`), a mandate that ended
/// `SUBSCRIPTION_<state>`, and the pipeline's NOTIFY_FAILED / DEBIT_FAILED. A code not here
/// is retried.
enum PhonePeDeclines {
    static let table: [String: DeclineClass] = [
        // [PP-SUBST], [PP-CANCEL]: a revoked, cancelled or expired mandate is never debited again
        // (the envelope codes of a debit against one, and the states an outcome names).
        "SUBSCRIPTION_REVOKED": .hard, "SUBSCRIPTION_CANCELLED": .hard, "SUBSCRIPTION_EXPIRED": .hard,
        "SUBSCRIPTION_ALREADY_REVOKED": .hard, "SUBSCRIPTION_ALREADY_CANCELLED": .hard, "SUBSCRIPTION_FAILED": .hard,
        // [PP-CANCEL]: PhonePe knows no such mandate.
        "SUBSCRIPTION_NOT_FOUND": .hard,
        // [PP-SUBST] PAUSED: the customer paused the mandate; a later attempt may find it
        // unpaused (inferred: "skip until unpaused"), so it is not given up.
        "SUBSCRIPTION_PAUSED": .soft, "SUBSCRIPTION_NOT_ACTIVE": .soft,
        // [NPCI-JUS] (3p), our policy: the customer declined, the account is blocked or does
        // not exist, the mobile number linked to it changed: the same mandate will not pay.
        "ZA": .hard, "YE": .hard, "XH": .hard, "B1": .hard,
        // [NPCI-JUS] Z9 insufficient funds: retried later.
        "Z9": .soft,
        // [PP-EXEC] as a debit's payResponseCode, "Bank did not authorise", retried. (As an
        // envelope code it means a bad checksum [PP-TRBL]; the outcome's code cannot tell the two
        // apart, and retrying a checksum error only fails again.)
        "AUTHORIZATION_FAILED": .soft,
        // PhonePe refused the request's fields [PP-TRBL]: the merchant's setup, not the customer.
        "BAD_REQUEST": .notADecline,
    ]
}

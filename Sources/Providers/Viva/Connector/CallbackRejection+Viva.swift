import PaypipeCore

extension CallbackRejection {
    /// Every refused Viva URI (a sale callback, or a sale request URL the sandbox reads as the
    /// app would) is answered 400, with one of Viva's URI codes (`VivaErrorCodes.swift`) or the
    /// shared MISSING_FIELD / INVALID_FIELD. Messages name the query key at fault (or "the
    /// URI") and never quote card numbers or other values that could carry card data.
    static func viva(_ code: OutcomeErrorCode, _ message: String) -> CallbackRejection {
        .malformed(message, code: code)
    }
}

import PaypipeCore

extension CallbackRejection {
    /// Viva's reasons for refusing a URI (a sale callback, or a sale request URL the sandbox reads
    /// as the app would), as the rejection's `code`.
    enum VivaReason: String {
        case malformedURI = "MALFORMED_URI"
        case invalidEncoding = "INVALID_ENCODING"
        case duplicateParameter = "DUPLICATE_PARAMETER"
        case wrongScheme = "WRONG_CALLBACK_SCHEME"
        case wrongHost = "WRONG_HOST"
        case wrongAction = "WRONG_ACTION"
        case missingField = "MISSING_FIELD"
        case invalidField = "INVALID_FIELD"
        case unmaskedPAN = "UNMASKED_PAN"
    }

    /// Every refused Viva URI is answered 400. Messages name the query key at fault (or "the
    /// URI") and never quote card numbers or other values that could carry card data.
    static func viva(_ reason: VivaReason, _ message: String) -> CallbackRejection {
        .malformed(message, code: reason.rawValue)
    }
}

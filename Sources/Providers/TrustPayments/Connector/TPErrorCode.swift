import PaypipeCore

/// Trust Payments' `errorcode` values and what each means for the pipeline (from its error
/// code documentation):
/// the one table the submitter's retry / query / fail decision comes from.
public enum TPErrorCode {
    public static let ok = "0"
    public static let invalidField = "30000"
    public static let timeout = "50005"
    public static let bankSystemError = "60010"
    public static let referenceNotFound = "60014"
    public static let notUpdatable = "60017"
    public static let unauthenticated = "60022"
    public static let declined = "70000"
    public static let uncertain = "70001"
    /// The payment's final status is unknown to Trust Payments until its support looks into it
    /// (its error code guidance for 60010 and 60034): money may have been taken.
    public static let paymentStatusUnknown: Set<String> = [bankSystemError, "60034"]
    public static let subscriptionPreconditions: Set<String> = ["20018", "20019"]

    public enum Meaning: Sendable, Equatable {
        case ok
        /// Known not to have taken effect: send the same request again.
        case retry
        /// May have taken effect: resolve with a TRANSACTIONQUERY, never resend.
        case unknown
        /// Terminal: `code` is the outcome's `error.code`.
        case failed(code: OutcomeErrorCode)
    }

    public static func meaning(of errorcode: String) -> Meaning {
        switch errorcode {
        case ok: .ok
        case timeout, bankSystemError: .retry
        case uncertain: .unknown
        case invalidField: .failed(code: .invalidField)
        case declined: .failed(code: .declined)
        case referenceNotFound: .failed(code: .referenceNotFound)
        case notUpdatable: .failed(code: .notUpdatable)
        case unauthenticated: .failed(code: .unauthenticated)
        case _ where subscriptionPreconditions.contains(errorcode): .failed(code: .subscriptionPrecondition)
        default: .failed(code: .tpError(errorcode))
        }
    }

    /// `errorcode` as written by the API (a string) or, leniently, as a JSON integer.
    static func read(_ value: JSONValue?) -> String? {
        switch value {
        case .string(let text)?: text
        case .integer(let number)?: String(number)
        default: nil
        }
    }
}

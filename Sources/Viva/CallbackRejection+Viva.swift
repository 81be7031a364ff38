/// Why a Viva URI (a sale request URL or a sale callback URI) was refused. The callback validator
/// answers these with `httpStatus` (4xx) and counts them by `reason`. Messages name the field and
/// the rule; they never quote card numbers or other values that could carry card data.
public struct VivaURIError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Reason: String, Sendable, CaseIterable {
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

    public let reason: Reason
    /// The query key at fault, or "uri" for the URI as a whole.
    public let field: String
    public let message: String

    public init(_ reason: Reason, field: String, _ message: String) {
        self.reason = reason
        self.field = field
        self.message = message
    }

    public var httpStatus: Int { 400 }
    public var description: String { "\(reason.rawValue): \(message)" }
}

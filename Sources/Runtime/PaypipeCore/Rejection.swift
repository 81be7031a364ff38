/// Why an order or a provider request cannot go ahead: a stable code, the field at fault
/// and a message naming the field and the rule. Messages never carry secret values.
public struct Rejection: Error, Sendable, Equatable, CustomStringConvertible {
    public let code: Code
    public let field: String
    public let message: String

    public init(_ code: Code, field: String, _ message: String) {
        self.code = code
        self.field = field
        self.message = message
    }

    public var description: String { "\(code.rawValue): \(message)" }

    /// Codes that appear as `error.code` in a `rejected` outcome.
    public struct Code: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        // Frame-level: the frame is dropped and counted; no outcome.
        /// Over `Order.maxFrameBytes`; a `rejected` outcome when the frame is an object with a
        /// string `orderId`, otherwise dropped like the codes below.
        public static let frameTooLarge = Code(rawValue: "FRAME_TOO_LARGE")
        public static let invalidUTF8 = Code(rawValue: "INVALID_UTF8")
        public static let malformedJSON = Code(rawValue: "MALFORMED_JSON")
        public static let notAnObject = Code(rawValue: "NOT_A_JSON_OBJECT")

        // Order-level: a `rejected` outcome.
        public static let unsupportedVersion = Code(rawValue: "UNSUPPORTED_VERSION")
        public static let missingField = Code(rawValue: "MISSING_FIELD")
        public static let invalidType = Code(rawValue: "INVALID_TYPE")
        public static let unknownField = Code(rawValue: "UNKNOWN_FIELD")
        public static let invalidOrderId = Code(rawValue: "INVALID_ORDER_ID")
        public static let invalidMerchant = Code(rawValue: "INVALID_MERCHANT")
        public static let unknownProvider = Code(rawValue: "UNKNOWN_PROVIDER")
        public static let unknownOperation = Code(rawValue: "UNKNOWN_OPERATION")
        public static let amountNotInteger = Code(rawValue: "AMOUNT_NOT_INTEGER")
        public static let amountNotPositive = Code(rawValue: "AMOUNT_NOT_POSITIVE")
        public static let invalidCurrency = Code(rawValue: "INVALID_CURRENCY")
        public static let missingParam = Code(rawValue: "MISSING_PARAM")
        public static let invalidParam = Code(rawValue: "INVALID_PARAM")
        public static let unknownMerchant = Code(rawValue: "UNKNOWN_MERCHANT")
        public static let missingCredentials = Code(rawValue: "MISSING_CREDENTIALS")
        /// An internal work item the pipeline itself could not read (a bug or a corrupt frame).
        public static let unreadableWork = Code(rawValue: "UNREADABLE_WORK")
        /// A provider reference the order names (e.g. PhonePe `authRequestId`) belongs to another
        /// order of the same merchant: callbacks naming it could not tell the two apart.
        public static let referenceInUse = Code(rawValue: "REFERENCE_IN_USE")
        /// With upstream CURVE, the sender's key is not allowed to send orders for this merchant.
        public static let merchantNotAllowed = Code(rawValue: "MERCHANT_NOT_ALLOWED")
        /// A `schedule` or `cancel` order names a subscription the store does not know (its first
        /// order has not succeeded yet), or one of a provider paypipe does not charge on schedule.
        public static let subscriptionNotFound = Code(rawValue: "SUBSCRIPTION_NOT_FOUND")
        /// A `schedule` order asks for what the schedule's state does not allow (resume a
        /// cancelled schedule).
        public static let scheduleState = Code(rawValue: "SCHEDULE_STATE")
        /// A `cancel` order names a subscription that has already ended, been cancelled or been
        /// revoked: there is nothing left to cancel.
        public static let subscriptionEnded = Code(rawValue: "SUBSCRIPTION_ENDED")
        /// A refund's `params.refundOf` names no order of the merchant and provider.
        public static let refundOriginalUnknown = Code(rawValue: "REFUND_ORIGINAL_UNKNOWN")
        /// A refund's original order has not succeeded (yet): it captured nothing to give back.
        public static let refundOriginalNotSucceeded = Code(rawValue: "REFUND_ORIGINAL_NOT_SUCCEEDED")
        /// A refund names a capture its original order's outcome does not report.
        public static let refundCaptureUnknown = Code(rawValue: "REFUND_CAPTURE_UNKNOWN")
        /// A refund's currency is not its capture's.
        public static let refundCurrencyMismatch = Code(rawValue: "REFUND_CURRENCY_MISMATCH")
        /// A refund's amount is more than its capture less what its other refunds (those not
        /// failed or rejected) already give back.
        public static let refundExceedsCaptured = Code(rawValue: "REFUND_EXCEEDS_CAPTURED")
    }
}

extension Rejection {
    public static func missingParam(_ name: String) -> Rejection {
        Rejection(.missingParam, field: "params.\(name)", "params.\(name) is required")
    }

    public static func invalidParam(_ name: String, _ rule: String) -> Rejection {
        Rejection(.invalidParam, field: "params.\(name)", "params.\(name) \(rule)")
    }
}

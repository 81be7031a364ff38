import PaypipeCore

/// Subscription interval unit; Trust Payments requires it in capitals on the wire.
public enum TPSubscriptionUnit: String, Sendable, Hashable, CaseIterable {
    case day = "DAY"
    case month = "MONTH"
}

public enum TPSubscriptionType: String, Sendable, Hashable, CaseIterable {
    case recurring = "RECURRING"
    case installment = "INSTALLMENT"
}

/// The validated content of a `subscriptionJwt` order: everything the SDK JWT payload carries
/// besides the merchant's configuration.
public struct TPSubscriptionRequest: Sendable, Equatable {
    public var orderReference: String
    public var baseAmount: Int64
    public var currency: String
    public var type: TPSubscriptionType
    public var unit: TPSubscriptionUnit
    public var frequency: Int64
    public var number: Int64
    /// 0 means "indefinitely".
    public var finalNumber: Int64
    public var beginDate: CivilDate?
    /// 0 inactive, 1 active, 2 pending (the provider's default when absent).
    public var transactionActive: Int64?
    /// Free trial: ACCOUNTCHECK + SUBSCRIPTION instead of THREEDQUERY + AUTH + SUBSCRIPTION.
    public var freeTrial: Bool

    public init(
        orderReference: String, baseAmount: Int64, currency: String, type: TPSubscriptionType, unit: TPSubscriptionUnit,
        frequency: Int64, number: Int64 = 1, finalNumber: Int64, beginDate: CivilDate? = nil,
        transactionActive: Int64? = nil, freeTrial: Bool = false
    ) {
        self.orderReference = orderReference
        self.baseAmount = baseAmount
        self.currency = currency
        self.type = type
        self.unit = unit
        self.frequency = frequency
        self.number = number
        self.finalNumber = finalNumber
        self.beginDate = beginDate
        self.transactionActive = transactionActive
        self.freeTrial = freeTrial
    }

    public var requestTypes: [String] { freeTrial ? ["ACCOUNTCHECK", "SUBSCRIPTION"] : ["THREEDQUERY", "AUTH", "SUBSCRIPTION"] }

    /// Whether the subscription runs until someone sets it inactive.
    public var isIndefinite: Bool { finalNumber == 0 }

    static let knownParams: Set<String> = [
        "subscriptionType", "unit", "frequency", "finalNumber", "number", "beginDate", "transactionActive", "freeTrial",
    ]

    /// Reads and validates a `subscriptionJwt` order (the field table of Trust Payments' Mobile SDK
    /// subscription documentation). `issuedAt` (seconds since the epoch) dates the request, so that
    /// a begin date in the past can be refused: Trust Payments says the engine "will catch up with
    /// missed payments", so a past date would charge the customer several times at once.
    public init(order: Order, issuedAt: Int64) throws(Rejection) {
        guard order.operation == .subscriptionJwt else {
            throw Rejection(.unknownOperation, field: "operation", "operation \(order.operation.rawValue) is not subscriptionJwt")
        }
        guard let amount = order.amount else {
            throw Rejection(.missingField, field: "amount", "amount is required for subscriptionJwt")
        }
        guard amount > 0 else { throw Rejection(.amountNotPositive, field: "amount", "amount must be greater than zero (baseamount)") }
        guard amount <= 9_999_999_999_999 else {
            throw Rejection(.invalidParam, field: "amount", "amount must have at most 13 digits (baseamount Numeric(13))")
        }
        guard let currency = order.currency else {
            throw Rejection(.missingField, field: "currency", "currency is required for subscriptionJwt")
        }
        guard Order.isAlpha3(currency) else {
            throw Rejection(.invalidCurrency, field: "currency", "currency must be three capital letters (currencyiso3a)")
        }
        let params = try ParamReader(order.params, allowed: Self.knownParams, operation: "trustpayments subscriptionJwt")

        let typeText = try params.string("subscriptionType")
        guard let type = TPSubscriptionType(rawValue: typeText) ?? TPSubscriptionType(rawValue: typeText.uppercased()) else {
            throw params.invalid("subscriptionType", "must be RECURRING or INSTALLMENT")
        }
        let unit = try params.tpUnit("unit")
        let frequency = try params.tpFrequency("frequency")

        var number: Int64 = 1
        if params.contains("number") {
            number = try params.tpNumeric("number", maxDigits: 5)
            guard number >= 1 else { throw params.invalid("number", "must be at least 1") }
        }
        let finalNumber = try params.tpFinalNumber("finalNumber")
        guard finalNumber == 0 || finalNumber >= number else {
            throw params.invalid("finalNumber", "must be at least params.number (\(number)), or 0 for an indefinite subscription")
        }

        var beginDate: CivilDate?
        if let text = try params.optionalString("beginDate") {
            guard let date = CivilDate(iso8601: text) else {
                throw params.invalid("beginDate", "must be a real calendar date written YYYY-MM-DD")
            }
            let requestDay = CivilDate(daysSinceEpoch: issuedAt.floorDividedTP(by: 86_400))
            guard date >= requestDay else {
                throw params.invalid("beginDate", "must not be before the request date \(requestDay) (missed payments would be caught up at once)")
            }
            beginDate = date
        }

        var transactionActive: Int64?
        if params.contains("transactionActive") {
            transactionActive = try params.tpTransactionActive("transactionActive", allowed: 0...2)
        }

        let freeTrial = try params.optionalBool("freeTrial") ?? false

        self.init(
            orderReference: order.orderId, baseAmount: amount, currency: currency, type: type, unit: unit,
            frequency: frequency, number: number, finalNumber: finalNumber, beginDate: beginDate,
            transactionActive: transactionActive, freeTrial: freeTrial)
    }
}

extension Int64 {
    func floorDividedTP(by divisor: Int64) -> Int64 {
        let quotient = self / divisor
        return (self % divisor != 0 && (self < 0) != (divisor < 0)) ? quotient - 1 : quotient
    }
}

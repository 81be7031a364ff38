import PaypipeCore

/// When the subscription engine will take each automated payment (Trust Payments' Mobile SDK
/// subscription documentation, "Start of the automated payments" and the field table):
/// - the first one on `subscriptionbegindate` when given, else one interval after the request;
/// - then one every `frequency` `unit`s, each computed from that anchor (the 31st stays the 31st
///   where the month has one, instead of drifting to the 28th after February);
/// - `subscriptionnumber` 1 and `subscriptionfinalnumber` 12 mean 12 payments including the
///   initial AUTH, so 11 automated ones; `subscriptionfinalnumber` 0 means no end.
public struct TPSchedule: Sendable, Equatable {
    public var requestDate: CivilDate
    public var beginDate: CivilDate?
    public var unit: TPSubscriptionUnit
    public var frequency: Int64
    public var number: Int64
    public var finalNumber: Int64
    /// False for a free trial (ACCOUNTCHECK + SUBSCRIPTION): no payment is taken up front, so
    /// the first automated payment is number `subscriptionnumber` itself. (unconfirmed: Trust
    /// Payments' documentation only describes the combined AUTH SUBSCRIPTION case.)
    public var includesInitialPayment: Bool

    /// Dates beyond this year are not produced (a Numeric(11) frequency in days could reach them).
    static let lastYear = 9999

    public init(
        requestDate: CivilDate, beginDate: CivilDate?, unit: TPSubscriptionUnit, frequency: Int64, number: Int64 = 1,
        finalNumber: Int64, includesInitialPayment: Bool = true
    ) {
        self.requestDate = requestDate
        self.beginDate = beginDate
        self.unit = unit
        self.frequency = frequency
        self.number = number
        self.finalNumber = finalNumber
        self.includesInitialPayment = includesInitialPayment
    }

    /// The schedule of a validated request signed at `issuedAt` (seconds; the request date is its UTC day).
    public init(request: TPSubscriptionRequest, issuedAt: Int64) {
        self.init(
            requestDate: CivilDate(daysSinceEpoch: issuedAt.floorDividedTP(by: 86_400)), beginDate: request.beginDate,
            unit: request.unit, frequency: request.frequency, number: request.number, finalNumber: request.finalNumber,
            includesInitialPayment: !request.freeTrial)
    }

    /// How many automated payments there will be; nil when the subscription is indefinite.
    public var automatedPaymentCount: Int64? {
        guard finalNumber != 0 else { return nil }
        return max(0, finalNumber - number + (includesInitialPayment ? 0 : 1))
    }

    /// The automated payments' dates in order: all of them, or the first `limit` (an indefinite
    /// subscription always needs a limit).
    public func automatedPaymentDates(limit: Int) -> [CivilDate] {
        let count = min(Int64(max(0, limit)), automatedPaymentCount ?? Int64.max)
        var dates: [CivilDate] = []
        dates.reserveCapacity(Int(min(count, 1024)))
        var index: Int64 = 0
        while index < count, let date = date(ofAutomatedPayment: index) {
            dates.append(date)
            index += 1
        }
        return dates
    }

    /// The date of the automated payment at `index` (0 = the first), or nil past year 9999.
    public func date(ofAutomatedPayment index: Int64) -> CivilDate? {
        guard index >= 0, frequency >= 1 else { return nil }
        let anchor = beginDate ?? requestDate
        let steps = beginDate == nil ? index + 1 : index
        let (offset, overflow) = steps.multipliedReportingOverflow(by: frequency)
        let yearsAhead = Int64(Self.lastYear - anchor.year + 1)
        switch unit {
        case .month:
            guard !overflow, offset <= yearsAhead * 12 else { return nil }
            let date = anchor.addingMonths(Int(offset))
            return date.year <= Self.lastYear ? date : nil
        case .day:
            guard !overflow, offset <= yearsAhead * 366 else { return nil }
            let date = anchor.addingDays(Int(offset))
            return date.year <= Self.lastYear ? date : nil
        }
    }
}

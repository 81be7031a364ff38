/// When paypipe charges a subscription whose provider never charges by itself (Nets, PhonePe):
/// docs/protocol.md, "Schedules". Upstream attaches it to the first order (`params.schedule`)
/// or sends it later in a `schedule` order. Cycle 1 is due on `firstChargeDate`; cycle n is
/// `n - 1` intervals later, counted from that first date (so a monthly schedule from the 31st
/// charges on the last day of shorter months and on the 31st again after), at midnight UTC.
public struct ChargeSchedule: Sendable, Equatable {
    public enum Interval: Sendable, Equatable {
        case days(Int)
        case months(Int)
    }

    /// Minor units, per cycle.
    public var amount: Int64
    public var currency: String
    public var interval: Interval
    public var firstChargeDate: CivilDate
    /// How many cycles in all; nil: until `endDate`, or open-ended.
    public var count: Int64?
    /// The last date a cycle may fall due; nil: until `count`, or open-ended.
    public var endDate: CivilDate?
    /// Whether upstream asked for the cycles already due when the schedule starts to be charged
    /// (up to `schedules.maxCatchUpCycles` of them); without it such a schedule is rejected.
    public var catchUp: Bool

    public init(
        amount: Int64, currency: String, interval: Interval, firstChargeDate: CivilDate, count: Int64? = nil, endDate: CivilDate? = nil,
        catchUp: Bool = false
    ) {
        self.amount = amount
        self.currency = currency
        self.interval = interval
        self.firstChargeDate = firstChargeDate
        self.count = count
        self.endDate = endDate
        self.catchUp = catchUp
    }

    /// The ISO 8601 duration of one interval: `P<n>D`, `P<n>W`, `P<n>M` or `P<n>Y`.
    public var intervalText: String {
        switch interval {
        case .days(let days): days % 7 == 0 ? "P\(days / 7)W" : "P\(days)D"
        case .months(let months): months % 12 == 0 ? "P\(months / 12)Y" : "P\(months)M"
        }
    }

    /// The date cycle `cycle` (1-based) falls due.
    public func date(ofCycle cycle: Int64) -> CivilDate {
        let steps = Int(max(cycle, 1) - 1)
        switch interval {
        case .days(let days): return firstChargeDate.addingDays(steps * days)
        case .months(let months): return firstChargeDate.addingMonths(steps * months)
        }
    }

    /// When cycle `cycle` falls due (epoch ms, midnight UTC of its date).
    public func dueAt(cycle: Int64) -> Int64 { date(ofCycle: cycle).daysSinceEpoch * 86_400_000 }

    /// Whether the schedule has a cycle `cycle`.
    public func includes(cycle: Int64) -> Bool {
        guard cycle >= 1 else { return false }
        if let count, cycle > count { return false }
        if let endDate, endDate < date(ofCycle: cycle) { return false }
        return true
    }

    /// The last cycle the schedule has that falls due at or before `time` (epoch ms); 0: none.
    /// Counted, not stepped through, so that a schedule decades overdue costs no more than one
    /// that is not.
    public func lastCycle(dueBy time: Int64) -> Int64 {
        var last = cyclesFallingDue(onOrBefore: CivilDate(daysSinceEpoch: time.floorDivided(by: 86_400_000)))
        if let count { last = min(last, count) }
        if let endDate { last = min(last, cyclesFallingDue(onOrBefore: endDate)) }
        return last
    }

    /// How many cycles fall due on or before `date`, ignoring `count` and `endDate`.
    private func cyclesFallingDue(onOrBefore date: CivilDate) -> Int64 {
        guard !(date < firstChargeDate) else { return 0 }
        switch interval {
        case .days(let days): return (date.daysSinceEpoch - firstChargeDate.daysSinceEpoch) / Int64(days) + 1
        case .months(let months):
            // Within one of the count: a month-end date clamped short (31 January to 28 February)
            // may fall a cycle either side of the plain month difference.
            let elapsed = (date.year - firstChargeDate.year) * 12 + (date.month - firstChargeDate.month)
            var cycles = Int64(max(elapsed, 0) / months) + 2
            while cycles > 0, date < self.date(ofCycle: cycles) { cycles -= 1 }
            return cycles
        }
    }

    /// How long before the present a schedule's first cycle may fall due without `catchUp`:
    /// every time zone's date is the UTC date of yesterday, today or tomorrow, so an order
    /// written in the merchant's "today" is never taken for a late one.
    public static let startGraceDays: Int64 = 1

    /// The rejection of a schedule whose cycle `cycle` (the first it would charge) fell due
    /// before `startGraceDays` ago at `now` (epoch ms, the schedules' clock), unless it asked
    /// for catch-up; nil when it may start. `field`: the schedule's place in the order's params.
    public func lateStart(cycle: Int64, now: Int64, field: String) -> Rejection? {
        let earliest = CivilDate(daysSinceEpoch: now.floorDivided(by: 86_400_000) - Self.startGraceDays)
        guard !catchUp, includes(cycle: cycle), date(ofCycle: cycle) < earliest else { return nil }
        return Rejection.invalidParam(
            "\(field).firstChargeDate",
            "must not make a cycle fall due before \(earliest.iso8601) (yesterday, UTC) unless params.\(field).catchUp is true: cycle \(cycle) would fall due on \(date(ofCycle: cycle).iso8601)"
        )
    }

    public var json: JSONValue {
        var o: [String: JSONValue] = [
            "amount": .integer(amount), "currency": .string(currency), "interval": .string(intervalText),
            "firstChargeDate": .string(firstChargeDate.iso8601),
        ]
        if let count { o["count"] = .integer(count) }
        if let endDate { o["endDate"] = .string(endDate.iso8601) }
        if catchUp { o["catchUp"] = .bool(true) }
        return .object(o)
    }

    /// Reads `params.<field>` of an order. `amount` and `currency` default to the order's own
    /// (the first payment's), so a schedule that charges what the first payment did names neither.
    public init(json: JSONValue, field: String, defaultAmount: Int64?, defaultCurrency: String?) throws(Rejection) {
        guard case .object(let object) = json else { throw Rejection.invalidParam(field, "must be an object") }
        for key in object.keys where !["amount", "currency", "interval", "firstChargeDate", "count", "endDate", "catchUp"].contains(key) {
            throw Rejection(.unknownField, field: "params.\(field).\(key)", "params.\(field).\(key) is not a schedule field")
        }
        func invalid(_ key: String, _ rule: String) -> Rejection { Rejection.invalidParam("\(field).\(key)", rule) }
        switch object["amount"] {
        case .none:
            guard let defaultAmount else { throw Rejection.missingParam("\(field).amount") }
            amount = defaultAmount
        case .integer(let value) where value > 0 && value <= 1_000_000_000_000: amount = value
        default: throw invalid("amount", "must be a positive integer in minor units")
        }
        switch object["currency"] {
        case .none:
            guard let defaultCurrency else { throw Rejection.missingParam("\(field).currency") }
            currency = defaultCurrency
        case .string(let value) where value.utf8.count == 3 && value.utf8.allSatisfy({ $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") }):
            currency = value
        default: throw invalid("currency", "must be an ISO 4217 alpha-3 code (three capital letters)")
        }
        guard let text = object["interval"]?.stringValue else { throw Rejection.missingParam("\(field).interval") }
        guard let interval = Self.interval(text) else {
            throw invalid("interval", "must be an ISO 8601 duration of whole days, weeks, months or years from 1 to 999 (P1M, P14D, P1Y)")
        }
        self.interval = interval
        guard let first = object["firstChargeDate"]?.stringValue else { throw Rejection.missingParam("\(field).firstChargeDate") }
        guard let date = CivilDate(iso8601: first), (2000...2999).contains(date.year) else {
            throw invalid("firstChargeDate", "must be a date YYYY-MM-DD (UTC) between the years 2000 and 2999")
        }
        firstChargeDate = date
        switch object["count"] {
        case .none: count = nil
        case .integer(let value) where value >= 1 && value <= 100_000: count = value
        default: throw invalid("count", "must be an integer from 1 to 100000")
        }
        switch object["endDate"] {
        case .none: endDate = nil
        case .string(let text):
            guard let end = CivilDate(iso8601: text), !(end < date) else {
                throw invalid("endDate", "must be a date YYYY-MM-DD (UTC) on or after firstChargeDate")
            }
            endDate = end
        default: throw invalid("endDate", "must be a date YYYY-MM-DD (UTC) on or after firstChargeDate")
        }
        switch object["catchUp"] {
        case .none: catchUp = false
        case .bool(let value): catchUp = value
        default: throw invalid("catchUp", "must be true or false")
        }
    }

    /// `P<n>D`, `P<n>W`, `P<n>M` or `P<n>Y`, n from 1 to 999.
    static func interval(_ text: String) -> Interval? {
        let bytes = Array(text.utf8)
        guard bytes.count >= 3, bytes.count <= 5, bytes.first == UInt8(ascii: "P"),
            let number = Int(String(decoding: bytes[1..<(bytes.count - 1)], as: UTF8.self)), (1...999).contains(number),
            bytes[1] != UInt8(ascii: "0"), bytes[1..<(bytes.count - 1)].allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") })
        else { return nil }
        switch bytes.last {
        case UInt8(ascii: "D"): return .days(number)
        case UInt8(ascii: "W"): return .days(number * 7)
        case UInt8(ascii: "M"): return .months(number)
        case UInt8(ascii: "Y"): return .months(number * 12)
        default: return nil
        }
    }
}

/// What a `schedule` order asks (docs/protocol.md, "Schedules"): its `params`.
public struct ScheduleChange: Sendable, Equatable {
    public enum Action: String, Sendable, CaseIterable {
        /// Attach a schedule, or replace the one attached from the next cycle not yet started.
        case set
        case pause, resume, cancel
    }

    /// The provider's reference of the subscription, as its events name it.
    public var subscription: String
    public var action: Action
    /// For `set`.
    public var schedule: ChargeSchedule?

    /// The operation name every provider that charges on schedule declares.
    public static let operationName = "schedule"

    public init(subscription: String, action: Action, schedule: ChargeSchedule? = nil) {
        self.subscription = subscription
        self.action = action
        self.schedule = schedule
    }

    public init(order: Order) throws(Rejection) {
        for key in order.params.keys where !["subscription", "action", "schedule"].contains(key) {
            throw Rejection(.unknownField, field: "params.\(key)", "params.\(key) is not a field of a schedule order")
        }
        guard let subscription = order.params["subscription"]?.stringValue else { throw Rejection.missingParam("subscription") }
        guard !subscription.isEmpty, subscription.utf8.count <= 256 else { throw Rejection.invalidParam("subscription", "must be 1-256 bytes") }
        guard let name = order.params["action"]?.stringValue else { throw Rejection.missingParam("action") }
        guard let action = Action(rawValue: name) else {
            throw Rejection.invalidParam("action", "must be one of \(Action.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        switch (action, order.params["schedule"]) {
        case (.set, .none): throw Rejection.missingParam("schedule")
        case (.set, .some(let json)):
            schedule = try ChargeSchedule(json: json, field: "schedule", defaultAmount: order.amount, defaultCurrency: order.currency)
        case (_, .some): throw Rejection.invalidParam("schedule", "is only taken by action set")
        case (_, .none): schedule = nil
        }
        self.subscription = subscription
        self.action = action
    }
}

/// How a provider's subscriptions are charged on schedule: each attempt at a cycle is one or
/// more orders the pipeline makes for itself (DESIGN: "a scheduled cycle is an order the
/// pipeline makes for itself"), one per step, each with every guarantee an order has.
public protocol ScheduledCharging: Sendable {
    /// The steps of one attempt, in order (Nets: the charge; PhonePe: the pre-debit notification,
    /// then the debit).
    var steps: [ScheduledStep] { get }
    /// What the schedule keeps, from the first order and its `succeeded` outcome, to charge the
    /// subscription later (Nets: its subscriptionId; PhonePe: the mandate and the user).
    func target(of order: Order, outcome: Outcome) -> JSONValue?
    /// The params of `step`'s order for one attempt. `carried`: what the attempt's earlier steps
    /// left (`carry`).
    func params(step: Int, target: JSONValue, attempt: ScheduledAttempt, carried: JSONValue?) -> [String: JSONValue]
    /// What a step's `succeeded` outcome leaves for the next, and the earliest time the next may
    /// go (epoch ms; PhonePe's `validAfter`).
    func carry(from outcome: Outcome) -> (carried: JSONValue?, notBefore: Int64?)
    /// The param of an upstream order that names a provider reference of the kind the steps
    /// derive (`ScheduledAttempt.isReservedReference`); nil when it names none. The ledger
    /// rejects such an order at intake, so that it cannot hold a reference a schedule needs.
    func reservedReferenceParam(in order: Order) -> String?
}

extension ScheduledCharging {
    public func reservedReferenceParam(in order: Order) -> String? { nil }
}

/// One step of a scheduled attempt.
public struct ScheduledStep: Sendable, Equatable {
    public var operation: Operation
    /// How long before the cycle's due time this step goes (PhonePe's pre-debit notification).
    public var leadMilliseconds: Int64

    public init(_ operation: Operation, leadMilliseconds: Int64 = 0) {
        self.operation = operation
        self.leadMilliseconds = leadMilliseconds
    }
}

/// One attempt at one cycle, and the identities derived from it.
public struct ScheduledAttempt: Sendable, Equatable {
    public var merchant: String
    public var provider: Provider
    public var subscription: String
    public var cycle: Int64
    /// 1 for the first attempt at a cycle; each retry after a decline adds one.
    public var attempt: Int64

    public init(merchant: String, provider: Provider, subscription: String, cycle: Int64, attempt: Int64) {
        self.merchant = merchant
        self.provider = provider
        self.subscription = subscription
        self.cycle = cycle
        self.attempt = attempt
    }

    /// The subscription's part of every id: the same for every copy of the pipeline.
    public var subscriptionDigest: String { Self.subscriptionDigest(merchant: merchant, provider: provider, subscription: subscription) }

    public static func subscriptionDigest(merchant: String, provider: Provider, subscription: String) -> String {
        String(Digest.sha256Hex(Array("\(merchant)\u{0}\(provider.rawValue)\u{0}\(subscription)".utf8)).prefix(20))
    }

    /// The order id of `step` of this attempt: every provider idempotency reference the step's
    /// order sends is derived from it, so it is derived from the subscription and the cycle.
    public func orderId(step: Int) -> String { "\(Self.orderIdPrefix)\(subscriptionDigest)-\(cycle)-\(attempt)-\(step + 1)" }

    /// One reference for the whole attempt, where a provider's steps share one (PhonePe's
    /// `transactionId`): letters and digits only.
    public var attemptReference: String { "\(Self.attemptReferencePrefix)\(subscriptionDigest.prefix(16))C\(cycle)A\(attempt)" }

    public static let attemptReferencePrefix = "SCHED"

    /// Every scheduled order's id starts so, and no upstream order's may: one that took a
    /// schedule's future id would be answered in its place, and stop it.
    public static let orderIdPrefix = "sched-"

    /// The rejection of an upstream order whose id is reserved for the schedules' own orders;
    /// nil for any other. Order keys are compared byte for byte, and every provider reference
    /// a scheduled order sends is derived from its exact id (Nets hashes it into the
    /// `Idempotency-Key`) or from the subscription (`attemptReference`), never from an upper-cased
    /// id, so only this exact prefix can collide.
    public static func reservation(ofOrderId orderId: String) -> Rejection? {
        guard orderId.hasPrefix(orderIdPrefix) else { return nil }
        return Rejection(
            .invalidOrderId, field: "orderId", "orderId must not start with \(orderIdPrefix): that prefix is reserved for the orders schedules make")
    }

    /// Whether an upstream order's provider reference (a PhonePe `transactionId`) could be one
    /// an attempt derives: compared without case, since the provider's own comparison is not
    /// documented.
    public static func isReservedReference(_ reference: String) -> Bool {
        reference.utf8.count >= attemptReferencePrefix.utf8.count
            && reference.prefix(attemptReferencePrefix.count).uppercased() == attemptReferencePrefix
    }

    /// The id of an order the pipeline makes after the order `key` (`ProviderConnector.followingOrder`):
    /// under the reserved prefix, so that no upstream order can take it, and derived from the
    /// key, so that every ledger derives the same one. `purpose`: a short word of letters.
    public static func followingOrderId(of key: OrderKey, purpose: String) -> String {
        let digest = Digest.sha256Hex(Array("\(key.merchant)\u{0}\(key.orderId)".utf8)).prefix(20)
        return "\(orderIdPrefix)\(digest)-\(purpose)"
    }

    /// The parts of a scheduled order's id (`orderId(step:)`); nil for any other id.
    public static func step(ofOrderId orderId: String) -> (digest: String, cycle: Int64, attempt: Int64, step: Int)? {
        guard orderId.hasPrefix(orderIdPrefix) else { return nil }
        let parts = orderId.dropFirst(orderIdPrefix.count).split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0].utf8.count == 20, let cycle = Int64(parts[1]), let attempt = Int64(parts[2]), let step = Int(parts[3]),
            step >= 1
        else { return nil }
        return (String(parts[0]), cycle, attempt, step - 1)
    }
}

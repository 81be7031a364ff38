import PaypipeCore
import PhonePe
import StageRuntime
import StageWire
import TestSupport
import Testing

@testable import LedgerStage

/// Schedules that cannot run away (docs/protocol.md, "Schedules"): a start in the past needs
/// `catchUp`; however many cycles are due at once, at most `schedules.maxCatchUpCycles` are
/// charged back to back, the rest reported and the schedule sent to review; a step that cannot
/// be made goes to review too; the schedules' ids are theirs alone.
@Suite("Schedules within limits in the ledger's core")
struct ScheduleLimitsTests {
    static let hour: Int64 = 3_600_000

    static func date(_ text: String) -> Int64 { ScheduleCoreTests.date(text) }

    static func dispatched(_ effects: [LedgerCore.Effect]) -> [Order] {
        effects.compactMap { effect -> Order? in
            guard case .dispatch(let bytes) = effect else { return nil }
            return readDispatch(bytes)?.order
        }
    }

    static func messages(_ effects: [LedgerCore.Effect]) -> [JSONValue] { ScheduleCoreTests.messages(effects) }

    static func send(_ core: inout LedgerCore, _ frame: String, now: Int64) throws -> [LedgerCore.Effect] {
        try core.intake([Array(frame.utf8)], now: now)
    }

    static func scheduleOrder(_ id: String, provider: String = "nets", _ params: String) -> String {
        #"{"v":1,"orderId":"\#(id)","provider":"\#(provider)","operation":"schedule","params":\#(params)}"#
    }

    static func record(_ store: LedgerStore, _ provider: Provider, _ reference: String) throws -> ScheduleRecord {
        try #require(try store.transaction { try store.schedule(merchant: "default", provider: provider, reference: reference) })
    }

    /// What the catch-up limit counts: the cycles due by a time, month ends and bounds included.
    @Test func theCyclesDueByATimeAreCountedAsTheyFallDue() throws {
        var monthly = try ChargeSchedule(
            json: ["interval": "P1M", "firstChargeDate": "2027-01-31"], field: "schedule", defaultAmount: 100, defaultCurrency: "SEK")
        let expected: [(String, Int64)] = [
            ("2027-01-30", 0), ("2027-01-31", 1), ("2027-02-27", 1), ("2027-02-28", 2), ("2027-03-30", 2), ("2027-03-31", 3), ("2028-01-31", 13),
        ]
        for (day, cycles) in expected { #expect(monthly.lastCycle(dueBy: Self.date(day) + Self.hour) == cycles, "\(day)") }
        monthly.count = 2
        #expect(monthly.lastCycle(dueBy: Self.date("2028-01-31")) == 2)
        monthly.count = nil
        monthly.endDate = CivilDate(iso8601: "2027-04-15")
        #expect(monthly.lastCycle(dueBy: Self.date("2028-01-31")) == 3)
        let fortnightly = try ChargeSchedule(
            json: ["interval": "P2W", "firstChargeDate": "2027-01-01"], field: "schedule", defaultAmount: 100, defaultCurrency: "SEK")
        #expect(fortnightly.lastCycle(dueBy: Self.date("2027-01-14")) == 1 && fortnightly.lastCycle(dueBy: Self.date("2027-01-15")) == 2)
    }

    @Test func aScheduleStartingInThePastIsRejectedUnlessItAsksForCatchUp() async throws {
        var core = LedgerCore(store: try temporaryStore(), registry: await testRegistry(), eventMerchants: ["default"])
        // The schedules' clock (tests move it), not the ledger's, decides what is past.
        core.scheduleClockOffset = Self.date("2027-03-15") + Self.hour - 10
        let late = try Self.send(
            &core, ScheduleCoreTests.createOrder("late-1", schedule: #"{"interval":"P1D","firstChargeDate":"2027-02-13"}"#), now: 10)
        #expect(Self.dispatched(late).isEmpty)
        let rejected = try #require(Self.messages(late).first)
        #expect(rejected["status"] == "rejected" && rejected["error"]?["code"] == "INVALID_PARAM")
        let message = rejected["error"]?["message"]?.stringValue ?? ""
        #expect(message.hasPrefix("params.schedule.firstChargeDate must not make a cycle fall due before 2027-03-14"), "\(message)")
        #expect(message.contains("params.schedule.catchUp"))
        // Yesterday (UTC) is still a start: it is today somewhere.
        #expect(
            Self.dispatched(
                try Self.send(
                    &core, ScheduleCoreTests.createOrder("yesterday-1", schedule: #"{"interval":"P1D","firstChargeDate":"2027-03-14"}"#), now: 11)
            ).count == 1)
        #expect(
            Self.dispatched(
                try Self.send(
                    &core,
                    ScheduleCoreTests.createOrder("catch-up-1", schedule: #"{"interval":"P1D","firstChargeDate":"2027-02-13","catchUp":true}"#),
                    now: 12)
            ).count == 1)

        // A `set`: the first cycle it would charge must not be past either.
        try ScheduleCoreTests.opened(&core, schedule: #"{"interval":"P1M","firstChargeDate":"2027-03-20"}"#, now: 20)
        func set(_ id: String, _ schedule: String) throws -> JSONValue {
            try #require(
                Self.messages(
                    try Self.send(&core, Self.scheduleOrder(id, #"{"subscription":"sub-1","action":"set","schedule":\#(schedule)}"#), now: 30)
                ).first)
        }
        let past = try set("set-1", #"{"amount":9900,"currency":"SEK","interval":"P1M","firstChargeDate":"2027-01-01"}"#)
        #expect(
            past["status"] == "rejected"
                && past["error"]?["message"]?.stringValue?.hasPrefix("params.schedule.firstChargeDate must not make a cycle fall due") == true)
        #expect(try set("set-2", #"{"amount":9900,"currency":"SEK","interval":"P1W","firstChargeDate":"2027-03-16"}"#)["status"] == "succeeded")
        #expect(
            try set("set-3", #"{"amount":9900,"currency":"SEK","interval":"P1W","firstChargeDate":"2027-01-01","catchUp":true}"#)["status"]
                == "succeeded")
    }

    @Test func catchUpChargesAtMostTheLimitReportsTheRestAndSendsTheScheduleToReview() async throws {
        let store = try temporaryStore()
        var core = LedgerCore(store: store, registry: await testRegistry(), eventMerchants: ["default"])
        core.scheduleClockOffset = Self.date("2027-03-31") + Self.hour - 10
        try ScheduleCoreTests.opened(&core, schedule: #"{"interval":"P1D","firstChargeDate":"2027-03-01","catchUp":true}"#, now: 10)

        // 31 daily cycles are due: the 3 most recent (the default limit) are charged, one after another.
        let first = try ScheduleCoreTests.tick(&core, at: Self.date("2027-03-31") + Self.hour, now: 20)
        let events = Self.messages(first)
        let skipped = try #require(events.first { $0["type"] == "renewal.skipped" })
        #expect(skipped["cycle"] == 1 && skipped["lastCycle"] == 28 && skipped["amount"] == 9900)
        let review = try #require(events.first { $0["type"] == "schedule.review" })
        #expect(review["reason"]?.stringValue?.hasPrefix("cycles 1 to 28 were not charged") == true)
        var charged: [String] = []
        var effects = first
        for round in 0..<3 {
            let order = try #require(Self.dispatched(effects).first)
            charged.append(order.orderId)
            ScheduleCoreTests.settle(&core, order, .succeeded, now: Int64(30 + round * 10))
            effects = try ScheduleCoreTests.tick(&core, at: Self.date("2027-04-02") + Self.hour, now: Int64(31 + round * 10))
        }
        #expect(Self.dispatched(effects).isEmpty, "held once the cycles within the limit are charged")
        #expect(charged.map { String($0.split(separator: "-")[2]) } == ["29", "30", "31"], "\(charged)")

        // Then it holds, in review, listed for operators with its reason, until upstream decides.
        let held = try Self.record(store, .nets, "sub-1")
        #expect(held.json["state"] == "review" && held.dueAt == nil && held.cycle == 32)
        let listed = try store.schedules(merchant: nil, provider: nil, state: "review", limit: 10)
        #expect(listed.count == 1 && listed.first?.json["review"]?.stringValue?.contains("schedules.maxCatchUpCycles (3)") == true)
        let resumed = try #require(
            Self.messages(try Self.send(&core, Self.scheduleOrder("resume-1", #"{"subscription":"sub-1","action":"resume"}"#), now: 80)).first)
        #expect(resumed["result"]?["schedule"]?["state"] == "active" && resumed["result"]?["schedule"]?["review"] == .null)
        // Resumed as after a pause: from the first cycle due within the last day (2 April).
        let next = try #require(Self.dispatched(try ScheduleCoreTests.tick(&core, at: Self.date("2027-04-02") + Self.hour, now: 90)).first)
        #expect(next.orderId.hasSuffix("-33-1-1"))
    }

    @Test func aStepWhoseReferenceIsAnotherOrdersGoesToReviewNotNowhere() async throws {
        let store = try temporaryStore()
        var core = LedgerCore(store: store, registry: await testRegistry(), eventMerchants: ["default"])
        core.scheduleClockOffset = Self.date("2027-03-01") - 10
        let opening = try #require(
            Self.dispatched(
                try Self.send(
                    &core,
                    #"{"v":1,"orderId":"pp-1","provider":"phonepe","operation":"authInit","amount":39900,"currency":"INR","params":{"merchantUserId":"U-1","subscriptionId":"SUB-1","schedule":{"interval":"P1M","firstChargeDate":"2027-03-10"}}}"#,
                    now: 10)
            ).first)
        #expect(
            core.handle(.settle(opening.key, event: "phonepe|auth", outcome: Outcome(order: opening, status: .succeeded)), now: 11).0
                == .settled(applied: true, duplicate: false))
        // The pre-debit notification a day before, then the debit on the date.
        let notify = try #require(Self.dispatched(try ScheduleCoreTests.tick(&core, at: Self.date("2027-03-09") + Self.hour, now: 20)).first)
        #expect(notify.operation == .debitNotify)
        #expect(
            core.handle(
                .settle(notify.key, event: nil, outcome: Outcome(order: notify, status: .succeeded, result: ["notificationId": "N-1"])), now: 21
            ).0 == .settled(applied: true, duplicate: false))
        // An order taken in before the schedules' references were reserved holds the debit's.
        let attempt = ScheduledAttempt(merchant: "default", provider: .phonepe, subscription: "SUB-1", cycle: 1, attempt: 1)
        let holder = Order(
            orderId: "upstream-debit", merchant: "default", operation: .debitExecute, amount: 100, currency: "INR",
            params: ["subscriptionId": "SUB-1", "merchantUserId": "U-1", "transactionId": .string(attempt.attemptReference), "notificationId": "X"])
        try store.transaction { _ = try store.admit(holder, json: holder.serialized, references: [attempt.attemptReference], now: 22) }

        let blocked = try ScheduleCoreTests.tick(&core, at: Self.date("2027-03-10") + Self.hour, now: 30)
        #expect(Self.dispatched(blocked).isEmpty)
        let review = try #require(Self.messages(blocked).first { $0["type"] == "schedule.review" })
        #expect(review["reason"]?.stringValue?.hasPrefix("REFERENCE_IN_USE") == true)
        let held = try Self.record(store, .phonepe, "SUB-1")
        #expect(held.json["state"] == "review" && held.orderId == nil && held.dueAt == nil)
        #expect(held.json["review"]?.stringValue?.hasPrefix("REFERENCE_IN_USE") == true)

        // Resumed: a new attempt, whose references are its own.
        let resumed = try #require(
            Self.messages(
                try Self.send(&core, Self.scheduleOrder("resume-1", provider: "phonepe", #"{"subscription":"SUB-1","action":"resume"}"#), now: 40)
            ).first)
        #expect(resumed["status"] == "succeeded" && resumed["result"]?["schedule"]?["state"] == "active")
        let again = try #require(Self.dispatched(try ScheduleCoreTests.tick(&core, at: Self.date("2027-03-10") + Self.hour, now: 50)).first)
        #expect(again.operation == .debitNotify && again.orderId == attempt.retried.orderId(step: 0))
        #expect(again.params["transactionId"]?.stringValue == attempt.retried.attemptReference)
    }

    /// The reconciliation queries' ids are the ledger's too: an upstream order under one would
    /// be taken for the ledger's query and its answer for the provider's.
    @Test func theReconciliationQueriesIdsAreRefusedFromUpstream() async throws {
        let store = try temporaryStore()
        var core = LedgerCore(store: store, registry: await testRegistry(), eventMerchants: ["default"])
        let frame =
            #"{"v":1,"orderId":"rcn-0123456789abcdef0123-2-1","provider":"trustpayments","operation":"enginePaymentQuery","params":{"orderReference":"tp-1","parentTransactionReference":"57-9-100","subscriptionNumber":2}}"#
        let effects = try Self.send(&core, frame, now: 10)
        #expect(Self.dispatched(effects).isEmpty)
        let refused = try #require(Self.messages(effects).first)
        #expect(refused["status"] == "rejected" && refused["error"]?["code"] == "INVALID_ORDER_ID")
        #expect(refused["error"]?["message"]?.stringValue?.hasPrefix("orderId must not start with rcn-") == true)
        #expect(try store.lookup(OrderKey(merchant: "default", orderId: "rcn-0123456789abcdef0123-2-1")) == nil)
    }

    @Test func theSchedulesIdsAreRefusedFromUpstream() async throws {
        let store = try temporaryStore()
        var core = LedgerCore(store: store, registry: await testRegistry(), eventMerchants: ["default"])
        // An id of the schedules': refused, and not filed under the key the schedule may need.
        for frame in [
            ScheduleCoreTests.createOrder("sched-0123456789abcdef0123-1-1-1", schedule: #"{"interval":"P1M","firstChargeDate":"2027-01-31"}"#),
            #"{"v":1,"orderId":"sched-x","provider":"nets","operation":"createSubscription","params":{}}"#,
        ] {
            let effects = try Self.send(&core, frame, now: 10)
            #expect(Self.dispatched(effects).isEmpty)
            let refused = try #require(Self.messages(effects).first)
            #expect(refused["status"] == "rejected" && refused["error"]?["code"] == "INVALID_ORDER_ID")
            #expect(refused["error"]?["message"]?.stringValue?.hasPrefix("orderId must not start with sched-") == true)
            let orderId = try #require(refused["orderId"]?.stringValue)
            #expect(try store.lookup(OrderKey(merchant: "default", orderId: orderId)) == nil)
        }
        // A PhonePe reference of the schedules' kind, in any case.
        let debit = try Self.send(
            &core,
            #"{"v":1,"orderId":"debit-1","provider":"phonepe","operation":"debitExecute","amount":100,"currency":"INR","params":{"subscriptionId":"S","merchantUserId":"U","transactionId":"schedABC","notificationId":"N"}}"#,
            now: 11)
        #expect(Self.dispatched(debit).isEmpty)
        let rejected = try #require(Self.messages(debit).first)
        #expect(rejected["error"]?["code"] == "INVALID_PARAM")
        #expect(rejected["error"]?["message"]?.stringValue?.hasPrefix("params.transactionId must not start with SCHED") == true)

        // The schedules' own orders, made inside the ledger, still go.
        try ScheduleCoreTests.opened(&core, schedule: #"{"interval":"P1M","firstChargeDate":"2027-01-31"}"#, now: 20)
        let charge = try #require(Self.dispatched(try ScheduleCoreTests.tick(&core, at: Self.date("2027-01-31"), now: 30)).first)
        #expect(charge.orderId.hasPrefix(ScheduledAttempt.orderIdPrefix))
    }
}

extension ScheduledAttempt {
    /// The next attempt at the same cycle.
    fileprivate var retried: ScheduledAttempt {
        ScheduledAttempt(merchant: merchant, provider: provider, subscription: subscription, cycle: cycle, attempt: attempt + 1)
    }
}

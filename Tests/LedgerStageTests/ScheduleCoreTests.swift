import Connectors
import NetsEasy
import PaypipeCore
import StageRuntime
import StageWire
import TestSupport
import Testing

@testable import LedgerStage

/// Charging on schedule in the ledger's core (docs/protocol.md, "Schedules"), on the suite's
/// store: a due cycle becomes one order, once, whatever ticks or restarts; declines are retried
/// per the policy and then given up; upstream can pause, resume, change and cancel.
@Suite("Schedules in the ledger's core")
struct ScheduleCoreTests {
    static let day: Int64 = 86_400_000

    static func createOrder(_ id: String = "nets-sub-1", schedule: String) -> String {
        #"{"v":1,"orderId":"\#(id)","provider":"nets","operation":"createSubscription","amount":9900,"currency":"SEK","params":{"interval":0,"reference":"r1","schedule":\#(schedule)}}"#
    }

    static func dispatched(_ effects: [LedgerCore.Effect]) -> [Order] {
        effects.compactMap { effect -> Order? in
            guard case .dispatch(let bytes) = effect else { return nil }
            return try? DispatchFrame.decode(bytes, catalog: OrderCatalog(NetsConnector.operations)).order
        }
    }

    static func messages(_ effects: [LedgerCore.Effect]) -> [JSONValue] {
        effects.compactMap { if case .emit(let bytes) = $0 { try? JSONValue.parse(bytes) } else { nil } }
    }

    /// The subscription opened by its first order's success (as Nets' checkout webhook settles it).
    static func opened(_ core: inout LedgerCore, schedule: String, now: Int64) throws {
        let effects = try core.intake([Array(createOrder(schedule: schedule).utf8)], now: now)
        let order = try #require(dispatched(effects).first)
        let outcome = Outcome(order: order, status: .succeeded, result: ["paymentId": "pay-1", "subscriptionId": "sub-1"])
        let (reply, following) = core.handle(.settle(order.key, event: "nets|completed", outcome: outcome), now: now + 1)
        #expect(reply == .settled(applied: true, duplicate: false))
        // The charge of what the checkout reserved (`nets.firstPayment: charge`), made at once.
        for charge in dispatched(following) { settle(&core, charge, .succeeded, now: now + 1) }
    }

    /// Ticks the ledger with the schedules' clock at `at` (epoch ms).
    static func tick(_ core: inout LedgerCore, at: Int64, now: Int64) throws -> [LedgerCore.Effect] {
        core.scheduleClockOffset = at - now
        return try core.redeliver(now: now)
    }

    static func settle(_ core: inout LedgerCore, _ order: Order, _ status: Outcome.Status, now: Int64) {
        let outcome = Outcome(
            order: order, status: status, result: status == .succeeded ? ["paymentId": .string("p-\(order.orderId)"), "chargeId": "c"] : nil,
            error: status == .failed ? .init(code: "HTTP_402", message: "declined") : nil)
        #expect(core.handle(.settle(order.key, event: nil, outcome: outcome), now: now).0 == .settled(applied: true, duplicate: false))
    }

    static func date(_ text: String) -> Int64 { CivilDate(iso8601: text)!.daysSinceEpoch * day }

    /// The scheduler's lag: how long past its time the earliest waiting step is, read from the
    /// store on the schedules' clock; nothing once its order is made.
    @Test func theScheduleLagIsHowLatePastItsTimeTheEarliestWaitingStepIs() async throws {
        var core = LedgerCore(store: try temporaryStore(), registry: await testRegistry(), eventMerchants: ["default"])
        #expect(try core.store.earliestDueStep() == nil)
        try Self.opened(&core, schedule: #"{"interval":"P1M","firstChargeDate":"2027-01-31","count":3}"#, now: 10)
        let due = try #require(try core.store.earliestDueStep())
        #expect(due <= Self.date("2027-01-31") && due > Self.date("2027-01-30"))

        // Ninety seconds past its time on the schedules' clock, and not yet made into an order.
        core.scheduleClockOffset = due + 90_000 - steadyMilliseconds()
        let lagging = LedgerService.Core(core: core)
        let lag = try lagging.scheduleLag()
        #expect(lag >= 90_000 && lag < 150_000, "\(lag)")

        // Its order made, the step waits no more.
        #expect(Self.dispatched(try lagging.redeliver()).count == 1)
        #expect(try lagging.scheduleLag() == 0)
    }

    @Test func eachCycleIsOneOrderOnItsDateDeclinesAreRetriedAndTheLastCycleEndsIt() async throws {
        var schedules = PaypipeConfig.Schedules()
        schedules.retryAfterDays = [1, 3]
        let store = try temporaryStore()
        var core = LedgerCore(store: store, registry: await testRegistry(), eventMerchants: ["default"], schedules: schedules)
        try Self.opened(&core, schedule: #"{"interval":"P1M","firstChargeDate":"2027-01-31","count":3}"#, now: 10)

        // Not due yet: nothing.
        #expect(Self.dispatched(try Self.tick(&core, at: Self.date("2027-01-30"), now: 20)).isEmpty)
        // Due: one order, whose id and Idempotency-Key derive from the subscription and cycle.
        let first = try #require(Self.dispatched(try Self.tick(&core, at: Self.date("2027-01-31") + 5, now: 30)).first)
        #expect(first.operation == .chargeSubscription && first.amount == 9900 && first.currency == "SEK")
        #expect(first.params["subscriptionId"] == "sub-1")
        #expect(first.orderId == ScheduledAttempt(merchant: "default", provider: .nets, subscription: "sub-1", cycle: 1, attempt: 1).orderId(step: 0))
        // Ticking again, or a ledger restarted over the store, makes no second order.
        #expect(Self.dispatched(try Self.tick(&core, at: Self.date("2027-02-02"), now: 40)).isEmpty)
        var restarted = LedgerCore(store: store, registry: await testRegistry(), eventMerchants: ["default"], schedules: schedules)
        #expect(Self.dispatched(try Self.tick(&restarted, at: Self.date("2027-02-02"), now: 41)).isEmpty)

        // Declined: retried a day later, then three days after that, then given up.
        Self.settle(&core, first, .failed, now: 50)
        #expect(Self.dispatched(try Self.tick(&core, at: Self.date("2027-02-03") - 1, now: 60)).isEmpty)
        let retry = try #require(Self.dispatched(try Self.tick(&core, at: Self.date("2027-02-03") + 20, now: 70)).first)
        #expect(retry.orderId.hasSuffix("-1-2-1"))
        Self.settle(&core, retry, .failed, now: 80)
        #expect(Self.dispatched(try Self.tick(&core, at: Self.date("2027-02-06"), now: 85)).isEmpty)
        let last = try #require(Self.dispatched(try Self.tick(&core, at: Self.date("2027-02-06") + 40, now: 90)).first)
        #expect(last.orderId.hasSuffix("-1-3-1"))
        let givenUp = Self.messages(try core.handle(.settle(last.key, event: nil, outcome: Outcome(order: last, status: .failed)), now: 100).1)
        #expect(givenUp.contains { $0["type"] == "renewal.abandoned" && $0["subscription"]?["state"] == "past_due" && $0["cycle"] == 1 })

        // Cycle 2 falls due on the last day of February (31 January + 1 month), is paid and
        // brings the subscription back.
        #expect(Self.dispatched(try Self.tick(&core, at: Self.date("2027-02-27"), now: 110)).isEmpty)
        let second = try #require(Self.dispatched(try Self.tick(&core, at: Self.date("2027-02-28"), now: 120)).first)
        #expect(second.orderId.hasSuffix("-2-1-1"))
        Self.settle(&core, second, .succeeded, now: 130)
        // Cycle 3 on 31 March, the last: once paid, the subscription ends.
        #expect(Self.dispatched(try Self.tick(&core, at: Self.date("2027-03-30"), now: 140)).isEmpty)
        let third = try #require(Self.dispatched(try Self.tick(&core, at: Self.date("2027-03-31"), now: 150)).first)
        let ended = Self.messages(try core.handle(.settle(third.key, event: nil, outcome: Outcome(order: third, status: .succeeded)), now: 160).1)
        #expect(ended.contains { $0["type"] == "subscription.ended" })
        #expect(Self.dispatched(try Self.tick(&core, at: Self.date("2028-01-01"), now: 170)).isEmpty)

        let record = try #require(try store.subscription(merchant: "default", provider: .nets, reference: "sub-1"))
        #expect(record["schedule"]?["state"] == "completed" && record["state"] == "ended")
        #expect(
            record["events"]?.arrayValue?.compactMap { $0["type"]?.stringValue } == [
                "renewal.retrying", "renewal.retrying", "renewal.abandoned", "subscription.ended",
            ])
        #expect(core.counters.scheduledOrders + restarted.counters.scheduledOrders == 5)
    }

    @Test func upstreamPausesResumesChangesAndCancelsASchedule() async throws {
        let store = try temporaryStore()
        var core = LedgerCore(store: store, registry: await testRegistry(), eventMerchants: ["default"])
        try Self.opened(&core, schedule: #"{"interval":"P1W","firstChargeDate":"2027-01-01"}"#, now: 10)
        func change(_ id: String, _ params: String) throws -> JSONValue {
            let frame = #"{"v":1,"orderId":"\#(id)","provider":"nets","operation":"schedule","params":\#(params)}"#
            return try #require(Self.messages(try core.intake([Array(frame.utf8)], now: 20)).first)
        }
        let paused = try change("pause-1", #"{"subscription":"sub-1","action":"pause"}"#)
        #expect(paused["status"] == "succeeded" && paused["result"]?["schedule"]?["state"] == "paused")
        // The same order again gets the same outcome, and changes nothing more.
        #expect(try change("pause-1", #"{"subscription":"sub-1","action":"pause"}"#) == paused)
        #expect(Self.dispatched(try Self.tick(&core, at: Self.date("2027-01-20"), now: 30)).isEmpty)
        // Resumed on the 20th: the weeks that passed paused are not charged; the next is.
        _ = try change("resume-1", #"{"subscription":"sub-1","action":"resume"}"#)
        let next = try #require(Self.dispatched(try Self.tick(&core, at: Self.date("2027-01-22"), now: 40)).first)
        #expect(next.orderId.hasSuffix("-4-1-1"), "cycle 4 falls on 22 January")
        Self.settle(&core, next, .succeeded, now: 50)
        // A new amount from the next cycle on.
        let set = try change(
            "set-1",
            #"{"subscription":"sub-1","action":"set","schedule":{"amount":12900,"currency":"SEK","interval":"P1W","firstChargeDate":"2027-01-01"}}"#)
        #expect(set["result"]?["schedule"]?["schedule"]?["amount"] == 12900)
        let fifth = try #require(Self.dispatched(try Self.tick(&core, at: Self.date("2027-01-29"), now: 60)).first)
        #expect(fifth.amount == 12900 && fifth.orderId.hasSuffix("-5-1-1"))
        Self.settle(&core, fifth, .succeeded, now: 70)
        // Paused after a paid cycle and resumed before the next is due: that next one is not skipped.
        _ = try change("pause-2", #"{"subscription":"sub-1","action":"pause"}"#)
        _ = try change("resume-3", #"{"subscription":"sub-1","action":"resume"}"#)
        #expect(Self.dispatched(try Self.tick(&core, at: Self.date("2027-02-04"), now: 72)).isEmpty)
        let sixth = try #require(Self.dispatched(try Self.tick(&core, at: Self.date("2027-02-05"), now: 74)).first)
        #expect(sixth.orderId.hasSuffix("-6-1-1"))
        Self.settle(&core, sixth, .succeeded, now: 76)
        _ = try change("cancel-1", #"{"subscription":"sub-1","action":"cancel"}"#)
        #expect(Self.dispatched(try Self.tick(&core, at: Self.date("2027-03-01"), now: 80)).isEmpty)
        // Refused with the rule: a cancelled schedule does not resume; an unknown subscription has none.
        let refused = try change("resume-2", #"{"subscription":"sub-1","action":"resume"}"#)
        #expect(refused["status"] == "rejected" && refused["error"]?["code"] == "SCHEDULE_STATE")
        let unknown = try change(
            "set-2",
            #"{"subscription":"sub-9","action":"set","schedule":{"amount":1,"currency":"SEK","interval":"P1M","firstChargeDate":"2027-01-01"}}"#)
        #expect(
            unknown["error"]?["code"] == "SUBSCRIPTION_NOT_FOUND"
                && unknown["error"]?["message"]?.stringValue?.hasPrefix("no nets subscription sub-9") == true)
        let bad = try change(
            "set-3",
            #"{"subscription":"sub-1","action":"set","schedule":{"amount":100,"currency":"SEK","interval":"P0M","firstChargeDate":"2027-01-01"}}"#)
        #expect(bad["error"]?["code"] == "INVALID_PARAM" && bad["error"]?["message"]?.stringValue?.hasPrefix("params.schedule.interval") == true)
    }

    /// A declined attempt corrected by the provider's later word (the money was taken after all)
    /// pays its cycle: the retry is not made.
    @Test func aCorrectedDeclinePaysTheCycleAndItsRetryIsNotMade() async throws {
        var core = LedgerCore(store: try temporaryStore(), registry: await testRegistry(), eventMerchants: ["default"])
        try Self.opened(&core, schedule: #"{"interval":"P1M","firstChargeDate":"2027-01-10","count":2}"#, now: 10)
        let first = try #require(Self.dispatched(try Self.tick(&core, at: Self.date("2027-01-10"), now: 20)).first)
        Self.settle(&core, first, .failed, now: 30)
        let corrected = core.handle(
            .settle(first.key, event: "nets|late", outcome: Outcome(order: first, status: .succeeded, result: ["paymentId": "p", "chargeId": "c"])),
            now: 40)
        #expect(corrected.0 == .settled(applied: true, duplicate: false, corrected: true))
        #expect(Self.dispatched(try Self.tick(&core, at: Self.date("2027-01-12"), now: 50)).isEmpty, "no retry")
        let second = try #require(Self.dispatched(try Self.tick(&core, at: Self.date("2027-02-10"), now: 60)).first)
        #expect(second.orderId.hasSuffix("-2-1-1"))
    }

    /// Cycles that fell due while no ledger ran (as many as `schedules.maxCatchUpCycles`) are
    /// charged late, once each, oldest first, each once the one before it has ended.
    @Test func cyclesMissedWhileDownAreChargedLateOnceEach() async throws {
        var core = LedgerCore(store: try temporaryStore(), registry: await testRegistry(), eventMerchants: ["default"])
        try Self.opened(&core, schedule: #"{"interval":"P1M","firstChargeDate":"2027-01-15"}"#, now: 10)
        // The first tick after two months and a half: cycle 1 only.
        var charged: [String] = []
        for round in 0..<3 {
            let now = Int64(100 + round * 10)
            let due = Self.dispatched(try Self.tick(&core, at: Self.date("2027-03-30"), now: now))
            #expect(due.count == 1)
            #expect(Self.dispatched(try Self.tick(&core, at: Self.date("2027-03-30"), now: now + 1)).isEmpty, "one at a time")
            for order in due {
                charged.append(order.orderId)
                Self.settle(&core, order, .succeeded, now: now + 2)
            }
        }
        #expect(charged.map { String($0.split(separator: "-")[2]) } == ["1", "2", "3"])
        #expect(Self.dispatched(try Self.tick(&core, at: Self.date("2027-03-30"), now: 200)).isEmpty, "cycle 4 falls due on 15 April")
    }

    @Test func aFirstOrderWithABrokenScheduleIsRejectedBeforeAnythingIsSent() async throws {
        var core = LedgerCore(store: try temporaryStore(), registry: await testRegistry())
        let effects = try core.intake([Array(Self.createOrder(schedule: #"{"interval":"monthly","firstChargeDate":"2027-01-01"}"#).utf8)], now: 1)
        #expect(Self.dispatched(effects).isEmpty)
        let outcome = try #require(Self.messages(effects).first)
        #expect(outcome["status"] == "rejected" && outcome["error"]?["message"]?.stringValue?.hasPrefix("params.schedule.interval") == true)
    }
}

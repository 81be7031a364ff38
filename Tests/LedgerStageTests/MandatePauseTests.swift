import PaypipeCore
import PhonePe
import StageRuntime
import StageWire
import TestSupport
import Testing

@testable import LedgerStage

/// A PhonePe mandate the customer pauses (docs/protocol.md, "Subscription events" and
/// "Schedules"): the subscription stays `paused` whatever charge results arrive meanwhile, its
/// schedule notifies and debits nothing until PhonePe reports it resumed, and the cycles that
/// fell due meanwhile are reported skipped, not charged.
@Suite("A paused mandate in the ledger's core")
struct MandatePauseTests {
    static let hour: Int64 = 3_600_000

    static func date(_ text: String) -> Int64 { ScheduleCoreTests.date(text) }

    static func event(_ kind: SubscriptionEvent.Kind, _ key: String) -> SubscriptionEvent {
        SubscriptionEvent(
            merchant: "default", provider: .phonepe, subscription: "SUB-1", dedupeKey: key, kind: kind,
            amount: kind.isChargeResult ? 39900 : nil, currency: kind.isChargeResult ? "INR" : nil)
    }

    /// The events a report makes upstream, with the state each leaves the subscription in.
    static func report(_ core: inout LedgerCore, _ events: [SubscriptionEvent], now: Int64) -> [JSONValue] {
        ScheduleCoreTests.messages(core.handle(.subscriptionEvents(events), now: now).1).filter { $0["kind"] == "event" }
    }

    /// A PhonePe mandate authorised with a monthly schedule from 10 March 2027.
    static func authorised(_ core: inout LedgerCore) throws {
        core.scheduleClockOffset = date("2027-03-01") - 10
        let frame =
            #"{"v":1,"orderId":"pp-1","provider":"phonepe","operation":"authInit","amount":39900,"currency":"INR","params":{"merchantUserId":"U-1","subscriptionId":"SUB-1","schedule":{"interval":"P1M","firstChargeDate":"2027-03-10"}}}"#
        let opening = try #require(ScheduleLimitsTests.dispatched(try core.intake([Array(frame.utf8)], now: 10)).first)
        #expect(
            core.handle(.settle(opening.key, event: "phonepe|auth", outcome: Outcome(order: opening, status: .succeeded)), now: 11).0
                == .settled(applied: true, duplicate: false))
    }

    @Test func aPausedMandateIsLeftOnlyByThePhonePesWordNotByALateChargeResult() async throws {
        let store = try temporaryStore()
        var core = LedgerCore(store: store, registry: await testRegistry(), eventMerchants: ["default"])
        try Self.authorised(&core)
        #expect(Self.report(&core, [Self.event(.mandatePaused, "SUBSCRIPTION|PAUSED|1")], now: 20).first?["subscription"]?["state"] == "paused")
        // Debits attempted before the pause, reported after it: each is an event, the state stays.
        for (index, kind) in [SubscriptionEvent.Kind.renewalFailed, .renewalAbandoned, .renewalSucceeded].enumerated() {
            let reported = Self.report(&core, [Self.event(kind, "DEBIT|T\(index)")], now: 30 + Int64(index))
            #expect(reported.first?["type"] == .string(kind.rawValue) && reported.first?["subscription"]?["state"] == "paused", "\(kind)")
        }
        #expect(try store.subscriptionState(merchant: "default", provider: .phonepe, reference: "SUB-1") == .paused)
        // PhonePe's unpause resumes it; a decline then makes it past due as before.
        #expect(Self.report(&core, [Self.event(.mandateResumed, "SUBSCRIPTION|ACTIVE|2")], now: 40).first?["subscription"]?["state"] == "active")
        #expect(Self.report(&core, [Self.event(.renewalFailed, "DEBIT|T9")], now: 50).first?["subscription"]?["state"] == "past_due")
        // Paused again, then revoked: final, and no unpause brings it back.
        _ = Self.report(&core, [Self.event(.mandatePaused, "SUBSCRIPTION|PAUSED|3")], now: 60)
        #expect(Self.report(&core, [Self.event(.mandateRevoked, "SUBSCRIPTION|REVOKED|")], now: 70).first?["subscription"]?["state"] == "revoked")
        #expect(Self.report(&core, [Self.event(.mandateResumed, "SUBSCRIPTION|ACTIVE|4")], now: 80).first?["subscription"]?["state"] == "revoked")
    }

    /// The rule itself, state by state: a charge result never moves a paused or final state, and
    /// only an extension moves an ended series.
    @Test func theStatePrecedenceRule() {
        for state in SubscriptionState.allCases {
            for kind in SubscriptionEvent.Kind.allCases {
                let after = state.after(kind)
                guard let next = kind.state else {
                    #expect(after == state)
                    continue
                }
                if state == .ended && kind == .subscriptionExtended {
                    #expect(after == .active, "a series made longer goes on")
                } else if state.isFinal {
                    #expect(after == (next.isFinal ? next : state), "\(state) after \(kind)")
                } else if state == .paused && kind.isChargeResult {
                    #expect(after == .paused, "\(kind)")
                } else {
                    #expect(after == next, "\(state) after \(kind)")
                }
            }
        }
    }

    /// Cycle 1's notification goes a day ahead; the customer pauses the mandate before the debit.
    static func pausedAfterNotifying(_ core: inout LedgerCore) throws {
        try authorised(&core)
        let notify = try #require(
            ScheduleLimitsTests.dispatched(try ScheduleCoreTests.tick(&core, at: date("2027-03-09") + hour, now: 20)).first)
        #expect(notify.operation == .debitNotify)
        let notified = Outcome(order: notify, status: .succeeded, result: ["notificationId": "N-1"])
        #expect(core.handle(.settle(notify.key, event: nil, outcome: notified), now: 21).0 == .settled(applied: true, duplicate: false))
        _ = report(&core, [event(.mandatePaused, "SUBSCRIPTION|PAUSED|1")], now: 22)
    }

    @Test func aPausedMandateIsNeitherNotifiedNorDebitedAndResumesPastTheCyclesItMissed() async throws {
        let store = try temporaryStore()
        var core = LedgerCore(store: store, registry: await testRegistry(), eventMerchants: ["default"])
        try Self.pausedAfterNotifying(&core)

        // Its debit's date, and the next cycle's notification and debit: nothing is made, and
        // the schedule waits for no time.
        for day in ["2027-03-10", "2027-04-09", "2027-04-10"] {
            #expect(ScheduleLimitsTests.dispatched(try ScheduleCoreTests.tick(&core, at: Self.date(day) + Self.hour, now: 30)).isEmpty, "\(day)")
        }
        let held = try ScheduleLimitsTests.record(store, .phonepe, "SUB-1")
        #expect(held.isHeld && held.json["state"] == "active" && held.cycle == 1 && held.step == 1)
        #expect(try store.earliestDueStep() == nil)
        // A charge result while paused resumes nothing.
        _ = Self.report(&core, [Self.event(.renewalSucceeded, "DEBIT|OUTSIDE")], now: 35)
        #expect(try ScheduleLimitsTests.record(store, .phonepe, "SUB-1").isHeld)

        // Unpaused on 20 April: cycles 1 and 2 fell due meanwhile and are skipped; cycle 3 is
        // notified a day before its date.
        core.scheduleClockOffset = Self.date("2027-04-20") - 40
        let resumed = Self.report(&core, [Self.event(.mandateResumed, "SUBSCRIPTION|ACTIVE|2")], now: 40)
        #expect(resumed.compactMap { $0["type"]?.stringValue } == ["mandate.resumed", "renewal.skipped"], "\(resumed)")
        let skipped = try #require(resumed.last)
        #expect(skipped["cycle"] == 1 && skipped["lastCycle"] == 2 && skipped["amount"] == 39900 && skipped["subscription"]?["state"] == "active")
        // The same report again resumes nothing more.
        #expect(Self.report(&core, [Self.event(.mandateResumed, "SUBSCRIPTION|ACTIVE|2")], now: 41).isEmpty)
        #expect(ScheduleLimitsTests.dispatched(try ScheduleCoreTests.tick(&core, at: Self.date("2027-05-08"), now: 50)).isEmpty)
        let next = try #require(
            ScheduleLimitsTests.dispatched(try ScheduleCoreTests.tick(&core, at: Self.date("2027-05-09") + Self.hour, now: 60)).first)
        let cycle3 = ScheduledAttempt(merchant: "default", provider: .phonepe, subscription: "SUB-1", cycle: 3, attempt: 1)
        #expect(next.operation == .debitNotify && next.orderId == cycle3.orderId(step: 0))
    }

    @Test func anUnpauseWithinADayOfTheDueDateNotifiesTheCycleAgainUnderANewAttempt() async throws {
        let store = try temporaryStore()
        var core = LedgerCore(store: store, registry: await testRegistry(), eventMerchants: ["default"])
        try Self.pausedAfterNotifying(&core)
        #expect(ScheduleLimitsTests.dispatched(try ScheduleCoreTests.tick(&core, at: Self.date("2027-03-10") + Self.hour, now: 30)).isEmpty)

        // Unpaused the same day: nothing skipped; the notification the pause interrupted may
        // have lapsed, so the cycle is notified again under its next attempt's transactionId.
        core.scheduleClockOffset = Self.date("2027-03-10") + 5 * Self.hour - 40
        let resumed = Self.report(&core, [Self.event(.mandateResumed, "SUBSCRIPTION|ACTIVE|2")], now: 40)
        #expect(resumed.compactMap { $0["type"]?.stringValue } == ["mandate.resumed"])
        let again = try #require(
            ScheduleLimitsTests.dispatched(try ScheduleCoreTests.tick(&core, at: Self.date("2027-03-10") + 5 * Self.hour, now: 50)).first)
        let attempt = ScheduledAttempt(merchant: "default", provider: .phonepe, subscription: "SUB-1", cycle: 1, attempt: 2)
        #expect(again.operation == .debitNotify && again.orderId == attempt.orderId(step: 0))
    }
}

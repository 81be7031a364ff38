import Connectors
import NetsEasy
import PaypipeCore
import StageRuntime
import StageWire
import TestSupport
import Testing

@testable import LedgerStage

/// Dunning in the ledger's core (docs/protocol.md, "Declines"): each failed step is classified
/// by its provider's table; a hard decline gives the cycle up at once, a soft one is retried by
/// the merchant's days, a failure that is not the customer's sends the schedule to review
/// without using a retry, and the merchant's action follows its unpaid cycles in a row.
@Suite("Dunning in the ledger's core")
struct DunningCoreTests {
    typealias S = ScheduleCoreTests

    static func core(_ dunning: PaypipeConfig.Dunning = PaypipeConfig.Dunning(), schedule: String) async throws -> LedgerCore {
        var schedules = PaypipeConfig.Schedules()
        schedules.retryAfterDays = [1, 3]
        var core = LedgerCore(
            store: try temporaryStore(), registry: await testRegistry(), eventMerchants: ["default"], schedules: schedules,
            dunning: ["default": dunning])
        try S.opened(&core, schedule: schedule, now: 10)
        return core
    }

    /// The step's outcome: `failed` with `code`, or `rejected`; the messages it made.
    static func end(_ core: inout LedgerCore, _ order: Order, _ status: Outcome.Status, code: String, now: Int64) -> [JSONValue] {
        let outcome = Outcome(order: order, status: status, error: .init(code: code, message: "refused"))
        let (reply, effects) = core.handle(.settle(order.key, event: nil, outcome: outcome), now: now)
        #expect(reply == .settled(applied: true, duplicate: false))
        return S.messages(effects)
    }

    static func events(_ core: LedgerCore) throws -> [JSONValue] {
        try core.store.subscription(merchant: "default", provider: .nets, reference: "sub-1")?["events"]?.arrayValue ?? []
    }

    static func record(_ core: LedgerCore) throws -> JSONValue? {
        try core.store.subscription(merchant: "default", provider: .nets, reference: "sub-1")
    }

    @Test func eachProvidersTableClassifiesTheCodesItsOutcomesCarry() async throws {
        let registry = await testRegistry()
        func classify(_ provider: Provider, _ code: String, _ status: Outcome.Status = .failed) -> DeclineClass {
            let outcome = Outcome(
                orderId: "o", merchant: "default", provider: provider.rawValue, operation: "x", status: status,
                error: .init(code: code, message: ""))
            return DeclineClass.of(outcome, connector: registry.connector(for: provider))
        }
        // Nets: never-retry codes, insufficient funds, the merchant's key, an unknown code.
        #expect(classify(.nets, "NETS_DECLINED_41") == .hard && classify(.nets, "NETS_DECLINED_04") == .hard)
        #expect(classify(.nets, "NETS_DECLINED_51") == .soft && classify(.nets, "NETS_DECLINED_911") == .soft)
        #expect(classify(.nets, "NETS_UNAUTHORIZED") == .notADecline && classify(.nets, "NETS_NOT_FOUND") == .hard)
        // PhonePe: final mandate states, NPCI codes, PhonePe's own.
        #expect(classify(.phonepe, "SUBSCRIPTION_REVOKED") == .hard && classify(.phonepe, "YE") == .hard)
        #expect(classify(.phonepe, "Z9") == .soft && classify(.phonepe, "AUTHORIZATION_FAILED") == .soft)
        #expect(classify(.phonepe, "NOTIFY_FAILED") == .soft && classify(.phonepe, "BAD_REQUEST") == .notADecline)
        // Trust Payments: by errorcode, as outcome codes or bare.
        #expect(classify(.trustpayments, "DECLINED") == .hard && classify(.trustpayments, "TP_ERROR_71000") == .hard)
        #expect(classify(.trustpayments, "TP_ERROR_60042") == .soft && classify(.trustpayments, "88888") == .soft)
        #expect(classify(.trustpayments, "UNAUTHORIZED") == .notADecline)
        // The pipeline's own, and any rejection.
        #expect(classify(.nets, "EXPIRED") == .soft && classify(.nets, "AMOUNT_MISMATCH") == .notADecline)
        #expect(classify(.nets, "MISSING_CREDENTIALS", .rejected) == .notADecline)
    }

    @Test func aHardDeclineGivesTheCycleUpAtOnceAndTheNextCycleIsCharged() async throws {
        var core = try await Self.core(schedule: #"{"interval":"P1M","firstChargeDate":"2027-01-10","count":3}"#)
        let first = try #require(S.dispatched(try S.tick(&core, at: S.date("2027-01-10"), now: 20)).first)
        let given = Self.end(&core, first, .failed, code: "NETS_DECLINED_41", now: 30)
        let abandoned = try #require(given.first { $0["type"] == "renewal.abandoned" })
        #expect(abandoned["cycle"] == 1 && abandoned["subscription"]?["state"] == "past_due")
        #expect(abandoned["reason"]?.stringValue?.hasPrefix("NETS_DECLINED_41: a hard decline, not retried") == true)
        #expect(!given.contains { $0["type"] == "renewal.retrying" })
        // No retry on any day after; the next cycle on its date.
        #expect(S.dispatched(try S.tick(&core, at: S.date("2027-01-20"), now: 40)).isEmpty)
        let second = try #require(S.dispatched(try S.tick(&core, at: S.date("2027-02-10"), now: 50)).first)
        #expect(second.orderId.hasSuffix("-2-1-1"))
    }

    @Test func aSoftDeclineIsRetriedByTheMerchantsDays() async throws {
        var dunning = PaypipeConfig.Dunning()
        dunning.retryAfterDays = [5]
        var core = try await Self.core(dunning, schedule: #"{"interval":"P1M","firstChargeDate":"2027-01-10","count":3}"#)
        let first = try #require(S.dispatched(try S.tick(&core, at: S.date("2027-01-10"), now: 20)).first)
        let declined = Self.end(&core, first, .failed, code: "NETS_DECLINED_51", now: 30)
        #expect(declined.contains { $0["type"] == "renewal.retrying" && $0["reason"] == "NETS_DECLINED_51" })
        // Not after the schedules' one day: after the merchant's five.
        #expect(S.dispatched(try S.tick(&core, at: S.date("2027-01-14"), now: 40)).isEmpty)
        let retry = try #require(S.dispatched(try S.tick(&core, at: S.date("2027-01-15") + 10, now: 50)).first)
        #expect(retry.orderId.hasSuffix("-1-2-1"))
        let givenUp = Self.end(&core, retry, .failed, code: "NETS_DECLINED_51", now: 60)
        #expect(
            givenUp.contains {
                $0["type"] == "renewal.abandoned"
                    && $0["reason"]?.stringValue
                        == "NETS_DECLINED_51 on all 2 declined attempts; 1 unpaid cycle in a row: dunning onExhausted past_due"
            })
    }

    @Test func aRejectedStepSendsTheScheduleToReviewWithoutUsingARetry() async throws {
        var core = try await Self.core(schedule: #"{"interval":"P1M","firstChargeDate":"2027-01-10","count":3}"#)
        let first = try #require(S.dispatched(try S.tick(&core, at: S.date("2027-01-10"), now: 20)).first)
        let rejected = Self.end(&core, first, .rejected, code: "MISSING_CREDENTIALS", now: 30)
        let review = try #require(rejected.first { $0["type"] == "schedule.review" })
        #expect(review["subscription"]?["state"] == "active", "not past due: the customer refused nothing")
        #expect(review["reason"]?.stringValue?.hasPrefix("MISSING_CREDENTIALS: the chargeSubscription order of cycle 1 was rejected") == true)
        #expect(!rejected.contains { ($0["type"]?.stringValue ?? "").hasPrefix("renewal.") })
        let hour: Int64 = 3_600_000
        #expect(S.dispatched(try S.tick(&core, at: S.date("2027-01-10") + hour, now: 40)).isEmpty, "held for a person")
        // Resumed once fixed, the same day: the cycle again, as a new attempt.
        let frame = #"{"v":1,"orderId":"resume-1","provider":"nets","operation":"schedule","params":{"subscription":"sub-1","action":"resume"}}"#
        _ = try core.intake([Array(frame.utf8)], now: 50)
        let again = try #require(S.dispatched(try S.tick(&core, at: S.date("2027-01-10") + 2 * hour, now: 60)).first)
        #expect(again.orderId.hasSuffix("-1-2-1"))
        // Its soft decline still has both retries: one day, then three.
        _ = Self.end(&core, again, .failed, code: "NETS_DECLINED_51", now: 70)
        #expect(S.dispatched(try S.tick(&core, at: S.date("2027-01-11") + hour, now: 75)).isEmpty)
        let retry = try #require(S.dispatched(try S.tick(&core, at: S.date("2027-01-11") + 3 * hour, now: 80)).first)
        _ = Self.end(&core, retry, .failed, code: "NETS_DECLINED_51", now: 90)
        #expect(S.dispatched(try S.tick(&core, at: S.date("2027-01-14"), now: 100)).isEmpty)
        let last = try #require(S.dispatched(try S.tick(&core, at: S.date("2027-01-14") + 4 * hour, now: 110)).first)
        #expect(last.orderId.hasSuffix("-1-4-1"))
        let givenUp = Self.end(&core, last, .failed, code: "NETS_DECLINED_51", now: 120)
        #expect(givenUp.contains { $0["type"] == "renewal.abandoned" && $0["reason"]?.stringValue?.hasPrefix("NETS_DECLINED_51 on all 3") == true })
    }

    @Test func cancelFollowsTheMerchantsUnpaidCyclesInARowAndAPaidCycleStartsTheCountAgain() async throws {
        var dunning = PaypipeConfig.Dunning()
        dunning.onExhausted = .cancel
        dunning.afterUnpaidCycles = 2
        var core = try await Self.core(dunning, schedule: #"{"interval":"P1M","firstChargeDate":"2027-01-10","count":6}"#)
        func cycle(_ date: String, now: Int64, _ status: Outcome.Status, code: String = "NETS_DECLINED_43") throws -> [JSONValue] {
            let order = try #require(S.dispatched(try S.tick(&core, at: S.date(date), now: now)).first)
            if status == .succeeded {
                S.settle(&core, order, .succeeded, now: now + 1)
                return []
            }
            return Self.end(&core, order, status, code: code, now: now + 1)
        }
        // Unpaid, paid, unpaid: never two in a row.
        let one = try cycle("2027-01-10", now: 20, .failed)
        #expect(one.contains { $0["reason"]?.stringValue?.hasSuffix("1 of 2 unpaid cycles in a row before dunning onExhausted cancel") == true })
        _ = try cycle("2027-02-10", now: 30, .succeeded)
        _ = try cycle("2027-03-10", now: 40, .failed)
        // Two in a row: cancelled.
        let four = try cycle("2027-04-10", now: 50, .failed)
        #expect(four.compactMap { $0["type"]?.stringValue } == ["renewal.abandoned", "subscription.cancelled"])
        #expect(four.last?["subscription"]?["state"] == "cancelled")
        #expect(four.last?["reason"]?.stringValue?.hasPrefix("dunning: 2 unpaid cycles in a row") == true)
        #expect(S.dispatched(try S.tick(&core, at: S.date("2027-06-10"), now: 60)).isEmpty, "nothing charged after")
        let record = try #require(try Self.record(core))
        #expect(record["state"] == "cancelled" && record["schedule"]?["state"] == "cancelled")
    }

    @Test func pauseStopsTheScheduleUntilResumedAndPastDueSaysSo() async throws {
        var dunning = PaypipeConfig.Dunning()
        dunning.onExhausted = .pause
        var core = try await Self.core(dunning, schedule: #"{"interval":"P1M","firstChargeDate":"2027-01-10","count":6}"#)
        let first = try #require(S.dispatched(try S.tick(&core, at: S.date("2027-01-10"), now: 20)).first)
        let paused = Self.end(&core, first, .failed, code: "NETS_DECLINED_04", now: 30)
        #expect(paused.compactMap { $0["type"]?.stringValue } == ["renewal.abandoned", "subscription.paused"])
        #expect(paused.last?["subscription"]?["state"] == "paused")
        #expect(S.dispatched(try S.tick(&core, at: S.date("2027-03-01"), now: 40)).isEmpty, "paused")
        #expect(try Self.record(core)?["schedule"]?["state"] == "paused")
        // Resumed: from the next cycle due, the paused ones not charged.
        let frame = #"{"v":1,"orderId":"resume-1","provider":"nets","operation":"schedule","params":{"subscription":"sub-1","action":"resume"}}"#
        core.scheduleClockOffset = S.date("2027-03-01") - 50
        _ = try core.intake([Array(frame.utf8)], now: 50)
        let next = try #require(S.dispatched(try S.tick(&core, at: S.date("2027-03-10"), now: 60)).first)
        #expect(next.orderId.hasSuffix("-3-1-1"))
    }
}

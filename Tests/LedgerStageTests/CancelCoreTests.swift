import Connectors
import NetsEasy
import PaypipeCore
import StageRuntime
import StageWire
import TestSupport
import Testing
import TrustPayments

@testable import LedgerStage

/// Cancelling a subscription in the ledger's core (docs/protocol.md, "Cancelling a
/// subscription"): the order is checked against the subscription's record before anything is
/// sent, and its success stops the schedule, marks the record and reports one event.
@Suite("Cancels in the ledger's core")
struct CancelCoreTests {
    typealias S = ScheduleCoreTests

    static func cancelFrame(_ id: String, provider: String = "nets", _ params: String) -> [UInt8] {
        Array(#"{"v":1,"orderId":"\#(id)","provider":"\#(provider)","operation":"cancel","params":\#(params)}"#.utf8)
    }

    static func subscription(_ core: inout LedgerCore, provider: Provider = .nets, _ reference: String) throws -> JSONValue {
        guard case .subscription(let record?) = core.handle(.subscription(merchant: "default", provider: provider, reference: reference), now: 0).0
        else { throw CancelTestError.noSubscription }
        return record
    }

    enum CancelTestError: Error { case noSubscription }

    static func dispatched(_ effects: [LedgerCore.Effect]) -> [Order] {
        let catalog = OrderCatalog(NetsConnector.operations + TrustPaymentsConnector.operations)
        return effects.compactMap { effect -> Order? in
            guard case .dispatch(let bytes) = effect else { return nil }
            return try? DispatchFrame.decode(bytes, catalog: catalog).order
        }
    }

    @Test func aCancelOfAnUnknownOrEndedSubscriptionIsRejectedNamingTheFieldBeforeAnythingIsSent() async throws {
        var core = LedgerCore(store: try temporaryStore(), registry: await testRegistry(), eventMerchants: ["default"])
        let unknown = try core.intake([Self.cancelFrame("c-1", #"{"subscription":"sub-9"}"#)], now: 10)
        #expect(Self.dispatched(unknown).isEmpty)
        let rejected = try #require(S.messages(unknown).first)
        #expect(rejected["status"] == "rejected" && rejected["error"]?["code"] == "SUBSCRIPTION_NOT_FOUND")
        #expect(rejected["error"]?["message"]?.stringValue?.hasPrefix("params.subscription names no nets subscription") == true)

        // Upstream may not write what the ledger adds, nor an `at` it does not know.
        let forged = try #require(
            S.messages(try core.intake([Self.cancelFrame("c-2", #"{"subscription":"sub-1","record":{"orderId":"x"}}"#)], now: 11)).first)
        #expect(forged["error"]?["code"] == "UNKNOWN_FIELD" && forged["error"]?["message"]?.stringValue?.hasPrefix("params.record") == true)
        let when = try #require(S.messages(try core.intake([Self.cancelFrame("c-3", #"{"subscription":"sub-1","at":"later"}"#)], now: 12)).first)
        #expect(
            when["error"]?["code"] == "INVALID_PARAM"
                && when["error"]?["message"]?.stringValue?.hasPrefix("params.at must be one of now, atPeriodEnd") == true)

        try S.opened(&core, schedule: #"{"interval":"P1M","firstChargeDate":"2027-01-31"}"#, now: 20)
        let first = try core.intake([Self.cancelFrame("c-4", #"{"subscription":"sub-1","at":"now"}"#)], now: 30)
        #expect(Self.dispatched(first).isEmpty, "Nets has no cancel call: nothing is sent")
        let again = try #require(S.messages(try core.intake([Self.cancelFrame("c-5", #"{"subscription":"sub-1"}"#)], now: 50)).first)
        #expect(
            again["error"]?["code"] == "SUBSCRIPTION_ENDED"
                && again["error"]?["message"]?.stringValue?.hasPrefix("params.subscription names subscription sub-1, which is cancelled") == true)
        // The first cancel again is its own outcome again, not a rejection.
        let replayed = try #require(S.messages(try core.intake([Self.cancelFrame("c-4", #"{"subscription":"sub-1","at":"now"}"#)], now: 60)).first)
        #expect(replayed["status"] == "succeeded")
    }

    @Test func aSucceededCancelStopsTheScheduleMarksTheRecordAndReportsOneEventPaidThroughThePeriod() async throws {
        var core = LedgerCore(store: try temporaryStore(), registry: await testRegistry(), eventMerchants: ["default"])
        try S.opened(&core, schedule: #"{"interval":"P1M","firstChargeDate":"2027-01-31"}"#, now: 10)
        // Nets has no cancel call: the ledger applies the order as it takes it in.
        let effects = try core.intake([Self.cancelFrame("c-1", #"{"subscription":"sub-1"}"#)], now: 20)
        #expect(Self.dispatched(effects).isEmpty)
        #expect(S.messages(effects).first?["status"] == "succeeded" && S.messages(effects).first?["result"]?["providerCall"] == "none")
        let cancelled = S.messages(effects).filter { $0["type"] == "subscription.cancelled" }
        #expect(cancelled.count == 1)
        let paidThrough = Timestamp.iso8601(milliseconds: S.date("2027-01-31"))
        #expect(cancelled.first?["paidThrough"]?.stringValue == paidThrough && cancelled.first?["subscription"]?["state"] == "cancelled")
        let record = try Self.subscription(&core, "sub-1")
        #expect(record["state"] == "cancelled" && record["paidThrough"]?.stringValue == paidThrough)
        #expect(record["schedule"]?["state"] == "cancelled")
        // The cycle it was paid up to is never charged.
        #expect(Self.dispatched(try S.tick(&core, at: S.date("2027-02-01"), now: 40)).isEmpty)
    }

    @Test func aCancelOfASubscriptionPaypipeDoesNotScheduleIsPaidThroughTheProvidersPeriod() async throws {
        var core = LedgerCore(store: try temporaryStore(), registry: await testRegistry(), eventMerchants: ["default"])
        let jwt =
            #"{"v":1,"orderId":"tp-sub-1","provider":"trustpayments","operation":"subscriptionJwt","amount":1050,"currency":"GBP","params":{"unit":"MONTH","frequency":1,"finalNumber":12}}"#
        let first = try #require(Self.dispatched(try core.intake([Array(jwt.utf8)], now: 10)).first)
        let opened = Outcome(order: first, status: .succeeded, result: ["transactionReference": "57-9-100"])
        #expect(core.handle(.settle(first.key, event: "tp|1", outcome: opened), now: 11).0 == .settled(applied: true, duplicate: false))

        let order = try #require(
            Self.dispatched(try core.intake([Self.cancelFrame("c-1", provider: "trustpayments", #"{"subscription":"57-9-100"}"#)], now: 20)).first)
        #expect(order.params["record"]?["orderId"] == "tp-sub-1" && order.params["record"]?["target"] == .null)
        let periodEnd = S.date("2027-03-01")
        let result: [String: JSONValue] = [SubscriptionCancel.periodEndsAtResult: .integer(periodEnd)]
        let effects = core.handle(.settle(order.key, event: nil, outcome: Outcome(order: order, status: .succeeded, result: result)), now: 30).1
        #expect(
            S.messages(effects).contains {
                $0["type"] == "subscription.cancelled" && $0["paidThrough"]?.stringValue == Timestamp.iso8601(milliseconds: periodEnd)
            })
        // A failed cancel would have changed nothing; this one ended it for good.
        #expect(try Self.subscription(&core, provider: .trustpayments, "57-9-100")["state"] == "cancelled")
    }
}

import Connectors
import PaypipeCore
import StageRuntime
import StageWire
import TestSupport
import Testing
import TrustPayments

@testable import LedgerStage

/// Trust Payments engine payments no notification reported, in the ledger's core
/// (docs/protocol.md, "Reconciliation"), with the default timers: a payment is asked for a day and
/// two hours after its due day starts, again every six hours, and handed to a person after eight
/// asks that found nothing; a report from either side moves the watch on, and the second report
/// of one payment is a duplicate.
@Suite("Reconciliation in the ledger's core")
struct ReconciliationCoreTests {
    static let hour: Int64 = 3_600_000

    static func dispatched(_ effects: [LedgerCore.Effect]) -> [Order] {
        effects.compactMap { effect -> Order? in
            guard case .dispatch(let bytes) = effect else { return nil }
            return try? DispatchFrame.decode(bytes, catalog: testCatalog).order
        }
    }

    static func events(_ effects: [LedgerCore.Effect]) -> [JSONValue] {
        ScheduleCoreTests.messages(effects).filter { $0["kind"] == "event" }
    }

    static func record(_ number: Int64, settleStatus: String = "100") -> JSONValue {
        [
            "accounttypedescription": "RECUR", "baseamount": "1050", "currencyiso3a": "GBP", "errorcode": "0", "orderreference": "tp-1",
            "parenttransactionreference": "57-9-100", "requesttypedescription": "AUTH", "settlestatus": .string(settleStatus),
            "subscriptionnumber": .string(String(number)), "transactionreference": .string("57-9-\(200 + number)"),
        ]
    }

    /// A monthly series opened on 10 January 2027 (the schedules' clock) by order `tp-1`, whose
    /// first AUTH is `57-9-100`, with `finalNumber` payments in all.
    static func open(_ core: inout LedgerCore, finalNumber: Int, now: Int64) throws {
        core.scheduleClockOffset = ScheduleCoreTests.date("2027-01-10") + Self.hour - now
        let order =
            #"{"v":1,"orderId":"tp-1","provider":"trustpayments","operation":"subscriptionJwt","amount":1050,"currency":"GBP","params":{"subscriptionType":"RECURRING","unit":"MONTH","frequency":1,"finalNumber":\#(finalNumber)}}"#
        let first = try #require(Self.dispatched(try core.intake([Array(order.utf8)], now: now)).first)
        _ = core.handle(
            .settle(first.key, event: nil, outcome: Outcome(order: first, status: .succeeded, result: ["transactionReference": "57-9-100"])), now: now
        )
    }

    @Test func anUnreportedPaymentIsAskedForAndAReportFromEitherSideIsRecordedOnce() async throws {
        var core = LedgerCore(store: try temporaryStore(), registry: await testRegistry(), eventMerchants: ["default"])
        var now: Int64 = 1_000
        func tick(_ at: String, plus: Int64 = 0) throws -> [LedgerCore.Effect] {
            now += 1
            return try ScheduleCoreTests.tick(&core, at: ScheduleCoreTests.date(at) + plus, now: now)
        }
        func answer(_ query: Order, _ records: [JSONValue]) -> [JSONValue] {
            now += 1
            let outcome = Outcome(order: query, status: .succeeded, result: ["records": .array(records)])
            let (reply, effects) = core.handle(.settle(query.key, event: nil, outcome: outcome), now: now)
            #expect(reply == .settled(applied: true, duplicate: false))
            return Self.events(effects)
        }
        // Opened on 10 January: payment 2 falls due on 10 February, 3 on 10 March, 4 (the last) on 10 April.
        try Self.open(&core, finalNumber: 4, now: now)

        // Payment 2: no notification by 02:00 the next day, so it is asked for, once per retry interval.
        #expect(Self.dispatched(try tick("2027-02-11", plus: 2 * Self.hour - 1)).isEmpty)
        var asks: [Order] = []
        for ask in 0..<8 {
            let made = Self.dispatched(try tick("2027-02-11", plus: (2 + 6 * Int64(ask)) * Self.hour))
            #expect(made.count == 1 && made.first?.operation == .enginePaymentQuery)
            #expect(Self.dispatched(try tick("2027-02-11", plus: (2 + 6 * Int64(ask)) * Self.hour + 1)).isEmpty, "one ask per interval")
            asks += made
            #expect(answer(try #require(made.first), []).isEmpty, "nothing found yet")
        }
        #expect(Set(asks.map(\.orderId)).count == 8 && asks.allSatisfy { $0.orderId.hasPrefix("rcn-") && $0.params["subscriptionNumber"] == 2 })
        // Eight asks found nothing: a person is asked to look, and payment 3 is watched.
        let review = Self.events(try tick("2027-02-13", plus: 2 * Self.hour))
        #expect(review.map { $0["type"] } == ["schedule.review"] && review.first?["cycle"] == 2)
        #expect(review.first?["reason"]?.stringValue?.hasPrefix("NOT_REPORTED") == true)

        // Payment 3's notification came: nothing is asked.
        let notified = SubscriptionEvent(
            merchant: "default", provider: .trustpayments, subscription: "57-9-100", dedupeKey: "57-9-203|authorised", kind: .renewalSucceeded,
            cycle: 3)
        #expect(core.handle(.subscriptionEvents([notified]), now: now).0 == .eventsRecorded(recorded: 1, duplicates: 0))
        #expect(Self.dispatched(try tick("2027-03-12", plus: 2 * Self.hour)).isEmpty)

        // Payment 4: found by the query, reported as its notifications would have been; the
        // notification that comes after is the same event.
        let query = try #require(Self.dispatched(try tick("2027-04-11", plus: 2 * Self.hour)).first)
        let found = answer(query, [Self.record(4), Self.record(3)])
        #expect(found.map { $0["type"] } == ["renewal.succeeded", "subscription.ended", "renewal.settled", "renewal.settled"])
        let late = SubscriptionEvent(
            merchant: "default", provider: .trustpayments, subscription: "57-9-100", dedupeKey: "57-9-204|renewal.settled", kind: .renewalSettled,
            cycle: 4)
        #expect(core.handle(.subscriptionEvents([late]), now: now).0 == .eventsRecorded(recorded: 0, duplicates: 1))
        // The series is over: nothing more is watched.
        #expect(Self.dispatched(try tick("2027-06-11", plus: 2 * Self.hour)).isEmpty)
    }

    /// A series made longer after its old last payment was reported (a raised
    /// `subscriptionfinalnumber`, docs/protocol.md "Subscription events"): the payment past the
    /// old end is watched again, and asked for when no notification reports it.
    @Test func aPaymentPastARaisedFinalNumberIsAskedFor() async throws {
        var core = LedgerCore(store: try temporaryStore(), registry: await testRegistry(), eventMerchants: ["default"])
        var now: Int64 = 1_000
        func tick(_ at: String, plus: Int64 = 0) throws -> [LedgerCore.Effect] {
            now += 1
            return try ScheduleCoreTests.tick(&core, at: ScheduleCoreTests.date(at) + plus, now: now)
        }
        // Opened on 10 January with payment 2 (10 February) the last.
        try Self.open(&core, finalNumber: 2, now: now)
        let last = SubscriptionEvent(
            merchant: "default", provider: .trustpayments, subscription: "57-9-100", dedupeKey: "57-9-202|authorised", kind: .renewalSucceeded,
            cycle: 2)
        #expect(Self.events(core.handle(.subscriptionEvents([last]), now: now).1).map { $0["type"] } == ["renewal.succeeded", "subscription.ended"])
        #expect(Self.dispatched(try tick("2027-03-11", plus: 2 * Self.hour)).isEmpty, "nothing is watched past the end")

        // Upstream raises the last payment to 3, and Trust Payments takes the update.
        let update =
            #"{"v":1,"orderId":"tu-1","provider":"trustpayments","operation":"transactionUpdate","params":{"transactionReference":"57-9-100","subscription":"57-9-100","updates":{"subscriptionfinalnumber":3}}}"#
        _ = try core.intake([Array(update.utf8)], now: now)
        let (reply, effects) = core.handle(
            .settle(try order(update).key, event: "tp|update", outcome: Outcome(order: try order(update), status: .succeeded)), now: now)
        #expect(reply == .settled(applied: true, duplicate: false))
        #expect(Self.events(effects).map { $0["type"] } == ["subscription.extended"])

        // Payment 3 fell due on 10 March and no notification came: it is asked for.
        let asked = Self.dispatched(try tick("2027-03-11", plus: 2 * Self.hour + 1))
        #expect(asked.count == 1 && asked.first?.operation == .enginePaymentQuery && asked.first?.params["subscriptionNumber"] == 3)
    }
}

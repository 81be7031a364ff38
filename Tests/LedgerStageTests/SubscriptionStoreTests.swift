import Connectors
import Foundation
import PaypipeCore
import StageRuntime
import StageWire
import TestSupport
import Testing

@testable import LedgerStage

/// The subscription record and its events in the ledger's store (docs/protocol.md,
/// "Subscription events"), on the suite's store (SQLite, or PostgreSQL when the suite runs there).
@Suite("Subscriptions and their events in the store")
struct SubscriptionStoreTests {
    func events(_ effects: [LedgerCore.Effect]) -> [JSONValue] {
        effects.compactMap { if case .emit(let bytes) = $0 { try? JSONValue.parse(bytes) } else { nil } }.filter { $0["kind"] == "event" }
    }

    func debit(
        _ id: String, _ kind: SubscriptionEvent.Kind = .renewalSucceeded, merchant: String = "default", subscription: String = "SUB1"
    )
        -> SubscriptionEvent
    {
        SubscriptionEvent(
            merchant: merchant, provider: .phonepe, subscription: subscription, dedupeKey: "DEBIT|\(id)", kind: kind, amount: 39900,
            currency: "INR", providerReference: id)
    }

    /// A PhonePe mandate authorised by its callback: the subscription its order opened.
    func authorised(_ core: inout LedgerCore, now: Int64) throws -> Order {
        _ = try core.intake([Array(phonePeOrder.utf8)], now: now)
        let mandate = try order(phonePeOrder)
        let (reply, _) = core.handle(.settle(mandate.key, event: "phonepe|auth", outcome: Outcome(order: mandate, status: .succeeded)), now: now + 1)
        #expect(reply == .settled(applied: true, duplicate: false))
        return mandate
    }

    @Test func anEventIsRecordedOnceLoggedForAMerchantThatTakesThemAndKeptInTheHistory() async throws {
        var core = LedgerCore(store: try temporaryStore(), registry: await testRegistry(), eventMerchants: ["default"])
        // Before its first order succeeded, the subscription is not known: nothing is recorded.
        #expect(core.handle(.subscriptionEvents([debit("T0")]), now: 1).0 == .unknownSubscription("SUB1"))
        _ = try authorised(&core, now: 10)

        let (reply, effects) = core.handle(.subscriptionEvents([debit("T1")]), now: 20)
        #expect(reply == .eventsRecorded(recorded: 1, duplicates: 0))
        let first = try #require(events(effects).first)
        #expect(first["type"] == "renewal.succeeded" && first["subscription"]?["orderId"] == "pp-1" && first["subscription"]?["state"] == "active")
        #expect(first["eventId"] == .string(debit("T1").eventId) && first["seq"]?.integerValue != nil && first["epoch"] != nil)
        // The provider sends it again: nothing new.
        let again = core.handle(.subscriptionEvents([debit("T1")]), now: 30)
        #expect(again.0 == .eventsRecorded(recorded: 0, duplicates: 1) && events(again.1).isEmpty)
        // Replay gives the logged bytes.
        let logged = try core.store.outcomes(after: 0, limit: 100).outcomes.map(\.text)
        #expect(logged.contains { (try? JSONValue.parse(Array($0.utf8))) == first })

        // The user revokes the mandate: the subscription ends, and a late debit report does not
        // bring it back, though it is recorded.
        _ = core.handle(.subscriptionEvents([debit("R", .mandateRevoked)]), now: 40)
        let late = core.handle(.subscriptionEvents([debit("T2")]), now: 50)
        #expect(events(late.1).first?["subscription"]?["state"] == "revoked")
        let record = try #require(try core.store.subscription(merchant: "default", provider: .phonepe, reference: "SUB1"))
        #expect(record["state"] == "revoked" && record["orderId"] == "pp-1")
        #expect(
            record["events"]?.arrayValue?.compactMap { $0["type"]?.stringValue } == ["renewal.succeeded", "mandate.revoked", "renewal.succeeded"])
        #expect(core.counters.subscriptionEvents == ["renewal.succeeded": 2, "mandate.revoked": 1] && core.counters.subscriptionEventDuplicates == 1)
    }

    @Test func aMerchantThatDoesNotTakeEventsGetsNoneOnTheLogButTheHistoryKeepsThem() async throws {
        var core = LedgerCore(store: try temporaryStore(), registry: await testRegistry(), eventMerchants: [])
        _ = try authorised(&core, now: 10)
        let lastSeq = try core.store.lastLoggedSeq()
        let (reply, effects) = core.handle(.subscriptionEvents([debit("T1")]), now: 20)
        #expect(reply == .eventsRecorded(recorded: 1, duplicates: 0) && effects.isEmpty)
        #expect(try core.store.lastLoggedSeq() == lastSeq, "no seq taken")
        let record = try #require(try core.store.subscription(merchant: "default", provider: .phonepe, reference: "SUB1"))
        #expect(record["events"]?.arrayValue?.count == 1 && record["events"]?.arrayValue?.first?["seq"] == nil)
    }

    /// A callback's events are all recorded or none: one for an unknown subscription keeps the
    /// others out too, so the provider's redelivery brings them all.
    @Test func oneUnknownSubscriptionRecordsNothingOfItsCallback() async throws {
        var core = LedgerCore(store: try temporaryStore(), registry: await testRegistry(), eventMerchants: ["default"])
        _ = try authorised(&core, now: 10)
        let reply = core.handle(.subscriptionEvents([debit("T1"), debit("T9", subscription: "SUB-unknown")]), now: 20)
        #expect(reply.0 == .unknownSubscription("SUB-unknown") && reply.1.isEmpty)
        #expect(core.handle(.subscriptionEvents([debit("T1")]), now: 30).0 == .eventsRecorded(recorded: 1, duplicates: 0))
        // Another merchant's subscription of the same reference is another subscription.
        #expect(core.handle(.subscriptionEvents([debit("T1", merchant: "other")]), now: 40).0 == .unknownSubscription("SUB1"))
    }

    /// The series' last renewal ends it (Trust Payments' final number), a subscription past its
    /// end date ends by itself (Nets), each reported once.
    /// A Trust Payments series `57-9-1` of `finalCycle` payments, opened by order `tp-1`.
    func openTrustPaymentsSeries(_ store: LedgerStore, finalCycle: Int64) throws {
        try store.transaction {
            try store.openSubscription(
                SubscriptionOpening(reference: "57-9-1", finalCycle: finalCycle), provider: Provider("trustpayments"),
                key: OrderKey(merchant: "default", orderId: "tp-1"), checkAt: nil, now: 0)
        }
    }

    @Test func aSeriesEndsAfterItsLastPaymentAndASubscriptionAtItsEndDate() async throws {
        var core = LedgerCore(store: try temporaryStore(), registry: await testRegistry(), eventMerchants: ["default"])
        let store = core.store
        try openTrustPaymentsSeries(store, finalCycle: 3)
        try store.transaction {
            try store.openSubscription(
                SubscriptionOpening(reference: "nets-s1", endsAt: 5_000), provider: Provider("nets"),
                key: OrderKey(merchant: "default", orderId: "n-1"),
                checkAt: nil, now: 0)
        }
        func payment(_ cycle: Int64) -> SubscriptionEvent {
            SubscriptionEvent(
                merchant: "default", provider: Provider("trustpayments"), subscription: "57-9-1", dedupeKey: "57-9-\(cycle)|authorised",
                kind: .renewalSucceeded, amount: 1050, currency: "GBP", cycle: cycle)
        }
        #expect(events(core.handle(.subscriptionEvents([payment(2)]), now: 10).1).count == 1)
        let last = events(core.handle(.subscriptionEvents([payment(3)]), now: 20).1)
        #expect(last.compactMap { $0["type"]?.stringValue } == ["renewal.succeeded", "subscription.ended"])
        #expect(events(try core.redeliver(now: 4_999)).isEmpty)
        let ended = events(try core.redeliver(now: 5_001))
        #expect(ended.count == 1 && ended.first?["type"] == "subscription.ended" && ended.first?["subscription"]?["reference"] == "nets-s1")
        #expect(events(try core.redeliver(now: 6_000)).isEmpty)
    }

    /// A Trust Payments series made longer after it ended on its old last payment (a raised
    /// `subscriptionfinalnumber`, which the engine back-fills) is active again, and ends at the
    /// new last payment.
    @Test func aRaisedFinalNumberMovesTheEndAndReopensAnEndedSeries() async throws {
        var core = LedgerCore(store: try temporaryStore(), registry: await testRegistry(), eventMerchants: ["default"])
        let store = core.store
        try openTrustPaymentsSeries(store, finalCycle: 3)
        func payment(_ cycle: Int64) -> [JSONValue] {
            let event = SubscriptionEvent(
                merchant: "default", provider: Provider("trustpayments"), subscription: "57-9-1", dedupeKey: "57-9-\(cycle)|authorised",
                kind: .renewalSucceeded, amount: 1050, currency: "GBP", cycle: cycle)
            return events(core.handle(.subscriptionEvents([event]), now: 10 + cycle).1)
        }
        #expect(payment(2).count == 1)
        #expect(payment(3).compactMap { $0["type"]?.stringValue } == ["renewal.succeeded", "subscription.ended"])
        let update =
            #"{"v":1,"orderId":"tu-1","provider":"trustpayments","operation":"transactionUpdate","params":{"transactionReference":"57-9-200","subscription":"57-9-1","updates":{"subscriptionfinalnumber":5}}}"#
        _ = try core.intake([Array(update.utf8)], now: 30)
        let (reply, effects) = core.handle(
            .settle(try order(update).key, event: "tp|update", outcome: Outcome(order: try order(update), status: .succeeded)), now: 31)
        #expect(reply == .settled(applied: true, duplicate: false))
        let extended = events(effects)
        #expect(extended.compactMap { $0["type"]?.stringValue } == ["subscription.extended"])
        #expect(extended.first?["subscription"]?["state"] == "active" && extended.first?["cycle"] == 5)
        #expect(payment(4).compactMap { $0["subscription"]?["state"]?.stringValue } == ["active"])
        #expect(payment(5).compactMap { $0["type"]?.stringValue } == ["renewal.succeeded", "subscription.ended"])
        let record = try #require(try store.subscription(merchant: "default", provider: Provider("trustpayments"), reference: "57-9-1"))
        #expect(record["state"] == "ended" && record["finalCycle"] == 5)
    }

    /// A correction of a first order (the money was taken after all) opens its subscription and
    /// is the subscription's first event.
    @Test func aCorrectedFirstOrderOpensItsSubscriptionWithACorrectionEvent() async throws {
        var core = LedgerCore(store: try temporaryStore(), registry: await testRegistry(), eventMerchants: ["default"])
        _ = try core.intake([Array(netsCreateOrder.utf8)], now: 0)
        let create = try order(netsCreateOrder)
        _ = try core.submitted(Outcome(order: create, status: .pending, result: ["paymentId": "p1", "hostedPaymentPageUrl": "https://x"]), now: 10)
        let expired = Outcome(order: create, status: .failed, error: .init(code: "EXPIRED", message: "still pending"))
        _ = try core.results([core.frame(expired, answering: .expiryCheck)], role: .submitter, now: 20)
        let paid = Outcome(order: create, status: .succeeded, result: ["paymentId": "p1", "subscriptionId": "s1"])
        let (_, effects) = core.handle(.settle(create.key, event: "nets|evt-1", outcome: paid), now: 30)
        let correction = try #require(events(effects).first)
        #expect(correction["type"] == "correction" && correction["subscription"]?["reference"] == "s1" && correction["amount"] == .integer(9900))
        let charge = SubscriptionEvent(
            merchant: "default", provider: Provider("nets"), subscription: "s1", dedupeKey: "evt-2", kind: .renewalSucceeded)
        #expect(core.handle(.subscriptionEvents([charge]), now: 40).0 == .eventsRecorded(recorded: 1, duplicates: 0))
    }

    /// A ledger holding one checked Cleeng subscription (`S1@cl-1`), its entitlement known until
    /// 50 s and its first check due at 10 s, rechecked every 10 s.
    func checkedCleengSubscription() async throws -> LedgerCore {
        var timers = PaypipeConfig.Timers()
        timers.entitlementRecheckMs = 10_000
        let core = LedgerCore(store: try temporaryStore(), registry: await testRegistry(), timers: timers, eventMerchants: ["default"])
        let store = core.store
        try store.transaction {
            try store.openSubscription(
                SubscriptionOpening(reference: "S1@cl-1", check: ["customerToken": "t", "offerId": "S1"], expiresAt: 50_000),
                provider: Provider("cleeng"), key: OrderKey(merchant: "default", orderId: "cl-1"), checkAt: 10_000, now: 0)
        }
        return core
    }

    /// Entitlement checks: due ones are handed out once until their poller reports (or the
    /// hand-out lapses); a report schedules the next at the expiry or a recheck interval on.
    @Test func entitlementChecksAreHandedOutOnceAndRescheduledByTheirReport() async throws {
        var core = try await checkedCleengSubscription()
        guard case .dueChecks(let none) = core.handle(.dueChecks(limit: 10), now: 9_999).0 else {
            Issue.record("no answer")
            return
        }
        #expect(none.isEmpty)
        guard case .dueChecks(let due) = core.handle(.dueChecks(limit: 10), now: 10_000).0 else {
            Issue.record("no answer")
            return
        }
        #expect(due.map(\.reference) == ["S1@cl-1"] && due.first?.state == .active && due.first?.expiresAt == 50_000)
        guard case .dueChecks(let taken) = core.handle(.dueChecks(limit: 10), now: 10_001).0 else {
            Issue.record("no answer")
            return
        }
        #expect(taken.isEmpty, "handed out once")
        // Renewed: a later expiry is a renewal, taken once under the hand-out's ticket.
        let reading = EntitlementReading(granted: true, expiresAt: 90_000)
        let ticket = try #require(due.first?.ticket)
        let result = EntitlementCheckResult(merchant: "default", provider: Provider("cleeng"), reference: "S1@cl-1", ticket: ticket, reading: reading)
        #expect(events(core.handle(.checked([result]), now: 10_002).1).first?["type"] == "renewal.succeeded")
        #expect(events(core.handle(.checked([result]), now: 10_003).1).isEmpty)
        guard case .dueChecks(let next) = core.handle(.dueChecks(limit: 10), now: 20_003).0 else {
            Issue.record("no answer")
            return
        }
        #expect(next.first?.expiresAt == 90_000, "due again a recheck interval on, the expiry known")
    }

    /// Access lapses, the customer buys again, and access lapses again: three events, the
    /// second lapse reporting no expiry just as the first did, and the subscription ends
    /// `expired`. A second reading of the same lapse, taken from the same record, is one event.
    @Test func aLapseAfterAReGrantIsANewEventAndARepeatedReadingOfALapseIsNot() async throws {
        var core = try await checkedCleengSubscription()
        let store = core.store
        var now: Int64 = 10_000
        func check(_ reading: EntitlementReading) -> [JSONValue] {
            guard case .dueChecks(let due) = core.handle(.dueChecks(limit: 10), now: now).0, let check = due.first else {
                Issue.record("the check was not due at \(now)")
                return []
            }
            let result = EntitlementCheckResult(
                merchant: "default", provider: Provider("cleeng"), reference: "S1@cl-1", ticket: check.ticket, reading: reading)
            defer { now += 20_000 }
            return events(core.handle(.checked([result]), now: now + 1).1)
        }
        let lapsed = EntitlementReading(granted: false, expiresAt: nil)
        var recorded = check(lapsed)
        recorded += check(lapsed)
        recorded += check(EntitlementReading(granted: true, expiresAt: 200_000))
        recorded += check(lapsed)
        #expect(recorded.map { $0["type"] } == ["entitlement.expired", "entitlement.granted", "entitlement.expired"])
        #expect(Set(recorded.compactMap { $0["eventId"]?.stringValue }).count == 3)
        let record = try #require(try store.subscription(merchant: "default", provider: Provider("cleeng"), reference: "S1@cl-1"))
        #expect(record["state"] == "expired")
        // Two readings of one lapse from the same record (a check answered twice, or by two
        // ledgers) derive the same event.
        let first = lapsed.event(
            merchant: "default", provider: Provider("cleeng"), subscription: "S1@cl-1", state: .active, stateSince: 5, knownExpiry: nil)
        let second = lapsed.event(
            merchant: "default", provider: Provider("cleeng"), subscription: "S1@cl-1", state: .active, stateSince: 5, knownExpiry: nil)
        #expect(first != nil && first?.eventId == second?.eventId)
    }

    /// A poller reports readings, not events: the ledger takes a reading only under the ticket
    /// of the check's latest hand-out and derives the event itself, so a poller's key cannot
    /// end a subscription it was not asked about, nor name an event its reading does not make.
    @Test func aPollerCanReportOnlyReadingsOfChecksItWasHandedOut() async throws {
        var core = LedgerCore(store: try temporaryStore(), registry: await testRegistry(), eventMerchants: ["default"])
        let mandate = try authorised(&core, now: 10)
        let store = core.store
        try store.transaction {
            try store.openSubscription(
                SubscriptionOpening(reference: "S1@cl-1", check: ["customerToken": "t", "offerId": "S1"], expiresAt: 50_000),
                provider: Provider("cleeng"), key: OrderKey(merchant: "default", orderId: "cl-1"), checkAt: 10_000, now: 0)
        }
        func checked(_ json: String, now: Int64) throws -> [JSONValue] {
            let request = try LedgerRequest.parse(Array(json.utf8))
            return events(core.handle(request, now: now).1)
        }
        // What a stolen poller key would send: a lapse of a check never handed out, and an event
        // of its own naming a PhonePe mandate revoked.
        let forgedEvent = SubscriptionEvent(
            merchant: "default", provider: .phonepe, subscription: "SUB1", dedupeKey: "forged", kind: .mandateRevoked)
        let forged =
            #"{"merchant":"default","provider":"cleeng","reference":"S1@cl-1","ticket":7,"granted":false,"expiresAt":null,"event":\#(forgedEvent.json.serialized)}"#
        #expect(try checked(#"{"op":"checked","results":[\#(forged)]}"#, now: 10_001).isEmpty)
        guard case .dueChecks(let due) = core.handle(.dueChecks(limit: 10), now: 10_002).0, let first = due.first else {
            Issue.record("the check was not due")
            return
        }
        // Handed out again: the first hand-out's ticket is stale.
        guard case .dueChecks(let again) = core.handle(.dueChecks(limit: 10), now: 10_002 + 3_600_000).0, let second = again.first else {
            Issue.record("the check was not handed out again")
            return
        }
        #expect(first.ticket != second.ticket)
        let stale = EntitlementCheckResult(
            merchant: "default", provider: Provider("cleeng"), reference: "S1@cl-1", ticket: first.ticket,
            reading: EntitlementReading(granted: false, expiresAt: nil))
        #expect(events(core.handle(.checked([stale]), now: 10_003 + 3_600_000).1).isEmpty)
        // The current ticket with the same forged event beside it: the reading's own event, and
        // only that, is recorded.
        let current = forged.replacingOccurrences(of: #""ticket":7"#, with: #""ticket":\#(second.ticket)"#)
        let recorded = try checked(#"{"op":"checked","results":[\#(current)]}"#, now: 10_004 + 3_600_000)
        #expect(recorded.map { $0["type"] } == ["entitlement.expired"])
        let mandateRecord = try #require(try store.subscription(merchant: "default", provider: .phonepe, reference: "SUB1"))
        #expect(mandateRecord["state"] == "active", "the PhonePe mandate \(mandate.orderId) is untouched")
        #expect(core.counters.resultsRefused == 2)
    }
}

import Connectors
import Foundation
import PaypipeCore
import SignerStage
import StageRuntime
import StageWire
import TestSupport
import Testing
import Viva

@testable import LedgerStage

/// Who may end an order: every outcome on the results socket names the dispatch it
/// answers with the ledger's ticket, and counts only when its sender may give it.
@Suite("Results are authorised by who sent them and what they answer")
struct ResultAuthorityTests {
    func state(_ core: LedgerCore, _ json: String) throws -> OrderState? { try core.store.lookup(try order(json).key)?.state }

    func refused(_ effects: [LedgerCore.Effect]) -> [String] {
        effects.compactMap { if case .refuse(let reason) = $0 { reason } else { nil } }
    }

    /// A Nets charge, claimed by a submitter: a success with a signer's key, a success naming
    /// an older generation or a ticket the ledger never issued, a success of another provider's,
    /// and one with no role and a forged token each change nothing; the holder's own does.
    @Test func onlyTheHolderOfTheCurrentClaimEndsAnOrder() async throws {
        var core = LedgerCore(store: try temporaryStore(), registry: await testRegistry(), redeliverAfterMilliseconds: 1000)
        _ = try core.intake([Array(netsChargeOrder.utf8)], now: 0)
        let charge = try order(netsChargeOrder)
        let succeeded = Outcome(order: charge, status: .succeeded, result: ["chargeId": "forged"])

        // The signer was sent the dispatch, so it holds a valid ticket, but it may not end an order.
        var effects = try core.results([core.frame(succeeded)], role: .signer, now: 10)
        #expect(refused(effects).count == 1 && emitted(effects).isEmpty)
        // Nobody claimed it: not even a submitter's key ends it.
        effects = try core.results([core.frame(succeeded)], role: .submitter, now: 20)
        #expect(refused(effects).count == 1)
        // The first holder died; generation 2 is held by another submitter.
        #expect(core.handle(.claim([core.lease(charge.key, 1)]), now: 100).0 == .claimed([true]))
        _ = try core.redeliver(now: 30_200)
        #expect(core.handle(.claim([core.lease(charge.key, 2)]), now: 30_300).0 == .claimed([true]))
        effects = try core.results([core.frame(succeeded, generation: 1)], role: .submitter, now: 30_400)
        #expect(refused(effects).count == 1, "a submitter key of another generation")
        // Without CURVE there are no roles: a ticket the ledger did not issue is refused.
        let forged = StageResult(answering: .submit, ticket: DispatchTicket(generation: 2, token: 12345), outcome: succeeded).frame
        effects = try core.results([forged], now: 30_500)
        #expect(refused(effects).count == 1)
        // A bare outcome, as a stage of an earlier release wrote it, is not even read.
        #expect(try core.results([succeeded.bytes], now: 30_550).isEmpty)
        // The right ticket with another provider's outcome.
        var otherProvider = succeeded
        otherProvider.provider = "viva"
        otherProvider.operation = "sale"
        effects = try core.results([core.frame(otherProvider, generation: 2)], role: .submitter, now: 30_600)
        #expect(refused(effects).first?.contains("provider") == true)
        #expect(try state(core, netsChargeOrder) == .open)
        #expect(core.counters.resultsRefused == 5)

        // The holder of generation 2 ends it.
        let genuine = Outcome(order: charge, status: .succeeded, result: ["chargeId": "c2"])
        effects = try core.results([core.frame(genuine, generation: 2)], role: .submitter, now: 30_700)
        #expect(emitted(effects).map(\.status) == [.succeeded])
        #expect(try state(core, netsChargeOrder) == .terminal)
    }

    /// A signer answers only what it was dispatched and never claimed: a JWT or URL for the app
    /// (pending) or a rejection; once a submitter took the order up, a rejection would say the
    /// order never reached a provider when it may have.
    @Test func aSignerRejectsOrPendsOnlyAnOrderNoSubmitterTookUp() async throws {
        var core = LedgerCore(store: try temporaryStore(), registry: await testRegistry(), redeliverAfterMilliseconds: 1000)
        _ = try core.intake([Array(vivaOrder.utf8), Array(netsChargeOrder.utf8)], now: 0)
        let sale = try order(vivaOrder), charge = try order(netsChargeOrder)
        let url = Outcome(order: sale, status: .pending, result: ["url": "vivapayclient://pay/v1?x=1"])
        #expect(emitted(try core.signed([url], now: 10)).map(\.status) == [.pending])

        #expect(core.handle(.claim([core.lease(charge.key)]), now: 20).0 == .claimed([true]))
        let rejected = Outcome(order: charge, status: .rejected, error: .init(code: "INVALID_PARAM", message: "m"), attempts: 0)
        #expect(refused(try core.signed([rejected], now: 30)).count == 1)
        // The holder itself may still end it rejected: no dispatch before its own was taken up.
        #expect(emitted(try core.results([core.frame(rejected)], role: .submitter, now: 40)).map(\.status) == [.rejected])
    }

    /// A poller answers only pending orders of an operation the pollers own.
    @Test func aPollerAnswersOnlyPolledPendingOrders() async throws {
        var core = LedgerCore(store: try temporaryStore(), registry: await testRegistry())
        _ = try core.intake([Array(cleengOrderJSON.utf8), Array(phonePeOrder.utf8)], now: 0)
        let receipt = try order(cleengOrderJSON), mandate = try order(phonePeOrder)
        _ = try core.submitted(Outcome(order: receipt, status: .pending, result: ["receiptAccepted": true]), now: 10)
        _ = try core.submitted(Outcome(order: mandate, status: .pending, result: ["authRequestId": "AR1"]), now: 10)
        let granted = Outcome(order: receipt, status: .succeeded, result: ["accessGranted": true])
        let completed = Outcome(order: mandate, status: .succeeded, result: ["state": "COMPLETED"])
        let effects = try core.results([core.frame(granted, answering: .poll), core.frame(completed, answering: .poll)], role: .poller, now: 20)
        #expect(emitted(effects).map(\.orderId) == ["cl-1"])
        #expect(refused(effects).count == 1)
        #expect(try state(core, phonePeOrder) == .pending)
    }

    /// A lease has a longest life: its holder's renewals are refused past it, and once the lease
    /// lapses the order goes to review instead of out again.
    @Test func aLeaseHeldPastItsLongestLifeSendsTheOrderToReview() async throws {
        var timers = leaseTimers(leaseMs: 30_000)
        timers.leaseMaxMs = 100_000
        var core = LedgerCore(store: try temporaryStore(), registry: await testRegistry(), timers: timers, redeliverAfterMilliseconds: 1000)
        _ = try core.intake([Array(netsChargeOrder.utf8)], now: 0)
        let key = try order(netsChargeOrder).key
        var now: Int64 = 0
        while now < 100_000 {
            #expect(core.handle(.claim([core.lease(key)]), now: now).0 == .claimed([true]), "renewal at \(now)")
            #expect(try core.redeliver(now: now + 1).isEmpty)
            now += 10_000
        }
        #expect(core.handle(.claim([core.lease(key)]), now: 100_000).0 == .claimed([false]))
        let review = emitted(try core.redeliver(now: 120_001))
        #expect(review.count == 1 && review[0].error?.code == "NEEDS_REVIEW" && review[0].error?.message.contains("leaseMaxMs") == true)
        #expect(try core.store.lookup(key)?.state == .review)
    }

    /// An order the pipeline ended EXPIRED, whose money a genuine callback then reports taken:
    /// the callback's outcome supersedes the first, names it, goes upstream with a new seq and is
    /// what a repeated order now gets; the order is listed for review and counted.
    @Test func aGenuineLateSuccessCorrectsAnOrderEndedWithoutMoney() async throws {
        var core = LedgerCore(store: try temporaryStore(), registry: await testRegistry())
        _ = try core.intake([Array(netsCreateOrder.utf8)], now: 0)
        let create = try order(netsCreateOrder)
        _ = try core.submitted(Outcome(order: create, status: .pending, result: ["paymentId": "p1", "hostedPaymentPageUrl": "https://x"]), now: 10)
        let expired = Outcome(
            order: create, status: .failed, error: .init(code: "EXPIRED", message: "still pending at the provider when the order expired"))
        let ended = try core.results([core.frame(expired, answering: .expiryCheck)], role: .submitter, now: 20)
        let endedSeq = try #require(ended.compactMap { if case .emit(let bytes) = $0 { seq(of: bytes) } else { nil } }.first)

        let paid = Outcome(order: create, status: .succeeded, result: ["paymentId": "p1", "subscriptionId": "s1"])
        let (reply, effects) = core.handle(.settle(create.key, event: "nets|evt-1", outcome: paid), now: 30)
        #expect(reply == .settled(applied: true, duplicate: false, corrected: true))
        let correction = try #require(emitted(effects).first)
        #expect(correction.status == .succeeded && correction.result?["subscriptionId"] == "s1")
        #expect(correction.supersedes == Outcome.Supersedes(seq: endedSeq, status: .failed, code: "EXPIRED"))
        #expect(core.counters.corrections == 1)
        #expect(try core.store.reviewOutcomes(limit: 10).contains { $0.contains("\"supersedes\"") })
        // The correction is what upstream now gets for the order, also when it repeats it.
        let repeated = emitted(try core.intake([Array(netsCreateOrder.utf8)], now: 40))
        #expect(repeated.first?.supersedes?.code == "EXPIRED")
        // Another genuine success changes nothing more; a late failure never corrects.
        #expect(core.handle(.settle(create.key, event: "nets|evt-2", outcome: paid), now: 50).0 == .settled(applied: false, duplicate: false))
        #expect(core.counters.corrections == 1)
    }

    /// A success stays a success: a late failure is no correction.
    @Test func aLateFailureNeverCorrectsASuccess() async throws {
        var core = LedgerCore(store: try temporaryStore(), registry: await testRegistry())
        _ = try core.intake([Array(vivaOrder.utf8)], now: 0)
        let sale = try order(vivaOrder)
        _ = core.handle(.settle(sale.key, event: "viva|t1", outcome: Outcome(order: sale, status: .succeeded, result: ["confirmed": true])), now: 10)
        let failed = Outcome(order: sale, status: .failed, error: .init(code: "VIVA_SALE_FAILED", message: "m"))
        #expect(core.handle(.settle(sale.key, event: "viva|t2", outcome: failed), now: 20).0 == .settled(applied: false, duplicate: false))
        #expect(core.counters.corrections == 0)
    }

    /// PhonePe's authRequestId may be set by the order: two merchants may use the same one, and
    /// a second order of one merchant naming another's is rejected rather than left unindexed.
    @Test func referencesAreKeptPerMerchantAndACollisionIsRejected() async throws {
        let config = try PaypipeConfig.parse(
            Array(
                DemoConfig.text(
                    sandboxURL: "http://127.0.0.1:9",
                    extraMerchants: [
                        "second": [
                            "phonepe": [
                                "baseURL": "http://127.0.0.1:9/phonepe", "merchantId": "M2", "saltKey": "salt-2", "saltIndex": "1",
                                "callbackURL": "https://m2.example/cb", "callbackScheme": "m2app",
                            ]
                        ]
                    ]
                ).utf8))
        var core = LedgerCore(store: try temporaryStore(), registry: await testRegistry(config))
        let first = phonePeAuthInit("ref-a", authRequestId: "SHARED1")
        let second = first.replacingOccurrences(of: #""orderId":"ref-a""#, with: #""orderId":"ref-b","merchant":"second""#)
        let clash = phonePeAuthInit("ref-c", authRequestId: "SHARED1")
        let effects = try core.intake([Array(first.utf8), Array(second.utf8), Array(clash.utf8)], now: 0)
        #expect(dispatches(effects).map(\.order.orderId) == ["ref-a", "ref-b"])
        let rejection = try #require(emitted(effects).first)
        #expect(rejection.orderId == "ref-c" && rejection.error?.code == "REFERENCE_IN_USE")
        #expect(
            core.handle(.lookupRef(.phonepe, "SHARED1", merchant: "default"), now: 1).0
                == .order(try core.store.lookup(OrderKey(merchant: "default", orderId: "ref-a"))))
        guard case .order(let other?) = core.handle(.lookupRef(.phonepe, "SHARED1", merchant: "second"), now: 1).0 else {
            Issue.record("the second merchant's order is found by the same reference")
            return
        }
        #expect(other.key == OrderKey(merchant: "second", orderId: "ref-b"))
        // The rejection is the key's outcome: a repeat gets it again.
        #expect(emitted(try core.intake([Array(clash.utf8)], now: 2)).map(\.error?.code) == ["REFERENCE_IN_USE"])
        // Callback event ids are each merchant's own: the first tenant's callback with an id does
        // not mask the second's with the same id.
        for key in [OrderKey(merchant: "default", orderId: "ref-a"), OrderKey(merchant: "second", orderId: "ref-b")] {
            let stored = try #require(try core.store.lookup(key))
            guard case .order(let order) = Order.decode(json: stored.orderJSON, catalog: core.registry.catalog) else {
                Issue.record("the stored order reads back")
                return
            }
            let done = Outcome(order: order, status: .succeeded, result: ["state": "COMPLETED"])
            #expect(
                core.handle(.settle(key, event: "phonepe|SHARED1|COMPLETED", outcome: done), now: 3).0 == .settled(applied: true, duplicate: false))
        }
    }

    /// With several ledgers over PostgreSQL, a stage's outcome is judged on the order's facts
    /// read under the row's lock, so another ledger's claim cannot land between the judging and
    /// the move: while the judging transaction is open, nobody else can lock the row.
    @Test func anOutcomeIsJudgedUnderItsOrdersRowLock() async throws {
        guard TestStores.postgres != nil else { return }
        let location = TestStores.location()
        var core = LedgerCore(store: try TestStores.open(location), registry: await testRegistry())
        _ = try core.intake([Array(netsChargeOrder.utf8)], now: 0)
        let charge = try order(netsChargeOrder)
        let secondLedger = try TestStores.open(location)
        #expect(core.handle(.claim([core.lease(charge.key, 1)]), now: 10).0 == .claimed([true]))
        let store = core.store
        let pending = Outcome(order: charge, status: .pending, result: ["checkoutUrl": "u"])
        let source = ResultSource.stage(
            .signer, answering: .submit, ticket: store.tickets.ticket(for: charge.key, generation: 1), ticketIsValid: true)
        try store.transaction {
            let recorded = try store.record(pending, serialized: pending.serialized, references: [], polled: false, now: 20, from: source)
            #expect(recorded.refused != nil, "a signer cannot pend an order a submitter took up")
            #expect(throws: (any Error).self, "the row is locked until the judging transaction ends") {
                try secondLedger.db.query(
                    "SELECT 1 FROM orders WHERE merchant=? AND order_id=? FOR UPDATE NOWAIT", [.text(charge.merchant), .text(charge.orderId)])
            }
        }
    }

    /// Viva's inter-app protocol puts ISV_clientSecret in the app's URL: the stored outcome (and
    /// the replay log) hold a mark instead, and the outcome regains the secret on its way upstream.
    @Test func anISVClientSecretIsNeverStoredButReachesUpstream() async throws {
        let secret = "isv-secret-&-kept-out"
        let config = try PaypipeConfig.parse(Array(DemoConfig.text(sandboxURL: "http://127.0.0.1:9").utf8))
        var withISV = config
        withISV.merchants["default"]?.viva?.isvClientSecret = Secret(secret)
        let registry = await testRegistry(withISV)
        let isvSale =
            #"{"v":1,"orderId":"isv-1","provider":"viva","operation":"sale","amount":1050,"currency":"EUR","params":{"isv":{"clientId":"isv-client","amount":50}}}"#
        guard case .outcome(let issued) = SignerCore(registry: registry).sign(try order(isvSale), acceptedAt: 1, nowSeconds: 1) else {
            Issue.record("the sale is signed into its URL")
            return
        }
        let encoded = VivaQueryProbe.encoded(secret)
        #expect(issued.result?["url"]?.stringValue?.contains("ISV_clientSecret=" + encoded) == true)

        let store = try temporaryStore()
        var core = LedgerCore(store: store, registry: registry)
        _ = try core.intake([Array(isvSale.utf8)], now: 0)
        let effects = try core.signed([issued], now: 10)
        let stored = try store.outcomes(after: 0, limit: 10).outcomes.map(\.text)
        #expect(stored.count == 1 && !stored[0].contains(encoded) && stored[0].contains("ISV_clientSecret=!withheld:isvClientSecret!"))
        guard case .emit(let bytes)? = effects.first, let revealer = core.revealer else {
            Issue.record("the outcome goes upstream through a revealer")
            return
        }
        let sent = String(decoding: revealer.reveal(bytes), as: UTF8.self)
        #expect(sent.contains("ISV_clientSecret=" + encoded) && !sent.contains("withheld"))
        #expect(try Outcome.parse(Array(sent.utf8)).result == issued.result)
        // Other outcomes pass untouched.
        let plain = Array(#"{"status":"pending"}"#.utf8)
        #expect(revealer.reveal(plain) == plain)
    }

    @Test func dispatchTokensAreSipHash24() {
        // The reference implementation's test vector: key 00..0f, message 00..0e.
        let (k0, k1): (UInt64, UInt64) = (0x0706_0504_0302_0100, 0x0f0e_0d0c_0b0a_0908)
        #expect(SipHash24.hash((0..<15).map(UInt8.init), k0: k0, k1: k1) == 0xa129_ca61_49be_45e5)
        #expect(SipHash24.hash([], k0: k0, k1: k1) == 0x726f_db47_dd0e_0e31)
        let tickets = DispatchTickets(key: (1, 2))
        let key = OrderKey(merchant: "m", orderId: "o")
        #expect(tickets.isValid(tickets.ticket(for: key, generation: 3), for: key))
        #expect(!tickets.isValid(DispatchTicket(generation: 4, token: tickets.token(for: key, generation: 3)), for: key))
        #expect(!tickets.isValid(tickets.ticket(for: key, generation: 3), for: OrderKey(merchant: "m", orderId: "p")))
        #expect(!DispatchTickets(key: (1, 3)).isValid(tickets.ticket(for: key, generation: 3), for: key))
    }
}

/// Viva's own encoding of a query value, for expectations.
enum VivaQueryProbe {
    static func encoded(_ text: String) -> String { VivaQuery.percentEncode(text) }
}

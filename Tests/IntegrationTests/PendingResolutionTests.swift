import Connectors
import Foundation
import LedgerStage
import NetsEasy
import PaypipeCore
import Sandbox
import SignerStage
import StageRuntime
import StageWire
import SubmitterStage
import TestSupport
import Testing
import TrustPayments

@testable import NetsEasyEmulation
@testable import PhonePeEmulation
@testable import TrustPaymentsEmulation

let tpJwtOrder =
    #"{"v":1,"orderId":"tp-jwt-1","provider":"trustpayments","operation":"subscriptionJwt","amount":1050,"currency":"GBP","params":{"subscriptionType":"RECURRING","unit":"MONTH","frequency":1,"number":1,"finalNumber":12}}"#

/// Short timers for the fake clock: checked 10 s after pending and every 10 s, last check at 100 s.
let pendingTimers: [String: Int64] = ["pendingResolveAfterMs": 10_000, "pendingExpireAfterMs": 100_000]

/// One pending order's life at core level on a fake clock: the ledger's sweeps at explicit
/// times, the signer, and the submission against an in-process provider emulator.
struct PendingChain {
    let config: PaypipeConfig
    let registry: ConnectorRegistry
    var ledger: LedgerCore
    /// The provider: answers one request (an emulator, or a fixed answer).
    let provider: (HTTPRequestSpec) -> HTTPResponseSpec
    /// Every request the provider was sent.
    var sent: [HTTPRequestSpec] = []

    init(provider: @escaping (HTTPRequestSpec) -> HTTPResponseSpec) async throws {
        config = try PaypipeConfig.parse(Array(DemoConfig.text(sandboxURL: "http://127.0.0.1:9", timers: pendingTimers).utf8))
        registry = await testRegistry(config)
        ledger = LedgerCore(store: try temporaryStore(), registry: registry, timers: config.timers)
        self.provider = provider
    }

    /// Accepts the order at `now` and runs its first dispatch; returns the outcomes emitted.
    mutating func accept(_ json: String, now: Int64) async throws -> [Outcome] {
        try await perform(try ledger.intake([Array(json.utf8)], now: now), now: now)
    }

    /// The ledger's redelivery sweep at `now`, with every dispatch it makes carried through.
    mutating func sweep(now: Int64) async throws -> [Outcome] {
        try await perform(try ledger.redeliver(now: now), now: now)
    }

    mutating func perform(_ effects: [LedgerCore.Effect], now: Int64) async throws -> [Outcome] {
        var emitted: [Outcome] = []
        for effect in effects {
            switch effect {
            case .emit(let bytes): emitted.append(try Outcome.parse(bytes))
            case .dispatch(let frame):
                let dispatch = try DispatchFrame.decode(frame, catalog: registry.catalog)
                let outcome: Outcome
                switch SignerCore(registry: registry).sign(dispatch, nowSeconds: Timestamp.nowMilliseconds() / 1000) {
                case .nothing: continue
                case .outcome(let direct): outcome = direct
                case .submit(let work):
                    if let lease = work.lease { _ = ledger.handle(.claim([lease]), now: now) }
                    outcome = submit(work)
                }
                emitted += try await perform(try ledger.results([ledger.frame(outcome, answering: dispatch)], now: now), now: now)
            case .refuse(let reason): Issue.record("the ledger refused: \(reason)")
            case .drop, .poll: continue
            }
        }
        return emitted
    }

    /// A submission driven to its outcome, at most 30 requests.
    mutating func submit(_ work: SubmitWork) -> Outcome {
        var submission = Submission(work: work, connector: registry.connector(for: work.order.provider)!)
        var action = submission.start()
        for _ in 0..<30 {
            switch action {
            case .finish(let outcome): return outcome
            case .send(let request, _):
                sent.append(request)
                action = submission.receive(provider(request), jitter: 0)
            }
        }
        Issue.record("the submission did not finish within 30 requests")
        return Outcome(order: work.order, status: .unknown)
    }
}

/// A Nets emulator that outlives the closures answering with it.
final class NetsProvider {
    var sandbox: NetsSandbox
    init(_ config: NetsConfig) { sandbox = NetsSandbox(secretKey: config.secretKey) }
    func answer(_ request: HTTPRequestSpec) -> HTTPResponseSpec { sandbox.handle(request, now: Timestamp.nowMilliseconds() / 1000) }
}

@Suite("Every pending order ends: status checks and expiry on a fake clock")
struct PendingExpiryTests {
    /// A Nets create accepted at 1 s and answered by the emulator: pending with its paymentId.
    static func createdNetsPayment(_ orderId: String) async throws -> NetsPending {
        let nets = NetsProvider(try #require(try demoConfig().merchants["default"]?.nets))
        var chain = try await PendingChain(provider: nets.answer)
        let created = try await chain.accept(netsCreateOrder(orderId), now: 1_000)
        #expect(created.map(\.status) == [.pending])
        return NetsPending(nets: nets, chain: chain, paymentId: try #require(created.first?.result?["paymentId"]?.stringValue))
    }

    struct NetsPending {
        let nets: NetsProvider
        var chain: PendingChain
        let paymentId: String
    }

    @Test func anAbandonedTrustPaymentsJWTIsCheckedEveryWaitAndExpiresWhenTheQueryFindsNoPayment() async throws {
        let tp = try #require(try demoConfig().merchants["default"]?.trustpayments)
        var chain = try await PendingChain { request in
            TPSandbox.handleWebServices(body: request.body, headers: request.headers, config: tp, records: [])
        }
        let first = try await chain.accept(tpJwtOrder, now: 1_000)
        #expect(first.map(\.status) == [.pending])
        let jwt = first.first?.result?["jwt"]
        #expect(try await chain.sweep(now: 10_000).isEmpty)
        // First check after the wait: TRANSACTIONQUERY by orderreference finds nothing, so the
        // order stays pending with the same JWT.
        let check = try await chain.sweep(now: 11_500)
        #expect(check.map(\.status) == [.pending] && check.first?.result?["jwt"] == jwt)
        #expect(chain.sent.count == 1)
        let body = try JSONValue.parse(chain.sent[0].body)
        let filter = body["request"]?.arrayValue?.first?["filter"]?["orderreference"]?.arrayValue?.first
        #expect(filter?["value"]?.stringValue == "tp-jwt-1")
        #expect(try await chain.sweep(now: 12_000).isEmpty)
        #expect(try await chain.sweep(now: 21_600).map(\.status) == [.pending])
        // Pending 100 s: the last check ends it, EXPIRED, as the provider took nothing.
        let last = try await chain.sweep(now: 101_500)
        #expect(last.map(\.status) == [.failed])
        #expect(last.first?.error?.code == "EXPIRED")
        #expect(try await chain.sweep(now: 10_000_000).isEmpty)
        #expect(chain.sent.count == 3)
    }

    @Test func aTrustPaymentsJWTWhoseProviderCannotAnswerAtExpiryNeedsReview() async throws {
        var chain = try await PendingChain { _ in HTTPResponseSpec(status: 503) }
        _ = try await chain.accept(tpJwtOrder, now: 1_000)
        // Before expiry an unanswered check changes nothing upstream.
        #expect(try await chain.sweep(now: 11_500).isEmpty)
        let last = try await chain.sweep(now: 101_500)
        #expect(last.map(\.status) == [.unknown])
        #expect(last.first?.error?.code == Outcome.ErrorInfo.needsReviewCode)
        #expect(try await chain.sweep(now: 10_000_000).isEmpty)
    }

    @Test func anAbandonedVivaSaleCannotBeCheckedAndNeedsReviewAtExpiry() async throws {
        var chain = try await PendingChain { _ in
            Issue.record("a Viva sale has no status call to send")
            return HTTPResponseSpec(status: 500)
        }
        #expect(try await chain.accept(vivaOrder, now: 1_000).map(\.status) == [.pending])
        // Nothing is dispatched before expiry: no call could tell.
        #expect(try await chain.sweep(now: 11_500).isEmpty)
        #expect(try await chain.sweep(now: 60_000).isEmpty)
        let last = try await chain.sweep(now: 101_500)
        #expect(last.map(\.status) == [.unknown])
        #expect(last.first?.error?.code == Outcome.ErrorInfo.needsReviewCode)
        #expect(chain.ledger.counters.statusChecks == 1)
        #expect(try await chain.sweep(now: 10_000_000).isEmpty)
    }

    @Test func anAbandonedNetsCreateIsCheckedWithGetPaymentAndExpires() async throws {
        var payment = try await Self.createdNetsPayment("nets-abandoned-1")
        // The create registered its webhooks with the configured URL and authorization.
        let hooks = try #require(payment.nets.sandbox.payments[payment.paymentId]?.webhooks)
        #expect(
            Set(hooks.map(\.eventName))
                == ["payment.checkout.completed", "payment.reservation.failed", "payment.charge.created.v2", "payment.charge.failed.v2"])
        #expect(hooks.allSatisfy { $0.url == "http://127.0.0.1:8080/callbacks/nets" && $0.authorization == "demoWebhookAuth123" })

        let check = try await payment.chain.sweep(now: 11_500)
        #expect(check.map(\.status) == [.pending] && check.first?.result?["paymentId"]?.stringValue == payment.paymentId)
        #expect(payment.chain.sent.last?.method == .GET && payment.chain.sent.last?.url.hasSuffix("/v1/payments/\(payment.paymentId)") == true)
        let last = try await payment.chain.sweep(now: 101_500)
        #expect(last.map(\.status) == [.failed])
        #expect(last.first?.error?.code == "EXPIRED")
    }

    @Test func aNetsCreateWhoseWebhookNeverCameSucceedsThroughGetPaymentWithItsSubscription() async throws {
        var payment = try await Self.createdNetsPayment("nets-nohook-1")
        _ = payment.nets.sandbox.completeCheckout(paymentId: payment.paymentId, timestampMilliseconds: 5_000)
        // The first payment's charge (`nets.firstPayment: charge`) follows as an order of its own.
        let done = try await payment.chain.sweep(now: 11_500).filter { $0.operation == "createSubscription" }
        #expect(done.map(\.status) == [.succeeded])
        #expect(done.first?.result?["paymentId"]?.stringValue == payment.paymentId)
        #expect(done.first?.result?["subscriptionId"]?.stringValue == payment.nets.sandbox.payments[payment.paymentId]?.subscriptionId)
        #expect(try await payment.chain.sweep(now: 10_000_000).isEmpty)
    }

    @Test func aNetsCheckoutTheCustomerAbandonedEndsAtTheNextCheck() async throws {
        var payment = try await Self.createdNetsPayment("nets-terminated-1")
        payment.nets.sandbox.terminateCheckout(paymentId: payment.paymentId, timestampMilliseconds: 5_000)
        let done = try await payment.chain.sweep(now: 11_500)
        #expect(done.map(\.status) == [.failed])
        #expect(done.first?.error?.code == "NETS_CHECKOUT_ABANDONED")
    }
}

@Suite("Status-check readings: confirmed nothing taken, taken, cannot tell")
struct PendingReadingTests {
    func netsRead(_ status: Int, _ body: String) -> ProviderVerdict {
        NetsPendingCreate.read(HTTPResponseSpec(status: status, body: Array(body.utf8)), paymentId: "pay1")
    }

    @Test func netsGetPaymentReadings() {
        // Nets' SubscriptionPaymentDetails: a subscription id means the checkout completed.
        #expect(
            netsRead(200, #"{"payment":{"created":"2019-07-18T10:00:00Z","subscription":{"id":"d079718b-ff63-45dd-947b-4950c023750f"}}}"#)
                == .succeeded(["paymentId": "pay1", "subscriptionId": "d079718b-ff63-45dd-947b-4950c023750f"]))
        #expect(
            netsRead(200, #"{"payment":{"summary":{"reservedAmount":9900},"subscription":{"id":"sub1"}}}"#)
                == .succeeded(["paymentId": "pay1", "subscriptionId": "sub1", "amount": 9900]))
        // Open, nothing reserved: nothing was taken (yet).
        #expect(netsRead(200, #"{"payment":{"paymentId":"pay1","summary":{}}}"#) == .pending(["paymentId": "pay1"]))
        // Terminated, nothing reserved: abandoned, final.
        if case .failed(let code, _) = netsRead(200, #"{"payment":{"summary":{},"terminated":"2024-01-01T00:00:00Z"}}"#) {
            #expect(code == "NETS_CHECKOUT_ABANDONED")
        } else {
            Issue.record("a terminated checkout fails")
        }
        // Money moved but no subscription, or an answer about nothing: cannot tell.
        for (status, body) in [(200, #"{"payment":{"summary":{"chargedAmount":9900}}}"#), (200, "{}"), (404, ""), (401, "")] {
            if case .unknown = netsRead(status, body) {} else { Issue.record("\(status) \(body) cannot tell") }
        }
        if case .retry = netsRead(503, "") {} else { Issue.record("a 503 is asked again") }
    }

    @Test func trustPaymentsOrderQueryReadings() async throws {
        let config = try demoConfig()
        let tp = try #require(config.merchants["default"]?.trustpayments)
        let connector = try #require(await testRegistry(config).connector(for: .trustpayments))
        let o = try order(tpJwtOrder)
        func reading(records: [[String: JSONValue]], status: Int = 200) throws -> ProviderVerdict {
            try read(connector, o, records: records, config: tp, status: status)
        }
        #expect(try reading(records: []) == .pending(["found": 0]))
        let paid: [String: JSONValue] = [
            "requesttypedescription": "AUTH", "orderreference": "tp-jwt-1", "sitereference": "test_site12345", "errorcode": "0",
            "baseamount": "1050", "currencyiso3a": "GBP", "transactionreference": "57-9-1",
        ]
        if case .succeeded(let result) = try reading(records: [paid]) {
            #expect(result["transactionReference"]?.stringValue == "57-9-1" && result["amount"] == 1050)
        } else {
            Issue.record("a paid AUTH succeeds")
        }
        var uncertain = paid
        uncertain["errorcode"] = "70001"
        if case .unknown = try reading(records: [uncertain]) {} else { Issue.record("70001 cannot tell") }
        if case .unknown = try reading(records: [], status: 401) {} else { Issue.record("a refused query says nothing about the payment") }
    }

    /// The connector's reading of its own signed status check, answered by the TP emulator.
    func read(
        _ connector: any ProviderConnector, _ o: Order, records: [[String: JSONValue]], config: TrustPaymentsConfig, status: Int
    ) throws -> ProviderVerdict {
        let work = try #require(statusWork(connector, o))
        var submission = Submission(work: work, connector: connector, policy: SubmissionPolicy())
        guard case .send(let request, _) = submission.start() else { throw EnvelopeTestError("no request") }
        var answer = TPSandbox.handleWebServices(
            body: request.body, headers: request.headers, config: config, records: records)
        answer.status = status == 200 ? answer.status : status
        switch submission.receive(answer, jitter: 0) {
        case .finish(let outcome) where outcome.status == .pending: return .pending(outcome.result ?? [:])
        case .finish(let outcome) where outcome.status == .succeeded: return .succeeded(outcome.result ?? [:])
        case .finish(let outcome): return .failed(code: OutcomeErrorCode(rawValue: outcome.error?.code ?? ""), message: outcome.error?.message ?? "")
        case .send: return .unknown(reason: "asked again")
        }
    }

    func statusWork(_ connector: any ProviderConnector, _ o: Order) -> SubmitWork? {
        if case .submit(let work) = SignerCore(registry: ConnectorRegistry(connectors: [connector])).sign(
            o, acceptedAt: 1, nowSeconds: 1, purpose: .statusCheck, pending: ["found": 0])
        {
            return work
        }
        return nil
    }
}

@Suite("Every pending order ends, through real processes", .serialized)
struct PendingFlowTests {
    static func outcome(_ outcomes: [Outcome], _ orderId: String) -> Outcome? {
        outcomes.last { $0.orderId == orderId && ($0.status.isTerminal || $0.error?.needsReview == true) }
    }

    @Test func aNetsCreateCompletesThroughTheWebhookItRegistered() async throws {
        let h = try await PipelineHarness(
            sandboxConfiguration: SandboxConfiguration(port: 0).with {
                $0.phonePe.callbackDelayMilliseconds = 3_600_000
                $0.nets.completeCheckoutAfterMilliseconds = 300
            })
        defer { Task { await h.shutdown() } }
        try h.startSigner()
        try h.startSubmitter()
        try h.startCallbacks()
        try await h.send(netsCreateOrder("nets-hook-1"))
        let outcomes = try await h.collect(timeout: .seconds(20)) { Self.outcome($0, "nets-hook-1") != nil }
        let done = try #require(Self.outcome(outcomes, "nets-hook-1"))
        #expect(done.status == .succeeded)
        #expect(done.result?["subscriptionId"]?.stringValue?.isEmpty == false)
        let metrics = httpGet("http://127.0.0.1:\(h.callbacksMetricsPort)/metrics") ?? ""
        #expect(metrics.contains(#"paypipe_callbacks_total{route="nets",result="applied"} 1"#))
        await h.shutdown()
    }

    @Test func withoutAWebhookURLTheSandboxSendsNoneAndGetPaymentEndsTheOrder() async throws {
        let h = try await PipelineHarness(
            sandboxConfiguration: SandboxConfiguration(port: 0).with {
                $0.phonePe.callbackDelayMilliseconds = 3_600_000
                $0.nets.completeCheckoutAfterMilliseconds = 300
            },
            timers: ["pendingResolveAfterMs": 1_500, "pendingExpireAfterMs": 60_000], leavingOut: ["nets.webhookURL"])
        defer { Task { await h.shutdown() } }
        try h.startSigner()
        try h.startSubmitter()
        try h.startCallbacks()
        try await h.send(netsCreateOrder("nets-nohook-1"))
        let outcomes = try await h.collect(timeout: .seconds(20)) { Self.outcome($0, "nets-nohook-1") != nil }
        #expect(outcomes.first?.status == .pending)
        let done = try #require(Self.outcome(outcomes, "nets-nohook-1"))
        #expect(done.status == .succeeded)
        #expect(done.result?["subscriptionId"]?.stringValue?.isEmpty == false)
        let metrics = httpGet("http://127.0.0.1:\(h.callbacksMetricsPort)/metrics") ?? ""
        #expect(!metrics.contains(#"route="nets""#))
        await h.shutdown()
    }

    @Test func abandonedTrustPaymentsVivaAndNetsOrdersEndExpiredOrNeedingReview() async throws {
        let h = try await PipelineHarness(
            sandboxConfiguration: SandboxConfiguration(port: 0).with {
                $0.phonePe.callbackDelayMilliseconds = 3_600_000
                $0.nets.completeCheckoutAfterMilliseconds = nil
            },
            timers: ["pendingResolveAfterMs": 1_000, "pendingExpireAfterMs": 3_000])
        defer { Task { await h.shutdown() } }
        try h.startSigner()
        try h.startSubmitter()
        for json in [tpJwtOrder, vivaOrder, netsCreateOrder("nets-abandoned-1")] { try await h.send(json) }
        let ids = ["tp-jwt-1", "viva-1", "nets-abandoned-1"]
        let outcomes = try await h.collect(timeout: .seconds(25)) { outcomes in ids.allSatisfy { Self.outcome(outcomes, $0) != nil } }
        for id in ids { #expect(outcomes.first { $0.orderId == id }?.status == .pending) }
        #expect(Self.outcome(outcomes, "tp-jwt-1")?.error?.code == "EXPIRED")
        // Expiry terminates the Nets checkout; a status read in flight meanwhile can land after
        // the terminate and find the payment terminated, which reads as abandoned. Either way
        // the order failed with nothing taken.
        let nets = Self.outcome(outcomes, "nets-abandoned-1")
        #expect(nets?.status == .failed && ["EXPIRED", "NETS_CHECKOUT_ABANDONED"].contains(nets?.error?.code), "\(String(describing: nets))")
        let viva = Self.outcome(outcomes, "viva-1")
        #expect(viva?.status == .unknown && viva?.error?.code == Outcome.ErrorInfo.needsReviewCode)
        await h.shutdown()
    }
}

import Foundation
import NetsEasy
import PaypipeCore
import Sandbox
import SignerStage
import StageRuntime
import StageWire
import TestSupport
import Testing
import TrustPayments

@testable import SubmitterStage
@testable import TrustPaymentsEmulation

/// Before the pipeline ends an order EXPIRED it stops what it can at the provider, so that the
/// customer cannot pay once upstream has been told nothing was taken.
@Suite("Nothing is taken after an order expires")
struct ExpiryCancelTests {
    static let paymentId = "025400006091b1ef6937598058c4e487"

    static func payment(terminated: Bool = false, subscription: Bool = false) -> HTTPResponseSpec {
        var payment: [String: JSONValue] = ["paymentId": .string(paymentId), "summary": [:]]
        if terminated { payment["terminated"] = "2026-11-28T10:00:00Z" }
        if subscription {
            payment["subscription"] = ["id": "d079718bff6345dd947b4950c023750f"]
            payment["summary"] = ["reservedAmount": 9900]
        }
        return HTTPResponseSpec(
            status: 200, headers: [HTTPHeader("Content-Type", "application/json")], body: JSONValue.object(["payment": .object(payment)]).bytes)
    }

    func expiryCheck() async throws -> (SubmitWork, any ProviderConnector) {
        let signer = SignerCore(registry: await testRegistry())
        guard
            case .submit(let work) = signer.sign(
                try order(netsCreateOrder), acceptedAt: 1, nowSeconds: 1_795_237_200, purpose: .expiryCheck,
                pending: ["paymentId": .string(Self.paymentId)])
        else { throw EnvelopeTestError("the expiry check is signed") }
        return (work, await connector(for: work))
    }

    /// A Nets checkout still open at the order's last check: terminated, read again, and only
    /// then EXPIRED.
    @Test func anOpenNetsCheckoutIsTerminatedThenReadAgainBeforeItExpires() async throws {
        let (work, connector) = try await expiryCheck()
        var submission = Submission(work: work, connector: connector)
        guard case .send(let read, _) = submission.start() else { throw EnvelopeTestError("the payment is read first") }
        #expect(read.method == .GET && read.url.hasSuffix("/v1/payments/\(Self.paymentId)"))
        guard case .send(let terminate, _) = submission.receive(Self.payment(), jitter: 0) else {
            throw EnvelopeTestError("an open checkout is terminated")
        }
        #expect(terminate.method == .PUT && terminate.url.hasSuffix("/v1/payments/\(Self.paymentId)/terminate"))
        #expect(terminate.header("Authorization") == read.header("Authorization"))
        guard case .send(let again, _) = submission.receive(HTTPResponseSpec(status: 204), jitter: 0) else { throw EnvelopeTestError("read again") }
        #expect(again == read)
        guard case .finish(let outcome) = submission.receive(Self.payment(terminated: true), jitter: 0) else { throw EnvelopeTestError("an outcome") }
        #expect(outcome.status == .failed && outcome.error?.code == "EXPIRED")
    }

    /// The customer paid just before the terminate: the read after it shows the subscription,
    /// and the order succeeds; a checkout that cannot be stopped goes to review.
    @Test func aCheckoutCompletedMeanwhileSucceedsAndOneThatCannotBeStoppedGoesToReview() async throws {
        let (work, connector) = try await expiryCheck()
        var paid = Submission(work: work, connector: connector)
        _ = paid.start()
        _ = paid.receive(Self.payment(), jitter: 0)
        _ = paid.receive(HTTPResponseSpec(status: 400, body: Array(#"{"errors":{"paymentId":["completed"]}}"#.utf8)), jitter: 0)
        guard case .finish(let outcome) = paid.receive(Self.payment(subscription: true), jitter: 0) else { throw EnvelopeTestError("an outcome") }
        #expect(outcome.status == .succeeded && outcome.result?["subscriptionId"] != nil)

        var stuck = Submission(work: work, connector: connector)
        _ = stuck.start()
        _ = stuck.receive(Self.payment(), jitter: 0)
        _ = stuck.receive(HTTPResponseSpec(status: 500), jitter: 0)
        var action = stuck.receive(Self.payment(), jitter: 0)
        for _ in 0..<10 {
            guard case .send = action else { break }
            action = stuck.receive(Self.payment(), jitter: 0)
        }
        guard case .finish(let review) = action else { throw EnvelopeTestError("bounded") }
        #expect(review.status == .unknown && review.error?.code == "NEEDS_REVIEW")
    }

    /// The Trust Payments SDK JWT ends before its order's last check (`exp`), and the gateway
    /// (here the sandbox, by its own JWT code) takes no payment on an expired one.
    @Test func theTrustPaymentsJWTExpiresBeforeTheOrderDoes() async throws {
        var timers = PaypipeConfig.Timers()
        timers.pendingExpireAfterMs = 10_000
        var config = try demoConfig()
        config.timers = timers
        let tp =
            #"{"v":1,"orderId":"tp-exp-1","provider":"trustpayments","operation":"subscriptionJwt","amount":1050,"currency":"GBP","params":{"subscriptionType":"RECURRING","unit":"MONTH","frequency":1,"finalNumber":12}}"#
        let issuedAt = Timestamp.nowMilliseconds() / 1000
        guard case .outcome(let pending) = SignerCore(registry: await testRegistry(config)).sign(try order(tp), acceptedAt: 1, nowSeconds: issuedAt),
            let jwt = pending.result?["jwt"]?.stringValue
        else { throw EnvelopeTestError("the JWT is issued") }
        let claimsBytes = try #require(Base64.decode(String(jwt.split(separator: ".")[1]), .url))
        let claims = try #require(try JSONValue.parse(claimsBytes).objectValue)
        #expect(claims["exp"]?.integerValue == issuedAt + 9)
        let settings = try #require(config.merchants["default"]?.trustpayments)
        #expect(throws: Never.self) { try TPSandbox.processPayment(jwt: jwt, config: settings, now: issuedAt + 8) }
        #expect(throws: TPSandbox.RequestError.self) { try TPSandbox.processPayment(jwt: jwt, config: settings, now: issuedAt + 9) }
        #expect(TPJWTSigner.lifetimeSeconds(pendingExpireAfterMs: 86_400_000) == 77_760)
    }
}

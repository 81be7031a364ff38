import Cleeng
import Connectors
import HTTPTransport
import PaypipeCore
import SignerStage
import StageRuntime
import StageWire
import SubmitterStage
import Synchronization
import TestSupport
import Testing

@testable import LedgerStage
@testable import PollerStage

@Suite("Signer and submission: status checks after a missed callback")
struct StatusCheckTests {
    @Test func theStatusCheckIsSignedAndAStillPendingStatusWaitsUntilTheLastCheckEndsIt() async throws {
        let config = try PaypipeConfig.parse(Array(DemoConfig.text(sandboxURL: "http://127.0.0.1:9").utf8))
        let o = try order(phonePeOrder)
        let pending: [String: JSONValue] = ["authRequestId": "AR1", "redirectURL": "ppe://x"]
        for purpose in [DispatchPurpose.statusCheck, .expiryCheck] {
            guard
                case .submit(let work) = SignerCore(registry: await testRegistry(config)).sign(
                    o, acceptedAt: 1, nowSeconds: 1, purpose: purpose, pending: pending)
            else {
                Issue.record("expected signed work")
                return
            }
            #expect(work.purpose == purpose)
            #expect(work.request.method == .GET)
            var submission = Submission(work: work, connector: await connector(for: work))
            guard case .send(let request, _) = submission.start() else {
                Issue.record("expected a send")
                return
            }
            #expect(request == work.request)
            let stillPending =
                #"{"success":true,"code":"SUCCESS","data":{"merchantId":"MERCHANTUAT","authRequestId":"\#(work.context["authRequestId"]!.stringValue!)","subscriptionDetails":{"subscriptionId":"SUB1","state":"CREATED"}}}"#
            let action = submission.receive(HTTPResponseSpec(status: 200, headers: [], body: Array(stillPending.utf8)), jitter: 0)
            guard case .finish(let outcome) = action else {
                Issue.record("expected an outcome")
                return
            }
            if purpose == .statusCheck {
                // Not yet authorised: the order stays pending with the answer the customer has.
                #expect(outcome.status == .pending && outcome.result == pending)
            } else {
                #expect(outcome.status == .failed)
                #expect(outcome.error?.code == "EXPIRED")
            }
        }
        #expect(
            SignerCore(registry: await testRegistry(config)).sign(try order(vivaOrder), acceptedAt: 1, nowSeconds: 1, purpose: .statusCheck)
                == .nothing)
    }
}

import Connectors
import Foundation
import LedgerStage
import PaypipeCore
import PhonePe
import Sandbox
import SignerStage
import StageRuntime
import StageWire
import TestSupport
import Testing
import TrustPayments

@testable import PhonePeEmulation
@testable import SubmitterStage
@testable import TrustPaymentsEmulation

@Suite("Submission state machine")
struct SubmissionTests {
    func phonePeWork() async throws -> (SubmitWork, PhonePeSandbox) {
        let config = try demoConfig()
        guard
            case .submit(let work) = SignerCore(registry: await testRegistry(config)).sign(
                try order(phonePeOrder), acceptedAt: 1, nowSeconds: 1_795_237_200)
        else {
            throw EnvelopeTestError("no work")
        }
        return (work, PhonePeSandbox(config: config.merchants["default"]!.phonepe!))
    }

    @Test func aGenuineResponseEndsPendingWithTheRedirect() async throws {
        let (work, sandbox) = try await phonePeWork()
        var submission = Submission(work: work, connector: await connector(for: work))
        guard case .send(let request, 0) = submission.start() else {
            Issue.record("expected a send")
            return
        }
        let reply = sandbox.handleAuthInit(path: "/v3/recurring/auth/init", headers: request.headers, body: request.body)
        guard case .finish(let outcome) = submission.receive(reply.response, jitter: 0.5) else {
            Issue.record("expected an outcome")
            return
        }
        #expect(outcome.status == .pending)
        #expect(outcome.result?["redirectURL"]?.stringValue?.hasPrefix("ppe://") == true)
        #expect(outcome.attempts == 1)
    }

    @Test func anUnknownOutcomeIsResolvedWithTheStatusCallNeverAResend() async throws {
        let (work, sandbox) = try await phonePeWork()
        var submission = Submission(work: work, connector: await connector(for: work))
        _ = submission.start()
        let action = submission.fail(.mayHaveBeenSent("read timeout"), jitter: 0)
        guard case .send(let statusRequest, let delay) = action else {
            Issue.record("expected the status call")
            return
        }
        #expect(statusRequest == work.resolve)
        #expect(statusRequest.method == .GET)
        #expect(delay > 0)
        let mandate = try #require(
            sandbox.handleAuthInit(path: "/v3/recurring/auth/init", headers: work.request.headers, body: work.request.body).mandate)
        let status = sandbox.authStatusResponse(for: mandate, outcome: .completed)
        guard case .finish(let outcome) = submission.receive(status, jitter: 0) else {
            Issue.record("expected an outcome")
            return
        }
        #expect(outcome.status == .succeeded)
    }

    @Test func transientFailuresAreRetriedWithinTheBudgetThenFail() async throws {
        let (work, _) = try await phonePeWork()
        var policy = SubmissionPolicy()
        policy.maxAttempts = 3
        var submission = Submission(work: work, connector: await connector(for: work), policy: policy)
        _ = submission.start()
        guard case .send(let again, let delay) = submission.fail(.notSent("connection refused"), jitter: 0.5), again == work.request else {
            Issue.record("expected a retry of the same request")
            return
        }
        #expect(delay >= 50)
        _ = submission.fail(.notSent("connection refused"), jitter: 0.5)
        guard case .finish(let outcome) = submission.fail(.notSent("connection refused"), jitter: 0.5) else {
            Issue.record("expected to give up")
            return
        }
        #expect(outcome.status == .failed)
        #expect(outcome.error?.code == "PROVIDER_UNAVAILABLE")
        #expect(outcome.attempts == 3)
    }

    @Test func anOutcomeThatStaysUnknownIsReportedUnknownNotFailed() async throws {
        let (work, _) = try await phonePeWork()
        var policy = SubmissionPolicy()
        policy.maxResolveAttempts = 2
        var submission = Submission(work: work, connector: await connector(for: work), policy: policy)
        _ = submission.start()
        _ = submission.fail(.mayHaveBeenSent("timeout"), jitter: 0)
        _ = submission.fail(.mayHaveBeenSent("timeout"), jitter: 0)
        guard case .finish(let outcome) = submission.fail(.mayHaveBeenSent("timeout"), jitter: 0) else {
            Issue.record("expected an outcome")
            return
        }
        #expect(outcome.status == .unknown)
        #expect(!outcome.status.isTerminal)
    }

    @Test func trustPaymentsBankErrorIsRetriedAndADeclineFails() async throws {
        let config = try demoConfig()
        let tp = config.merchants["default"]!.trustpayments!
        let update =
            #"{"v":1,"orderId":"tu-1","provider":"trustpayments","operation":"transactionUpdate","params":{"transactionReference":"1-2-3","updates":{"baseamount":60010}}}"#
        guard
            case .submit(let work) = SignerCore(registry: await testRegistry(config)).sign(
                try order(update), acceptedAt: 1, nowSeconds: 1_795_237_200)
        else {
            Issue.record("expected work")
            return
        }
        var submission = Submission(work: work, connector: await connector(for: work))
        guard case .send(let request, _) = submission.start() else { return }
        let records: [[String: JSONValue]] = [
            [
                "transactionreference": "1-2-3", "sitereference": "test_site12345", "requesttypedescription": "AUTH", "errorcode": "0",
                "orderreference": "x",
            ]
        ]
        let response = TPSandbox.handleWebServices(body: request.body, headers: request.headers, config: tp, records: records)
        let action = submission.receive(response, jitter: 0)
        guard case .send(let retried, let delay) = action else {
            Issue.record("60010 must be retried, got \(action)")
            return
        }
        #expect(retried == work.request)
        #expect(delay > 0)
    }
}

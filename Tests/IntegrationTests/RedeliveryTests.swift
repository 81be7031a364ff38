import Connectors
import Foundation
import LedgerStage
import NetsEasy
import PaypipeCore
import SignerStage
import StageRuntime
import StageWire
import SubmitterStage
import TestSupport
import Testing

@Suite("Redelivered work is resolved before it is submitted again")
struct RedeliveryTests {
    func signedWork(_ json: String, generation: Int64) async throws -> SubmitWork {
        let core = SignerCore(registry: await testRegistry())
        guard case .submit(let work) = core.sign(try order(json), acceptedAt: 1, nowSeconds: 1_800_000_000, generation: generation) else {
            throw EnvelopeTestError("not signed into work: \(json)")
        }
        return work
    }

    @Test func aRedeliveredPhonePeAuthInitAsksTheStatusFirstAndInitiatesOnlyWhenNotFound() async throws {
        let work = try await signedWork(phonePeOrder, generation: 2)
        var submission = Submission(work: work, connector: await connector(for: work))
        let resolve = try #require(work.resolve)
        #expect(submission.start() == .send(resolve, afterMilliseconds: 0))
        let notFound = HTTPResponseSpec(status: 404, body: Array(#"{"success":false,"code":"TRANSACTION_NOT_FOUND","message":"none"}"#.utf8))
        #expect(submission.receive(notFound, jitter: 0) == .send(work.request, afterMilliseconds: 0))
    }

    @Test func aRedeliveredPhonePeAuthInitThatPhonePeKnowsIsNotSentAgain() async throws {
        let work = try await signedWork(phonePeOrder, generation: 3)
        var submission = Submission(work: work, connector: await connector(for: work))
        _ = submission.start()
        // Still unknown after the resolution budget: review, never a second auth/init.
        var action = submission.receive(HTTPResponseSpec(status: 503), jitter: 0)
        for _ in 0..<10 {
            guard case .send(let request, _) = action else { break }
            #expect(request == work.resolve)
            action = submission.receive(HTTPResponseSpec(status: 503), jitter: 0)
        }
        guard case .finish(let outcome) = action else {
            Issue.record("the budget is bounded")
            return
        }
        #expect(outcome.status == .unknown && outcome.error?.code == "NEEDS_REVIEW")
    }

    /// A redelivered Nets charge is never sent again to learn whether the first copy was
    /// charged: its status is read by its Idempotency-Key. Charged: the order succeeds with
    /// no second POST. Unknown to Nets while the key is young: sent again. Unknown to Nets for an
    /// order older than Nets can be trusted to remember the key: review.
    @Test func aRedeliveredNetsChargeReadsItsStatusByItsKeyBeforeAnythingElse() async throws {
        var work = try await signedWork(netsChargeOrder, generation: 2)
        work.acceptedAt = Timestamp.nowMilliseconds() - 1000
        let status = try #require(NetsPayments.chargeStatusRequest(following: work.request))
        #expect(status.header("Idempotency-Key") == work.request.header("Idempotency-Key"))
        let charged = HTTPResponseSpec(status: 200, body: Array(#"{"paymentId":"p1","chargeId":"c1","completed":true}"#.utf8))
        var first = Submission(work: work, connector: await connector(for: work))
        #expect(first.start() == .send(status, afterMilliseconds: 0))
        guard case .finish(let outcome) = first.receive(charged, jitter: 0) else {
            Issue.record("a charge Nets made ends the order")
            return
        }
        #expect(outcome.status == .succeeded && outcome.result?["chargeId"] == "c1")

        var young = Submission(work: work, connector: await connector(for: work))
        _ = young.start()
        #expect(young.receive(HTTPResponseSpec(status: 404), jitter: 0) == .send(work.request, afterMilliseconds: 0))

        work.acceptedAt = Timestamp.nowMilliseconds() - PaypipeConfig.Timers()[.netsIdempotencyKeyLifetime] - 1000
        var old = Submission(work: work, connector: await connector(for: work))
        var action = old.start()
        for _ in 0..<10 {
            guard case .send(let request, _) = action else { break }
            #expect(request == status, "only the status read is sent")
            action = old.receive(HTTPResponseSpec(status: 404), jitter: 0)
        }
        guard case .finish(let review) = action else {
            Issue.record("the reads are bounded")
            return
        }
        #expect(review.status == .unknown && review.error?.code == "NEEDS_REVIEW")
    }

    @Test func aRedeliveredTrustPaymentsUpdateIsAppliedOnlyWhenNotInPlace() async throws {
        let update =
            #"{"v":1,"orderId":"tu-1","provider":"trustpayments","operation":"transactionUpdate","params":{"transactionReference":"1-2-3","updates":{"transactionactive":1}}}"#
        let work = try await signedWork(update, generation: 2)
        let queryReference = try #require(work.context["queryReference"]?.stringValue)
        /// Trust Payments' TRANSACTIONQUERY answer with the transaction's current `transactionactive`.
        func queried(active: String) -> HTTPResponseSpec {
            let record: JSONValue = ["transactionreference": "1-2-3", "transactionactive": .string(active)]
            let body: JSONValue = [
                "requestreference": .string(queryReference), "version": "1.00", "secrand": "ab12",
                "response": [["errorcode": "0", "found": "1", "requesttypedescription": "TRANSACTIONQUERY", "records": [record]]],
            ]
            return HTTPResponseSpec(status: 200, headers: [HTTPHeader("Content-Type", "application/json")], body: body.bytes)
        }
        var inPlace = Submission(work: work, connector: await connector(for: work))
        #expect(inPlace.start() == .send(try #require(work.resolve), afterMilliseconds: 0))
        guard case .finish(let outcome) = inPlace.receive(queried(active: "1"), jitter: 0) else {
            Issue.record("an update in place ends the order without sending it again")
            return
        }
        #expect(outcome.status == .succeeded)
        var notApplied = Submission(work: work, connector: await connector(for: work))
        _ = notApplied.start()
        #expect(notApplied.receive(queried(active: "0"), jitter: 0) == .send(work.request, afterMilliseconds: 0))
    }
}

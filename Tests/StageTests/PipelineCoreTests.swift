import Foundation
import PaypipeCore
import PhonePe
import Connectors
import LedgerStage
import SignerStage
import StageRuntime
import StageWire
import SubmitterStage
import Sandbox
import Testing
import TrustPayments

func demoConfig() throws -> PaypipeConfig {
    try PaypipeConfig.parse(Array(DemoConfig.text(sandboxURL: "http://127.0.0.1:9").utf8))
}

func order(_ json: String) throws -> Order {
    guard case .order(let order) = Order.decode(json: json, catalog: testCatalog) else { throw EnvelopeTestError("not an order: \(json)") }
    return order
}

struct EnvelopeTestError: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}

let phonePeOrder = #"{"v":1,"orderId":"pp-1","provider":"phonepe","operation":"authInit","amount":39900,"currency":"INR","params":{"merchantUserId":"U1","subscriptionId":"SUB1"}}"#
let tpQueryOrder = #"{"v":1,"orderId":"tq-1","provider":"trustpayments","operation":"transactionQuery","params":{"transactionReference":"1-2-3"}}"#
let vivaOrder = #"{"v":1,"orderId":"viva-1","provider":"viva","operation":"sale","amount":1050,"currency":"EUR","params":{}}"#

/// The providers and operations of PROTOCOL.md §1, as the standard connectors declare them.
let testCatalog = OrderCatalog(StandardConnectors.all.flatMap { $0.operations })

func testRegistry(_ config: PaypipeConfig? = nil) async -> ConnectorRegistry {
    await StandardConnectors.registry(config: config ?? (try! demoConfig()))
}

func connector(for work: SubmitWork) async -> any ProviderConnector {
    await testRegistry().connector(for: work.order.provider)!
}

func readDispatch(_ frame: [UInt8]) -> DispatchFrame? { try? DispatchFrame.decode(frame, catalog: testCatalog) }

func timers(phonepeCallbackWaitMs: Int64) -> PaypipeConfig.Timers {
    var timers = PaypipeConfig.Timers()
    timers.phonepeCallbackWaitMs = phonepeCallbackWaitMs
    return timers
}

func temporaryStore() throws -> LedgerStore {
    let path = TestStores.path()
    return try LedgerStore(path: path)
}

@Suite("Ledger core: durable dedupe, outcomes, redelivery")
struct LedgerCoreTests {
    @Test func aNewOrderIsDispatchedOnceAndARepeatIsNot() async throws {
        var core = LedgerCore(store: try temporaryStore(), registry: await testRegistry())
        let first = try core.intake([Array(vivaOrder.utf8)], now: 1000)
        #expect(first.count == 1)
        guard case .dispatch(let frame) = first[0], let dispatch = readDispatch(frame) else {
            Issue.record("expected a dispatch")
            return
        }
        #expect(dispatch.order.orderId == "viva-1")
        #expect(dispatch.acceptedAt == 1000)
        #expect(dispatch.purpose == .submit)
        #expect(try core.intake([Array(vivaOrder.utf8)], now: 2000) == [])
        #expect(core.counters.duplicates == 1)
    }

    @Test func aRepeatedOrderGetsTheIdenticalTerminalOutcomeAndLaterTerminalsAreDropped() async throws {
        var core = LedgerCore(store: try temporaryStore(), registry: await testRegistry())
        _ = try core.intake([Array(phonePeOrder.utf8)], now: 1000)
        let o = try order(phonePeOrder)
        let pending = Outcome(order: o, status: .pending, result: ["redirectURL": "ppe://x"], at: "2026-11-21T05:00:00.000Z")
        let succeeded = Outcome(order: o, status: .succeeded, result: ["state": "COMPLETED"], at: "2026-11-21T05:00:01.000Z")
        let lateFailure = Outcome(order: o, status: .failed, error: .init(code: "X", message: "late"), at: "2026-11-21T05:00:02.000Z")
        #expect(try core.submitted(pending, now: 1000) == [.emit(pending.logged(seq: 1))])
        // While pending, a repeat gets the pending outcome again (duplicates of non-terminal outcomes are allowed).
        #expect(try core.intake([Array(phonePeOrder.utf8)], now: 1500) == [.emit(pending.logged(seq: 1))])
        #expect(try core.submitted(succeeded, now: 1000) == [.emit(succeeded.logged(seq: 2))])
        #expect(try core.submitted(lateFailure, now: 1000) == [])
        let pendingAfterTerminal = Outcome(order: o, status: .pending, at: "2026-11-21T05:00:03.000Z")
        #expect(try core.submitted(pendingAfterTerminal, now: 1000) == [])
        for _ in 0..<3 {
            #expect(try core.intake([Array(phonePeOrder.utf8)], now: 3000) == [.emit(succeeded.logged(seq: 2))])
        }
    }

    @Test func badFramesAreDroppedAndBadOrdersRejectedWithoutStoppingTheBatch() async throws {
        var core = LedgerCore(store: try temporaryStore(), registry: await testRegistry())
        let badAmount = #"{"v":1,"orderId":"bad-1","provider":"viva","operation":"sale","amount":0,"currency":"EUR","params":{}}"#
        let effects = try core.intake([Array("nonsense".utf8), [0xFF, 0xFE], Array(badAmount.utf8), Array(vivaOrder.utf8)], now: 1000)
        #expect(effects.count == 4)
        guard case .drop(let first) = effects[0], case .drop(let second) = effects[1], case .emit(let rejected) = effects[2], case .dispatch = effects[3] else {
            Issue.record("unexpected effects \(effects)")
            return
        }
        #expect(first.code == .malformedJSON)
        #expect(second.code == .invalidUTF8)
        let outcome = try Outcome.parse(rejected)
        #expect(outcome.status == .rejected)
        #expect(outcome.error?.code == "AMOUNT_NOT_POSITIVE")
        // The same bad order again: the identical rejection.
        #expect(try core.intake([Array(badAmount.utf8)], now: 9000) == [.emit(rejected)])
    }

    @Test func stalledOrdersAreRedeliveredButPendingAndTerminalOnesAreNot() async throws {
        var core = LedgerCore(store: try temporaryStore(), registry: await testRegistry(), redeliverAfterMilliseconds: 100)
        _ = try core.intake([Array(vivaOrder.utf8), Array(phonePeOrder.utf8), Array(tpQueryOrder.utf8)], now: 1000)
        let pending = Outcome(order: try order(phonePeOrder), status: .pending)
        let done = Outcome(order: try order(tpQueryOrder), status: .succeeded)
        _ = try core.submitted(pending, now: 1000)
        _ = try core.submitted(done, now: 1000)
        #expect(try core.redeliver(now: 1050) == [])
        let again = try core.redeliver(now: 1200)
        #expect(again.count == 1)
        if case .dispatch(let frame) = again.first { #expect(readDispatch(frame)?.order.orderId == "viva-1") }
        #expect(try core.redeliver(now: 1250) == [])  // re-dispatched at 1200, not stalled again yet
    }

    /// An order is stored and dispatched as upstream sent it, not written anew: its first
    /// dispatch and a redelivery after reopening the store carry its bytes, which decode to the
    /// order as it was taken in. The same order spelled another way is still the same order.
    @Test func anOrderTravelsAsUpstreamSentIt() async throws {
        let path = TestStores.path()
        let sent = #"{ "provider":"viva", "v":1, "orderId":"viva-\u0031", "operation":"sale", "amount":1050, "currency":"EUR", "params":{} }"#
        let expected = try order(vivaOrder)
        var firstDispatch: [UInt8] = []
        do {
            var core = LedgerCore(store: try LedgerStore(path: path), registry: await testRegistry(), redeliverAfterMilliseconds: 100)
            let effects = try core.intake([Array(sent.utf8)], now: 1000)
            guard effects.count == 1, case .dispatch(let frame) = effects[0] else {
                Issue.record("expected a dispatch, got \(effects)")
                return
            }
            firstDispatch = frame
            #expect(try core.intake([Array(vivaOrder.utf8)], now: 1010) == [])
        }
        var reopened = LedgerCore(store: try LedgerStore(path: path), registry: await testRegistry(), redeliverAfterMilliseconds: 100)
        let again = try reopened.redeliver(now: 1200)
        guard again.count == 1, case .dispatch(let redelivered) = again[0] else {
            Issue.record("expected a redelivery, got \(again)")
            return
        }
        for frame in [firstDispatch, redelivered] {
            #expect(DispatchFrame.orderJSON(in: frame).map(Array.init) == Array(sent.utf8))
            #expect(readDispatch(frame)?.order == expected)
        }
        // As the callback validator reads it.
        let stored = try #require(try reopened.store.lookup(expected.key))
        #expect(stored.orderJSON == sent)
        guard case .order(let decoded) = Order.decode(frame: Array(stored.orderJSON.utf8), catalog: testCatalog) else {
            Issue.record("the stored order does not decode")
            return
        }
        #expect(decoded == expected)
    }

    @Test func theStoreSurvivesReopening() async throws {
        let path = TestStores.path()
        do {
            var core = LedgerCore(store: try LedgerStore(path: path), registry: await testRegistry())
            _ = try core.intake([Array(vivaOrder.utf8)], now: 1000)
        }
        var reopened = LedgerCore(store: try LedgerStore(path: path), registry: await testRegistry())
        #expect(try reopened.intake([Array(vivaOrder.utf8)], now: 2000) == [])
    }
}

@Suite("Signer core")
struct SignerCoreTests {
    @Test func everyProviderGetsItsRequestOrItsDirectOutcome() async throws {
        let signer = SignerCore(registry: await testRegistry(try demoConfig()))
        let lines = try String(contentsOfFile: examplesPath(), encoding: .utf8).split(separator: "\n")
        var kinds: [String: String] = [:]
        for line in lines {
            guard case .order(let o) = Order.decode(json: String(line), catalog: testCatalog) else { continue }
            switch signer.sign(o, acceptedAt: 1, nowSeconds: 1_795_237_200) {
            case .submit(let work):
                kinds[o.operation.rawValue] = "submit"
                #expect(work.request.url.hasPrefix("http://127.0.0.1:9/"))
                #expect(try SubmitWork.decode(work.frame, catalog: testCatalog) == work)
            case .outcome(let outcome):
                kinds[o.operation.rawValue] = outcome.status.rawValue
            case .nothing:
                Issue.record("a first dispatch is always signed or answered")
            }
        }
        #expect(kinds["subscriptionJwt"] == "pending")
        #expect(kinds["sale"] == "pending")
        for op in ["transactionQuery", "transactionUpdate", "createSubscription", "getSubscription", "authInit", "appleReceipt"] {
            #expect(kinds[op] == "submit", "\(op)")
        }
    }

    @Test func missingParamsUnknownMerchantAndMissingCredentialsAreRejections() async throws {
        var config = try demoConfig()
        config.merchants["vivaonly"] = MerchantConfig(config.merchants["default"]!.viva!)
        let signer = SignerCore(registry: await testRegistry(config))
        let cases: [(String, String)] = [
            (#"{"v":1,"orderId":"a","provider":"phonepe","operation":"authInit","amount":1,"currency":"INR","params":{}}"#, "MISSING_PARAM"),
            (#"{"v":1,"orderId":"b","merchant":"nobody","provider":"viva","operation":"sale","amount":1,"currency":"EUR","params":{}}"#, "UNKNOWN_MERCHANT"),
            (#"{"v":1,"orderId":"c","merchant":"vivaonly","provider":"nets","operation":"getSubscription","params":{"paymentId":"p"}}"#, "MISSING_CREDENTIALS"),
        ]
        for (json, code) in cases {
            guard case .outcome(let outcome) = signer.sign(try order(json), acceptedAt: 1, nowSeconds: 1_795_237_200) else {
                Issue.record("expected a rejection for \(json)")
                continue
            }
            #expect(outcome.status == .rejected)
            #expect(outcome.error?.code == code)
        }
    }

    static func sampleWorks() throws -> [SubmitWork] {
        let order = try order(phonePeOrder)
        let request = HTTPRequestSpec(
            method: .POST, url: "http://127.0.0.1:9/a?b=\"c\"", headers: [HTTPHeader("X-A", "1\n2"), HTTPHeader("Content-Type", "application/json")],
            body: Array((0...255).map { UInt8($0) }))
        return [
            SubmitWork(order: order, request: request, acceptedAt: 7),
            SubmitWork(
                order: order, request: request, resolve: HTTPRequestSpec(method: .GET, url: "http://127.0.0.1:9/s"),
                context: ["authRequestId": "A1", "n": [1, .null]], purpose: .statusCheck, pending: ["redirectURL": "ppe://x", "k": [:]],
                acceptedAt: -1, generation: 3),
            SubmitWork(order: order, request: HTTPRequestSpec(method: .DELETE, url: "http://h/é"), purpose: .expiryCheck, pending: [:], acceptedAt: .max, generation: .min),
        ]
    }

    @Test func theWorkFrameReadsBackAsTheSameWork() throws {
        for work in try Self.sampleWorks() {
            #expect(work.frame.first == 0x01)
            #expect(try SubmitWork.decode(work.frame, catalog: testCatalog) == work)
        }
    }

    /// A submitter of this release reads the JSON frame that signers of earlier releases wrote,
    /// so that work queued across an upgrade still ends as it should.
    @Test func theJSONFrameOfEarlierSignersIsStillRead() throws {
        for work in try Self.sampleWorks() {
            #expect(try SubmitWork.decode(work.json.bytes, catalog: testCatalog) == work)
        }
    }

    /// The ledger's dispatch frame round-trips, with or without a pending result, and the JSON
    /// frame of earlier ledgers is still read. A damaged one is refused naming the field, and
    /// one whose order can still be read gives that order an outcome, as a work frame does.
    @Test func dispatchFramesRoundTripAndTheirDamageIsNamed() throws {
        let stored = try order(phonePeOrder)
        let pending: [String: JSONValue] = ["authRequestId": "AR1", "redirectURL": "ppe://x"]
        for (purpose, result) in [(DispatchPurpose.submit, nil), (.statusCheck, pending)] as [(DispatchPurpose, [String: JSONValue]?)] {
            let frame = DispatchFrame.encode(orderJSON: stored.serialized, acceptedAt: 1_795_237_200_000, purpose: purpose, pending: result, generation: 3)
            #expect(frame.first == 0x02)
            let expected = try DispatchFrame.decode(frame, catalog: testCatalog)
            #expect(expected.order == stored && expected.acceptedAt == 1_795_237_200_000 && expected.purpose == purpose)
            #expect(expected.pending == result && expected.generation == 3)
            var legacy: [String: JSONValue] = [
                "acceptedAt": .integer(1_795_237_200_000), "purpose": .string(purpose.rawValue), "generation": 3, "order": stored.json,
            ]
            if let result { legacy["pending"] = .object(result) }
            #expect(try DispatchFrame.decode(JSONValue.object(legacy).bytes, catalog: testCatalog) == expected)
        }
        let frame = DispatchFrame.encode(orderJSON: stored.serialized, acceptedAt: 1)
        for length in 1..<frame.count {
            #expect(throws: EnvelopeError.self) { try DispatchFrame.decode(Array(frame[..<length]), catalog: testCatalog) }
        }
        #expect(throws: EnvelopeError.self) { try DispatchFrame.decode(frame + [0], catalog: testCatalog) }
        let purpose = Array("submit".utf8)
        let at = try #require(frame.firstRange(of: purpose))
        var bogus = frame
        bogus.replaceSubrange(at, with: Array(repeating: UInt8(ascii: "x"), count: purpose.count))
        #expect { try DispatchFrame.decode(bogus, catalog: testCatalog) } throws: { ($0 as? EnvelopeError)?.description == "dispatch.purpose is invalid" }
        // Unreadable, so not known to be a first submission: nothing is said to have not reached the provider.
        let outcome = try #require(StageResult.unreadableWork(bogus, reason: "dispatch.purpose is invalid")).outcome
        #expect(outcome.orderId == "pp-1" && outcome.status == .unknown && outcome.error?.code == "NEEDS_REVIEW")
        let unsupported = DispatchFrame.encode(orderJSON: #"{"v":2}"#, acceptedAt: 1)
        #expect { try DispatchFrame.decode(unsupported, catalog: testCatalog) } throws: {
            ($0 as? EnvelopeError)?.description.hasPrefix("dispatch.order: v must be 1") == true
        }
    }

    /// The signer passes the dispatched order's bytes on as they came: the work frame carries
    /// them unchanged and reads back as the work written the long way. Only a whole binary
    /// dispatch frame gives them up.
    @Test func theSignerPassesTheDispatchedOrderBytesOn() async throws {
        // Not as the ledger writes it: other key order, spaces, an escaped character.
        let orderJSON = #"{ "provider":"phonepe", "v":1, "orderId":"pp-\u0031", "operation":"authInit", "amount":39900, "currency":"INR", "params":{"subscriptionId":"SUB-1", "merchantUserId":"U1"} }"#
        let frame = DispatchFrame.encode(orderJSON: orderJSON, acceptedAt: 1_795_237_200_000, generation: 2)
        let bytes = try #require(DispatchFrame.orderJSON(in: frame))
        #expect(Array(bytes) == Array(orderJSON.utf8))
        let dispatch = try DispatchFrame.decode(frame, catalog: testCatalog)
        guard case .submit(let work) = SignerCore(registry: await testRegistry()).sign(dispatch, nowSeconds: 1_795_237_200) else {
            Issue.record("the order was not signed into work")
            return
        }
        let passedOn = work.frame(orderJSON: bytes)
        #expect(passedOn.firstRange(of: Array(orderJSON.utf8)) != nil)
        #expect(work.frame.firstRange(of: Array(orderJSON.utf8)) == nil)
        #expect(try SubmitWork.decode(passedOn, catalog: testCatalog) == SubmitWork.decode(work.frame, catalog: testCatalog))
        #expect(try SubmitWork.decode(passedOn, catalog: testCatalog).order.orderId == "pp-1")

        let legacy = JSONValue.object(["acceptedAt": 1, "purpose": "submit", "generation": 1, "order": dispatch.order.json]).bytes
        #expect(DispatchFrame.orderJSON(in: legacy) == nil)
        #expect(DispatchFrame.orderJSON(in: work.frame) == nil)
        let end = frame.count - 1  // the pending presence byte follows the order
        #expect(DispatchFrame.orderJSON(in: Array(frame[..<end])) != nil)
        for length in 1..<end { #expect(DispatchFrame.orderJSON(in: Array(frame[..<length])) == nil) }
    }

    /// Every truncation and every trailing byte is refused with the field's name; a frame whose
    /// order can still be read gives that order an outcome.
    @Test func aDamagedWorkFrameIsRefusedNamingTheField() throws {
        let work = try Self.sampleWorks()[1]
        let frame = work.frame
        for length in 1..<frame.count {
            let truncated = Array(frame[..<length])
            do {
                _ = try SubmitWork.decode(truncated, catalog: testCatalog)
                Issue.record("a frame cut at \(length) of \(frame.count) bytes was read")
            } catch {
                #expect(error.description.hasPrefix("work."), "\(error)")
                #expect(!error.description.contains("ppe://x"))
            }
        }
        #expect(throws: EnvelopeError.self) { try SubmitWork.decode(frame + [0], catalog: testCatalog) }
        // The purpose replaced by one of the same length that no release writes.
        let purpose = Array(work.purpose.rawValue.utf8)
        let at = try #require(frame.firstRange(of: purpose))
        var bogus = frame
        bogus.replaceSubrange(at, with: Array(repeating: UInt8(ascii: "x"), count: purpose.count))
        #expect { try SubmitWork.decode(bogus, catalog: testCatalog) } throws: { ($0 as? EnvelopeError)?.description == "work.purpose is invalid" }
        let outcome = try #require(StageResult.unreadableWork(bogus, reason: "work.purpose is invalid")).outcome
        #expect(outcome.orderId == work.order.orderId && outcome.status == .unknown && outcome.error?.code == "NEEDS_REVIEW")
        // A header that is not UTF-8.
        let header = Array("X-A".utf8)
        let nameAt = try #require(frame.firstRange(of: header))
        var notUTF8 = frame
        notUTF8[nameAt.lowerBound] = 0xFF
        #expect { try SubmitWork.decode(notUTF8, catalog: testCatalog) } throws: { ($0 as? EnvelopeError)?.description == "work.request.headers is not UTF-8" }
        // A header count far past what the frame holds.
        let countAt = nameAt.lowerBound - 8
        var huge = frame
        huge.replaceSubrange(countAt..<countAt + 4, with: [0xFF, 0xFF, 0xFF, 0x7F])
        #expect(throws: EnvelopeError.self) { try SubmitWork.decode(huge, catalog: testCatalog) }
    }

    @Test func signedWorkCarriesNoSecretOutsideTheRequestHeaders() async throws {
        let signer = SignerCore(registry: await testRegistry(try demoConfig()))
        guard case .submit(let work) = signer.sign(try order(phonePeOrder), acceptedAt: 1, nowSeconds: 1_795_237_200) else {
            Issue.record("expected work")
            return
        }
        let text = String(decoding: work.frame, as: UTF8.self)
        #expect(!text.contains("demo-salt"))
        #expect(work.resolve != nil)
        #expect(work.context["authRequestId"]?.stringValue != nil)
    }
}

func examplesPath() -> String {
    var url = URL(fileURLWithPath: #filePath)
    while url.path != "/" {
        url.deleteLastPathComponent()
        let candidate = url.appendingPathComponent("examples/orders.jsonl")
        if FileManager.default.fileExists(atPath: candidate.path) { return candidate.path }
    }
    return "examples/orders.jsonl"
}

@Suite("Submission state machine")
struct SubmissionTests {
    func phonePeWork() async throws -> (SubmitWork, PhonePeSandbox) {
        let config = try demoConfig()
        guard case .submit(let work) = SignerCore(registry: await testRegistry(config)).sign(try order(phonePeOrder), acceptedAt: 1, nowSeconds: 1_795_237_200) else {
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
        let mandate = try #require(sandbox.handleAuthInit(path: "/v3/recurring/auth/init", headers: work.request.headers, body: work.request.body).mandate)
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
        let update = #"{"v":1,"orderId":"tu-1","provider":"trustpayments","operation":"transactionUpdate","params":{"transactionReference":"1-2-3","updates":{"baseamount":60010}}}"#
        guard case .submit(let work) = SignerCore(registry: await testRegistry(config)).sign(try order(update), acceptedAt: 1, nowSeconds: 1_795_237_200) else {
            Issue.record("expected work")
            return
        }
        var submission = Submission(work: work, connector: await connector(for: work))
        guard case .send(let request, _) = submission.start() else { return }
        let records: [[String: JSONValue]] = [["transactionreference": "1-2-3", "sitereference": "test_site12345", "requesttypedescription": "AUTH", "errorcode": "0", "orderreference": "x"]]
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

/// The signed work as the JSON frame signers wrote before the binary frame.
extension SubmitWork {
    fileprivate var json: JSONValue {
        func encode(_ request: HTTPRequestSpec) -> JSONValue {
            [
                "method": .string(request.method.rawValue), "url": .string(request.url),
                "headers": .array(request.headers.map { [.string($0.name), .string($0.value)] }),
                "body": .string(Base64.encodeToString(request.body, .standard)),
            ]
        }
        var object: [String: JSONValue] = [
            "order": order.json, "request": encode(request), "context": context,
            "purpose": .string(purpose.rawValue), "acceptedAt": .integer(acceptedAt), "generation": .integer(generation),
        ]
        if let resolve { object["resolve"] = encode(resolve) }
        if let pending { object["pending"] = .object(pending) }
        return .object(object)
    }
}

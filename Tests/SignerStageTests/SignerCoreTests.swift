import Connectors
import Foundation
import LedgerStage
import PaypipeCore
import PhonePe
import Sandbox
import StageRuntime
import StageWire
import SubmitterStage
import TestSupport
import Testing
import TrustPayments

@testable import SignerStage

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
            (
                #"{"v":1,"orderId":"b","merchant":"nobody","provider":"viva","operation":"sale","amount":1,"currency":"EUR","params":{}}"#,
                "UNKNOWN_MERCHANT"
            ),
            (
                #"{"v":1,"orderId":"c","merchant":"vivaonly","provider":"nets","operation":"getSubscription","params":{"paymentId":"p"}}"#,
                "MISSING_CREDENTIALS"
            ),
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
            SubmitWork(
                order: order, request: HTTPRequestSpec(method: .DELETE, url: "http://h/é"), purpose: .expiryCheck, pending: [:], acceptedAt: .max,
                generation: .min),
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
            let frame = DispatchFrame.encode(
                orderJSON: stored.serialized, acceptedAt: 1_795_237_200_000, purpose: purpose, pending: result, generation: 3)
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
        #expect { try DispatchFrame.decode(bogus, catalog: testCatalog) } throws: {
            ($0 as? EnvelopeError)?.description == "dispatch.purpose is invalid"
        }
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
        let orderJSON =
            #"{ "provider":"phonepe", "v":1, "orderId":"pp-\u0031", "operation":"authInit", "amount":39900, "currency":"INR", "params":{"subscriptionId":"SUB-1", "merchantUserId":"U1"} }"#
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
        #expect { try SubmitWork.decode(notUTF8, catalog: testCatalog) } throws: {
            ($0 as? EnvelopeError)?.description == "work.request.headers is not UTF-8"
        }
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

/// The signed work as the JSON frame signers of earlier releases write.
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

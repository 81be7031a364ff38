import Cleeng
import CleengTesting
import FixtureCorpus
import PaypipeCore
import TestSupport
import Testing

@testable import CleengEmulation
@testable import Sandbox

/// The Cleeng emulator answers in the shapes and values Cleeng publishes (`CleengCorpus`): the
/// JSON-RPC `id` as Cleeng writes it (`"1"` for request id 1), `grantType` "direct-purchase", a
/// not-granted answer without an `error` member, the receipt endpoint's empty 200 and its
/// `{"code","message"}` errors.
@Suite struct CleengEmulatorShapeTests {
    static let corpus = CleengCorpus.all

    static func json(_ response: HTTPResponseSpec) throws -> JSONValue { try JSONValue.parse(response.body) }

    static func fixtureJSON(_ name: String) throws -> JSONValue { try #require(corpus.named(name).json) }

    // MARK: getAccessStatus (POST /3.0/json-rpc)

    @Test func notGrantedIsTheDocumentedAnswerWithoutAnErrorMember() throws {
        let answer = try Self.json(CleengSandbox.accessStatusResponse(id: 1, grant: nil))
        #expect(
            Self.corpus.unpublishedPaths(in: answer, kind: "getAccessStatusResponse").isEmpty,
            "\(Self.corpus.unpublishedPaths(in: answer, kind: "getAccessStatusResponse"))")
        let documented = try Self.fixtureJSON("getAccessStatusResponse--not-granted-no-error-member")
        #expect(answer == documented)
        #expect(answer["error"] == nil)
        #expect(CleengAccessStatusCall.classify(CleengSandbox.accessStatusResponse(id: 1, grant: nil), expectedId: 1) == .notGranted)
    }

    @Test func grantedIsADirectPurchaseAnsweredWithAStringId() throws {
        let response = CleengSandbox.accessStatusResponse(id: 1, grant: CleengAccessGrant(expiresAt: 1_549_400_941, purchasedDirectly: true))
        let answer = try Self.json(response)
        #expect(
            Self.corpus.unpublishedPaths(in: answer, kind: "getAccessStatusResponse").isEmpty,
            "\(Self.corpus.unpublishedPaths(in: answer, kind: "getAccessStatusResponse"))")
        let sample = try Self.fixtureJSON("getAccessStatusResponse--granted-direct-purchase-no-expiry")
        #expect(answer["id"] == sample["id"])
        #expect(answer["id"] == "1")
        #expect(answer["result"]?["grantType"] == sample["result"]?["grantType"])
        #expect(answer["result"]?["grantType"] == "direct-purchase")
        #expect(answer["error"] == .null)
        #expect(answer["jsonrpc"] == "2.0")
        #expect(
            CleengAccessStatusCall.classify(response, expectedId: 1)
                == .granted(CleengAccessGrant(grantType: "direct-purchase", expiresAt: 1_549_400_941, purchasedDirectly: true)))
    }

    @Test func anIdSentAsAStringComesBackAsSent() throws {
        let request = #"{"method":"getAccessStatus","params":{"customerToken":"t","offerId":"E1"},"jsonrpc":"2.0","id":"abc-1"}"#
        let query = try CleengSandbox.parseAccessStatusRequest(Array(request.utf8)).get()
        #expect(try Self.json(CleengSandbox.accessStatusResponse(id: query.id, grant: nil))["id"] == "abc-1")
        #expect(try Self.json(CleengSandbox.accessStatusError(id: query.id, code: 4, message: "Offer not found"))["id"] == "abc-1")
        // A request without an id (a parse error) is answered with null, as JSON-RPC does.
        if case .failure(let error) = CleengSandbox.parseAccessStatusRequest(Array("nope".utf8)) {
            #expect(try Self.json(error.response)["id"] == .null)
        } else {
            Issue.record("a body that is not JSON is a parse error")
        }
    }

    @Test(arguments: [
        (Int64(1), "getAccessStatusResponse--error-1-invalid-customer-token"),
        (4, "getAccessStatusResponse--error-4-offer-not-found"),
        (14, "getAccessStatusResponse--error-14-ip-address-limit-exceed"),
        (16, "getAccessStatusResponse--error-16-invalid-arguments"),
    ])
    func errorsHaveTheDocumentedCodesAndWording(code: Int64, fixture: String) throws {
        let answer = try Self.json(CleengSandbox.accessStatusError(id: 1, code: code, message: CleengSandbox.standardMessage(for: code)))
        #expect(
            Self.corpus.unpublishedPaths(in: answer, kind: "getAccessStatusResponse").isEmpty,
            "\(Self.corpus.unpublishedPaths(in: answer, kind: "getAccessStatusResponse"))")
        let sample = try Self.fixtureJSON(fixture)
        #expect(answer["id"] == sample["id"])
        #expect(answer["result"] == .null)
        #expect(answer["error"]?["code"] == sample["error"]?["code"])
        #expect(answer["error"]?["message"] == sample["error"]?["message"])
    }

    @Test func anEmptyIPAddressIsReadAsAbsentAsCleengsExampleSendsIt() throws {
        let request = #"{"method":"getAccessStatus","params":{"customerToken":"t","offerId":"E1","ipAddress":""},"jsonrpc":"2.0","id":1}"#
        let query = try CleengSandbox.parseAccessStatusRequest(Array(request.utf8)).get()
        #expect(query.ipAddress == nil)
    }

    // MARK: The receipt endpoint (POST /checkout/apple_inapp.php)

    @Test func anAcceptedReceiptIsAnEmpty200() throws {
        let request = try CleengReceipt.request(order: CleengFixtures.receiptOrder(), config: CleengFixtures.config)
        let check = CleengSandbox.verifyReceiptRequest(request, username: "publisher", password: Secret("s3cr3t-pa55"))
        let sample = Self.corpus.named("receiptResponse--accepted-empty-body")
        #expect(check.response.status == sample.status)
        #expect(check.response.body == Array((sample.text ?? "").utf8))
        #expect(check.receipt != nil)
    }

    @Test func receiptErrorsHaveTheDocumentedCodes() throws {
        let request = try CleengReceipt.request(order: CleengFixtures.receiptOrder(), config: CleengFixtures.config)
        var withoutCredentials = request
        withoutCredentials.headers.removeAll { $0.name == "Authorization" }
        var withoutToken = request
        if case .object(var body) = try JSONValue.parse(request.body) {
            body["customerToken"] = nil
            withoutToken.body = JSONValue.object(body).bytes
        }
        let cases: [(String, HTTPResponseSpec, String)] = [
            (
                "missing credentials",
                CleengSandbox.verifyReceiptRequest(withoutCredentials, username: "publisher", password: Secret("s3cr3t-pa55")).response,
                "receiptResponse--missing-credentials"
            ),
            (
                "wrong credentials", CleengSandbox.verifyReceiptRequest(request, username: "publisher", password: Secret("other")).response,
                "receiptResponse--invalid-credentials"
            ),
            (
                "missing field", CleengSandbox.verifyReceiptRequest(withoutToken, username: "publisher", password: Secret("s3cr3t-pa55")).response,
                "receiptResponse--invalid-request-body"
            ),
        ]
        for (label, response, fixture) in cases {
            let sample = Self.corpus.named(fixture)
            #expect(response.status == sample.status, "\(label)")
            let answer = try Self.json(response)
            #expect(
                Self.corpus.unpublishedPaths(in: answer, kind: "receiptResponse").isEmpty,
                "\(label): \(Self.corpus.unpublishedPaths(in: answer, kind: "receiptResponse"))")
            #expect(answer["code"] == sample.json?["code"], "\(label)")
            #expect(answer["message"]?.stringValue?.hasPrefix(sample.json?["message"]?.stringValue ?? "?") == true, "\(label)")
        }
    }

    // MARK: Through the sandbox server

    @Test func theServerAnswersInTheDocumentedShapes() async throws {
        try await withSandbox(SandboxConfiguration().with { $0.cleeng.grantOnPoll = 2 }) { sandbox in
            let config = try #require(try Fixtures.merchant(sandbox.config).cleeng)
            let order = CleengFixtures.receiptOrder()
            let access = try CleengAccessStatusCall.request(order: order, config: config, requestId: 1)
            // paypipe sends the id as a number; Cleeng answers it as a string.
            #expect(try JSONValue.parse(access.body)["id"] == 1)

            let receipt = try await sandbox.send(try CleengReceipt.request(order: order, config: config))
            #expect(receipt.status == 200 && receipt.body.isEmpty)

            let first = try Self.json(try await sandbox.send(access))
            let documented = try Self.fixtureJSON("getAccessStatusResponse--not-granted-no-error-member")
            #expect(first == documented)
            let second = try Self.json(try await sandbox.send(access))
            #expect(Self.corpus.unpublishedPaths(in: second, kind: "getAccessStatusResponse").isEmpty)
            #expect(second["id"] == "1")
            #expect(second["result"]?["accessGranted"] == true)
            #expect(second["result"]?["grantType"] == "direct-purchase")
        }
    }
}

import FixtureCorpus
import PaypipeCore
import Testing
import Viva
import VivaTesting

@testable import Sandbox
@testable import VivaEmulation

/// The Viva emulator's API answers say what Viva's published messages (`VivaCorpus`) say: the
/// transaction record with the corpus's members and value forms (amount as a decimal, every
/// documented statusId), the token answer as documented.
@Suite struct VivaEmulatorShapeTests {
    static let corpus = VivaCorpus.all
    static let api = VivaSandboxAPITests.api
    static let config = VivaSandboxAPITests.config

    static func relative(_ request: HTTPRequestSpec) -> HTTPRequestSpec { VivaSandboxAPITests.relative(request) }

    /// A sale paid in the emulated app (`body` extra members: `decline`, `statusId`), the
    /// callback URI, and Viva's record of it as the transactions API answers.
    static func paidAndFetched(
        _ emulation: VivaEmulator, clientTransactionId: String, amount: Int64, extra: [String: JSONValue] = [:]
    ) throws -> (callback: String, response: HTTPResponseSpec) {
        let order = VivaFixtures.saleOrder(amount: amount, ["clientTransactionId": .string(clientTransactionId)])
        let sale = try VivaSandbox.readSale(try VivaSale.url(order: order, config: config))
        var body: [String: JSONValue] = ["uri": .string(sale.url)]
        for (key, value) in extra { body[key] = value }
        let paid = emulation.handle(HTTPRequestSpec(method: .POST, url: "/sale", body: JSONValue.object(body).bytes))
        #expect(paid.status == 200)
        let callback = try #require(try JSONValue.parse(paid.body)["callback"]?.stringValue)
        let transactionId = try #require(try VivaSaleCallback(uri: callback).transactionId)
        let tokenResponse = emulation.handle(relative(VivaAPIRequests.token(api)))
        let token = try #require(try JSONValue.parse(tokenResponse.body)["access_token"]?.stringValue)
        return (callback, emulation.handle(relative(VivaAPIRequests.transaction(transactionId, api: api, token: Secret(token)))))
    }

    @Test(arguments: ["F", "A", "E", "X", "R"])
    func theTransactionRecordHasTheCorpusMembersAndForms(statusId: String) throws {
        // Every statusId the emulator can record is one the corpus shows.
        let documented = Set(Self.corpus.of(kind: "transactionResponse").compactMap { $0.json?["statusId"]?.stringValue })
        #expect(documented.contains(statusId))

        let emulation = VivaEmulator(merchants: [("default", Self.config)])
        let (callback, response) = try Self.paidAndFetched(
            emulation, clientTransactionId: "ref-\(statusId)", amount: 1250, extra: ["statusId": .string(statusId)])
        #expect(response.status == 200)
        let answer = try JSONValue.parse(response.body)
        #expect(
            Self.corpus.unpublishedPaths(in: answer, kind: "transactionResponse").isEmpty,
            "\(Self.corpus.unpublishedPaths(in: answer, kind: "transactionResponse"))")
        #expect(answer["statusId"] == .string(statusId))
        // amount in major units as a decimal, as the corpus's 12.5.
        #expect(answer["amount"] == .fraction(12.5))
        #expect(VivaTransaction(body: response.body) == VivaTransaction(statusId: statusId, amount: 1250, merchantTrns: "ref-\(statusId)"))

        // Each member the corpus's completed record has, with the same JSON type (or null where
        // the sandbox knows nothing, as Viva writes an unknown member).
        let sample = try #require(Self.corpus.named("transactionResponse--completed-decimal-amount").json?.objectValue)
        for (name, value) in sample {
            let ours = try #require(answer[name], "member \(name) missing")
            #expect(ours.typeName == value.typeName || ours == .null, "\(name): \(ours.typeName), the corpus has \(value.typeName)")
        }
        // The card as Viva masks it: 6 digits, X, 4 digits (`414746XXXXXX0133`).
        let card = try #require(answer["cardNumber"]?.stringValue)
        let bytes = Array(card.utf8)
        #expect(bytes.count == 16)
        #expect(bytes.prefix(6).allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") })
        #expect(bytes.dropFirst(6).prefix(6).allSatisfy { $0 == UInt8(ascii: "X") })
        #expect(bytes.suffix(4).allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") })

        // The app's result: a failure for E and X, a success otherwise.
        let result = try VivaSaleCallback(uri: callback)
        let expected: VivaSaleCallback.Status = statusId == "E" || statusId == "X" ? .fail : .success
        #expect(result.status == expected)
    }

    @Test func declineStillRecordsAnError() throws {
        let emulation = VivaEmulator(merchants: [("default", Self.config)])
        let (callback, response) = try Self.paidAndFetched(emulation, clientTransactionId: "ref-declined", amount: 1000, extra: ["decline": true])
        #expect(try VivaSaleCallback(uri: callback).status == .fail)
        let answer = try JSONValue.parse(response.body)
        #expect(answer["statusId"] == "E")
        #expect(Self.corpus.unpublishedPaths(in: answer, kind: "transactionResponse").isEmpty)
    }

    @Test func anUndocumentedStatusIdIsRefused() throws {
        let emulation = VivaEmulator(merchants: [("default", Self.config)])
        let order = VivaFixtures.saleOrder(amount: 1000, ["clientTransactionId": "ref-bad"])
        let sale = try VivaSandbox.readSale(try VivaSale.url(order: order, config: Self.config))
        let body: JSONValue = ["uri": .string(sale.url), "statusId": "Z"]
        #expect(emulation.handle(HTTPRequestSpec(method: .POST, url: "/sale", body: body.bytes)).status == 400)
    }

    @Test func theTokenAnswerIsAsDocumentedPlusTheScopeItAlwaysHad() throws {
        let emulation = VivaEmulator(merchants: [("default", Self.config)])
        let response = emulation.handle(Self.relative(VivaAPIRequests.token(Self.api)))
        #expect(response.status == 200)
        let answer = try JSONValue.parse(response.body)
        // The corpus shows access_token, expires_in, token_type; it is silent on `scope`, which
        // the emulator keeps as it was.
        #expect(Self.corpus.unpublishedPaths(in: answer, kind: "tokenResponse") == ["scope"])
        let sample = try #require(Self.corpus.named("tokenResponse--bearer").json)
        #expect(answer["token_type"] == sample["token_type"])
        #expect(answer["expires_in"]?.typeName == sample["expires_in"]?.typeName)
        #expect(answer["access_token"]?.stringValue?.isEmpty == false)
    }

    @Test func anUnknownTransactionIs404AsDocumented() throws {
        let emulation = VivaEmulator(merchants: [("default", Self.config)])
        let tokenResponse = emulation.handle(Self.relative(VivaAPIRequests.token(Self.api)))
        let token = try #require(try JSONValue.parse(tokenResponse.body)["access_token"]?.stringValue)
        let unknown = VivaSandbox.uuid(from: "never-paid")
        let response = emulation.handle(Self.relative(VivaAPIRequests.transaction(unknown, api: Self.api, token: Secret(token))))
        #expect(response.status == Self.corpus.named("transactionResponse--not-found").status)
    }
}

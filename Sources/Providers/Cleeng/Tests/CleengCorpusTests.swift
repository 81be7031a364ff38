import CleengTesting
import FixtureCorpus
import PaypipeCore
import Testing

@testable import Cleeng

/// Cleeng's documented messages (Sources/Providers/Cleeng/Fixtures, described in its README)
/// driven through the connector entry points the pipeline uses: `sign` for the receipt POST,
/// `read` for its answer, `pollTarget`/`pollRequest`/`readPoll` for getAccessStatus polling and
/// `checkRequest`/`readCheck` for entitlement rechecks. Reuses `config` and `receiptOrder` from
/// CleengReceiptTests.swift.
@Suite struct CleengCorpusTests {
    static let nowSeconds: Int64 = 1_700_000_000

    static func makeConnector() async -> CleengConnector {
        await CleengConnector(config: PaypipeConfig(merchants: ["default": MerchantConfig(config)]))
    }

    static func response(_ fixture: Fixture) -> HTTPResponseSpec {
        HTTPResponseSpec(status: fixture.status ?? 200, headers: [HTTPHeader("Content-Type", "application/json")], body: fixture.jsonBody)
    }

    static func requiredNames(_ fixture: Fixture, _ key: String) -> [String] {
        (fixture.meaning(key)?.stringValue ?? "").split(separator: ",").map(String.init)
    }

    /// Compares a verdict with the fixture's `verdict`, `errorCode`, `grantType`, `expiresAt`, `receiptAccepted`.
    static func check(_ verdict: ProviderVerdict, against fixture: Fixture) {
        switch (fixture.meaning("verdict")?.stringValue, verdict) {
        case ("pending"?, .pending(let result)):
            if let accepted = fixture.meaning("receiptAccepted") { #expect(result["receiptAccepted"] == accepted, "\(fixture)") }
        case ("succeeded"?, .succeeded(let result)):
            #expect(result["accessGranted"] == .bool(true), "\(fixture)")
            if let grantType = fixture.meaning("grantType") { #expect(result["grantType"] == grantType, "\(fixture)") }
            if let expiresAt = fixture.meaning("expiresAt") { #expect(result["expiresAt"] == expiresAt, "\(fixture)") }
        case ("failed"?, .failed(let code, _)):
            #expect(code.rawValue == fixture.meaning("errorCode")?.stringValue, "\(fixture)")
        case ("retry"?, .retry):
            break
        default:
            Issue.record("\(fixture): expected \(fixture.meaning("verdict")?.stringValue ?? "?"), got \(verdict)")
        }
    }

    /// The loader refuses a fixture without its source, kind and summary; every one is genuine.
    @Test func theCorpusIsGenuine() {
        #expect(!CleengCorpus.all.fixtures.isEmpty)
        #expect(CleengCorpus.all.fixtures.filter { !$0.accepted }.isEmpty)
    }

    // MARK: Outgoing

    @Test(arguments: CleengCorpus.all.of(kind: "receiptRequest"))
    func receiptRequestHasTheDocumentedShape(_ fixture: Fixture) async throws {
        guard let documented = fixture.json, let fields = documented.objectValue else {
            Issue.record("\(fixture): message.json must be an object")
            return
        }
        let order = receiptOrder(fields.mapValues { Optional($0) })
        let connector = await Self.makeConnector()
        guard case .request(let signed) = try connector.sign(order, purpose: .submit, nowSeconds: Self.nowSeconds) else {
            Issue.record("\(fixture): expected an HTTP request")
            return
        }
        let request = signed.request
        #expect(request.method.rawValue == fixture.meaning("method")?.stringValue)
        #expect(request.url.hasSuffix(fixture.meaning("urlSuffix")?.stringValue ?? "?"))
        #expect(request.header("Authorization")?.hasPrefix((fixture.meaning("authScheme")?.stringValue ?? "?") + " ") == true)
        #expect(request.header("Content-Type") == fixture.meaning("contentType")?.stringValue)
        let sent = try JSONValue.parse(request.body)
        #expect(sent == documented)
        for name in Self.requiredNames(fixture, "requiredFields") {
            #expect(sent[name]?.stringValue?.isEmpty == false, "\(fixture): \(name)")
        }
    }

    @Test(arguments: CleengCorpus.all.of(kind: "getAccessStatusRequest"))
    func getAccessStatusRequestHasTheDocumentedShape(_ fixture: Fixture) async throws {
        guard let documented = fixture.json, let params = documented["params"]?.objectValue,
            let id = documented["id"]?.integerValue
        else {
            Issue.record("\(fixture): message.json needs params and an integer id")
            return
        }
        let order = receiptOrder(params.mapValues { Optional($0) })
        // The order carrying these params is one paypipe accepts.
        _ = try CleengReceipt(order: order)
        let connector = await Self.makeConnector()
        let target = try connector.pollTarget(for: order)
        let request = connector.pollRequest(target, requestId: Int(id))
        #expect(request.method.rawValue == fixture.meaning("method")?.stringValue)
        #expect(request.url.hasSuffix(fixture.meaning("urlSuffix")?.stringValue ?? "?"))
        #expect((request.header("Authorization") != nil) == (fixture.meaning("authorizationHeader")?.boolValue ?? false))
        let sent = try JSONValue.parse(request.body)
        #expect(sent == documented)
        #expect(sent["method"]?.stringValue == fixture.meaning("rpcMethod")?.stringValue)
        #expect(sent["jsonrpc"]?.stringValue == fixture.meaning("jsonrpc")?.stringValue)
        for name in Self.requiredNames(fixture, "requiredParams") {
            #expect(sent["params"]?[name]?.stringValue?.isEmpty == false, "\(fixture): \(name)")
        }
        #expect((sent["params"]?["ipAddress"] != nil) == (fixture.meaning("hasIpAddress")?.boolValue ?? false))

        // The entitlement recheck sends the same call (request id 1).
        var check: [String: JSONValue] = ["apiURL": .string(config.apiURL)]
        for (name, value) in params { check[name] = value }
        if id == 1, let recheck = connector.checkRequest(.object(check)) {
            #expect(try JSONValue.parse(recheck.body) == documented)
        } else if id == 1 {
            Issue.record("\(fixture): no entitlement check request")
        }
    }

    // MARK: Incoming

    @Test(arguments: CleengCorpus.all.of(kind: "receiptResponse"))
    func receiptResponseIsReadAsDocumented(_ fixture: Fixture) async throws {
        let order = receiptOrder()
        let connector = await Self.makeConnector()
        guard case .request(let signed) = try connector.sign(order, purpose: .submit, nowSeconds: Self.nowSeconds) else {
            Issue.record("\(fixture): expected an HTTP request")
            return
        }
        let exchange = Exchange(order: order, signed: signed, purpose: .submit, phase: .submitting)
        guard case .verdict(let verdict) = connector.read(Self.response(fixture), to: signed.request, in: exchange) else {
            Issue.record("\(fixture): expected a verdict")
            return
        }
        Self.check(verdict, against: fixture)
    }

    @Test(arguments: CleengCorpus.all.of(kind: "getAccessStatusResponse"))
    func getAccessStatusResponseIsReadAsDocumented(_ fixture: Fixture) async {
        let connector = await Self.makeConnector()
        let answer = connector.readPoll(Self.response(fixture), requestId: 1)
        switch (fixture.meaning("poll")?.stringValue, answer) {
        case ("ended"?, .ended(let verdict)): Self.check(verdict, against: fixture)
        case ("notYet"?, .notYet): break
        case ("unanswered"?, .unanswered): break
        default: Issue.record("\(fixture): expected poll \(fixture.meaning("poll")?.stringValue ?? "?"), got \(answer)")
        }

        let reading = connector.readCheck(Self.response(fixture))
        switch fixture.meaning("entitlement")?.stringValue {
        case "granted"?:
            #expect(reading?.granted == true, "\(fixture)")
            if let ms = fixture.meaning("entitlementExpiresAtMs")?.integerValue { #expect(reading?.expiresAt == ms, "\(fixture)") }
        case "notGranted"?:
            #expect(reading == EntitlementReading(granted: false, expiresAt: nil), "\(fixture)")
        default:
            #expect(reading == nil, "\(fixture)")
        }
    }
}

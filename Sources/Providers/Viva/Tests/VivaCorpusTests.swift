import FixtureCorpus
import PaypipeCore
import Synchronization
import Testing
import VivaTesting

@testable import Viva

/// Viva's transactions API as the corpus answers it: the token from `tokenResponse--bearer`,
/// every transaction lookup from one `transactionResponse` fixture. Records what was asked.
final class CorpusVivaAPI: ProviderHTTPTransport {
    let token: Fixture
    let transaction: Fixture?
    let requests = Mutex<[HTTPRequestSpec]>([])

    init(token: Fixture, transaction: Fixture?) {
        self.token = token
        self.transaction = transaction
    }

    func execute(_ request: HTTPRequestSpec) async -> Result<HTTPResponseSpec, TransportFailure> {
        requests.withLock { $0.append(request) }
        if request.url.hasSuffix(VivaAPIRequests.tokenPath) {
            return .success(HTTPResponseSpec(status: token.status ?? 200, body: token.jsonBody))
        }
        guard let transaction else { return .success(HTTPResponseSpec(status: 404)) }
        return .success(HTTPResponseSpec(status: transaction.status ?? 200, body: transaction.jsonBody))
    }
}

/// Viva's documented messages (Sources/Providers/Viva/Fixtures, described in its README) driven
/// through the connector: `sign` for the Sale URL, the `/callbacks/viva` route's
/// `forwardedResult` for results (unconfirmed and confirmed with the transactions API), and
/// `VivaAPIRequests` for the confirmation calls. Reuses `vivaConfig`, `apiCredentials`,
/// `seedApprovedURI`, `FakeVivaAPI` and `CountingLookup` from the other Viva tests.
@Suite struct VivaCorpusTests {
    static let nowSeconds: Int64 = 1_700_000_000
    static let orderId = "ord-viva-1"

    static func connector(_ viva: VivaConfig) async -> VivaConnector {
        await VivaConnector(config: PaypipeConfig(merchants: ["default": MerchantConfig(viva)]))
    }

    static func names(_ fixture: Fixture, _ key: String) -> [String] {
        (fixture.meaning(key)?.stringValue ?? "").split(separator: ",").map(String.init)
    }

    /// The order a documented Sale request is the URL of.
    static func order(forSaleRequest fixture: Fixture) -> Order {
        var fields: [String: String] = [:]
        for (name, value) in fixture.form { fields[name] = value }
        var params: [String: JSONValue] = [:]
        if let tip = fields["tipAmount"].flatMap({ Int64($0) }) { params["tipAmount"] = .integer(tip) }
        if let reference = fields["clientTransactionId"] { params["clientTransactionId"] = .string(reference) }
        if let callback = fields["callback"], callback != vivaConfig.callback { params["callback"] = .string(callback) }
        if fields["withInstallments"] == "true", let preferred = fields["preferredInstallments"].flatMap({ Int64($0) }) {
            params["installments"] = ["preferred": .integer(preferred)]
        }
        if let clientId = fields["ISV_clientId"] {
            var isv: [String: JSONValue] = ["clientId": .string(clientId), "amount": .integer(Int64(fields["ISV_amount"] ?? "") ?? -1)]
            let optional = [
                ("ISV_sourceCode", "sourceCode"), ("ISV_merchantId", "merchantId"), ("ISV_merchantSourceCode", "merchantSourceCode"),
                ("ISV_customerTrns", "customerTrns"), ("ISV_clientTransactionId", "clientTransactionId"),
            ]
            for (field, key) in optional { if let value = fields[field] { isv[key] = .string(value) } }
            params["isv"] = .object(isv)
        }
        return Order(
            orderId: orderId, operation: .sale, amount: fields["amount"].flatMap { Int64($0) }, currency: "EUR", params: params)
    }

    /// The order a documented result answers: `orderAmount`, `orderClientTransactionId`, `orderCallback`.
    static func order(forResult fixture: Fixture) -> Order {
        var params: [String: JSONValue] = [:]
        if let reference = fixture.meaning("orderClientTransactionId") { params["clientTransactionId"] = reference }
        if let callback = fixture.meaning("orderCallback") { params["callback"] = callback }
        return Order(
            orderId: orderId, operation: .sale, amount: fixture.meaning("orderAmount")?.integerValue ?? 1200, currency: "EUR",
            params: params)
    }

    /// Compares a verdict with `verdict`, `errorCode` and the result keys the fixture names.
    static func check(_ verdict: ProviderVerdict?, against fixture: Fixture) {
        switch (fixture.meaning("verdict")?.stringValue, verdict) {
        case ("succeeded"?, .succeeded(let result)?):
            for key in [
                "transactionId", "referenceNumber", "authorisationCode", "accountNumber", "transactionDate", "tipAmount", "installments", "statusId",
            ] {
                if let expected = fixture.meaning(key) { #expect(result[key] == expected, "\(fixture): \(key)") }
            }
            if let amount = fixture.meaning("confirmedAmount") { #expect(result["amount"] == amount, "\(fixture): amount") }
        case ("failed"?, .failed(let code, _)?):
            if let expected = fixture.meaning("errorCode")?.stringValue { #expect(code.rawValue == expected, "\(fixture)") }
        default:
            Issue.record("\(fixture): expected \(fixture.meaning("verdict")?.stringValue ?? "?"), got \(String(describing: verdict))")
        }
    }

    /// The loader refuses a fixture without its source, kind and summary; every one is genuine.
    @Test func theCorpusIsGenuine() {
        #expect(!VivaCorpus.all.fixtures.isEmpty)
        #expect(VivaCorpus.all.fixtures.filter { !$0.accepted }.isEmpty)
    }

    // MARK: Outgoing

    @Test(arguments: VivaCorpus.all.of(kind: "saleRequest"))
    func saleRequestHasTheDocumentedShape(_ fixture: Fixture) async throws {
        let connector = await Self.connector(vivaConfig)
        guard case .outcome(_, let result) = try connector.sign(Self.order(forSaleRequest: fixture), purpose: .submit, nowSeconds: Self.nowSeconds),
            let url = result["url"]?.stringValue
        else {
            Issue.record("\(fixture): expected a pending outcome carrying the sale url")
            return
        }
        let uri = try VivaURI.parse(url)
        #expect(uri.scheme == fixture.meaning("scheme")?.stringValue)
        #expect(uri.host == fixture.meaning("host")?.stringValue)
        #expect(uri.path == fixture.meaning("path")?.stringValue)
        #expect(uri.query["action"] == fixture.meaning("action")?.stringValue)
        for name in Self.names(fixture, "requiredFields") {
            #expect(uri.query[name]?.isEmpty == false, "\(fixture): \(name) is required")
        }
        var documented: [String: String] = [:]
        for (name, value) in fixture.form { documented[name] = value }
        for (name, _) in fixture.form {
            #expect(uri.query[name] != nil, "\(fixture): \(name) is documented but not sent")
        }
        for name in Self.names(fixture, "matchFields") {
            #expect(uri.query[name] == documented[name], "\(fixture): \(name)")
        }
        for name in Self.names(fixture, "booleanFields") {
            if let value = uri.query[name] { #expect(value == "true" || value == "false", "\(fixture): \(name)") }
        }
        // The Viva app's reading of the URL (the sandbox's side) accepts it.
        let sale = try VivaSale(requestURL: url)
        #expect(String(sale.amount) == documented["amount"])
    }

    @Test(arguments: VivaCorpus.all.of(kind: "tokenRequest"))
    func tokenRequestHasTheDocumentedShape(_ fixture: Fixture) {
        let request = VivaAPIRequests.token(apiCredentials)
        #expect(request.method.rawValue == fixture.meaning("method")?.stringValue)
        #expect(request.url.hasSuffix(fixture.meaning("urlSuffix")?.stringValue ?? "?"))
        #expect(request.header("Authorization")?.hasPrefix((fixture.meaning("authScheme")?.stringValue ?? "?") + " ") == true)
        #expect(request.header("Content-Type") == fixture.meaning("contentType")?.stringValue)
        #expect(request.body == fixture.formBody)
    }

    @Test(arguments: VivaCorpus.all.of(kind: "transactionRequest"))
    func transactionRequestHasTheDocumentedShape(_ fixture: Fixture) {
        let request = VivaAPIRequests.transaction(fixture.text ?? "", api: apiCredentials, token: Secret("corpus-token"))
        #expect(request.method.rawValue == fixture.meaning("method")?.stringValue)
        #expect(request.url == apiCredentials.apiURL + (fixture.meaning("path")?.stringValue ?? "?"))
        #expect(request.header("Authorization") == (fixture.meaning("authScheme")?.stringValue ?? "?") + " corpus-token")
    }

    // MARK: Incoming

    /// The result as the app's backend forwards it, for a merchant without API credentials that
    /// takes results unconfirmed: the URI is parsed and checked against the order.
    @Test(arguments: VivaCorpus.all.of(kind: "saleCallback"))
    func saleCallbackIsReadAsDocumented(_ fixture: Fixture) async throws {
        let uri = try #require(fixture.text)
        let parsed = try VivaSaleCallback(uri: uri)
        for key in ["transactionId", "referenceNumber", "authorisationCode", "accountNumber", "transactionDate"] {
            if let expected = fixture.meaning(key) { #expect(parsed.result[key] == expected, "\(fixture): \(key)") }
        }

        let viva = VivaConfig(
            merchantKey: vivaConfig.merchantKey, appId: vivaConfig.appId, callback: vivaConfig.callback, acceptUnconfirmedCallbacks: true)
        let connector = await Self.connector(viva)
        let order = Self.order(forResult: fixture)
        let body: JSONValue = ["orderId": .string(order.orderId), "uri": .string(uri)]
        let decision = try await connector.forwardedResult(
            body.bytes, context: CallbackContext(orders: CountingLookup([order]), http: FakeVivaAPI(), remoteAddress: "127.0.0.1"))
        Self.check(decision.verdict, against: fixture)
        if case .succeeded(let result)? = decision.verdict { #expect(result["confirmed"] == false) }
    }

    /// Viva's record decides a forwarded result: the seed's approved URI is confirmed against each
    /// documented transactions-API answer, with the documented token answer.
    @Test(arguments: VivaCorpus.all.of(kind: "transactionResponse"))
    func transactionAnswerDecidesTheOrder(_ fixture: Fixture) async {
        let api = CorpusVivaAPI(token: VivaCorpus.all.named("tokenResponse--bearer"), transaction: fixture)
        let viva = VivaConfig(merchantKey: vivaConfig.merchantKey, appId: vivaConfig.appId, callback: vivaConfig.callback, api: apiCredentials)
        let connector = await Self.connector(viva)
        let order = Order(
            orderId: Self.orderId, operation: .sale, amount: fixture.meaning("orderAmount")?.integerValue ?? 1200, currency: "EUR",
            params: ["clientTransactionId": "12345678901234567890123456789012"])
        let body: JSONValue = ["orderId": .string(Self.orderId), "uri": .string(seedApprovedURI)]
        do {
            let decision = try await connector.forwardedResult(
                body.bytes, context: CallbackContext(orders: CountingLookup([order]), http: api, remoteAddress: "127.0.0.1"))
            Self.check(decision.verdict, against: fixture)
            if case .succeeded(let result)? = decision.verdict { #expect(result["confirmed"] == true) }
        } catch {
            guard let status = fixture.meaning("rejectionStatus")?.integerValue else {
                Issue.record("\(fixture): refused \(error.status) \(error.code.rawValue): \(error.message)")
                return
            }
            #expect(Int64(error.status) == status, "\(fixture)")
            #expect(error.code.rawValue == fixture.meaning("errorCode")?.stringValue, "\(fixture)")
        }
    }

    @Test(arguments: VivaCorpus.all.of(kind: "tokenResponse"))
    func tokenAnswerIsUsedAsTheBearer(_ fixture: Fixture) async throws {
        let api = CorpusVivaAPI(token: fixture, transaction: VivaCorpus.all.named("transactionResponse--completed-integer-amount"))
        _ = try await VivaTransactionsClient().transaction(
            "c90d4902-6245-449f-b2b0-51d99cd09cfe", api: apiCredentials, http: api)
        let lookup = try #require(api.requests.withLock { $0.last })
        #expect(lookup.header("Authorization") == "Bearer " + (fixture.meaning("bearer")?.stringValue ?? "?"))
    }
}

import Foundation
import PaypipeCore
import Synchronization
import Testing

@testable import Viva

/// Viva's API as a fake transport: counts requests, answers from a table of transactions.
final class FakeVivaAPI: ProviderHTTPTransport {
    struct State {
        var tokenRequests: [HTTPRequestSpec] = []
        var transactionRequests: [HTTPRequestSpec] = []
        var transactions: [String: JSONValue] = [:]
        var tokenStatus = 200
        var transactionStatus: Int?
        var expiresIn: Int64 = 300
        var issued = 0
    }

    let state = Mutex(State())

    func execute(_ request: HTTPRequestSpec) async -> Result<HTTPResponseSpec, TransportFailure> {
        state.withLock { state in
            if request.url.hasSuffix("/connect/token") {
                state.tokenRequests.append(request)
                guard state.tokenStatus == 200 else { return .success(HTTPResponseSpec(status: state.tokenStatus)) }
                state.issued += 1
                let body: JSONValue = [
                    "access_token": .string("tok-\(state.issued)"), "expires_in": .integer(state.expiresIn), "token_type": "Bearer",
                ]
                return .success(HTTPResponseSpec(status: 200, body: body.bytes))
            }
            state.transactionRequests.append(request)
            if let status = state.transactionStatus { return .success(HTTPResponseSpec(status: status)) }
            let id = String(request.url.split(separator: "/").last ?? "")
            guard let transaction = state.transactions[id] else { return .success(HTTPResponseSpec(status: 404)) }
            return .success(HTTPResponseSpec(status: 200, body: transaction.bytes))
        }
    }
}

/// Order lookups that count how often they were asked.
final class CountingLookup: CallbackOrderLookup {
    let orders: [String: Order]
    let asked = Mutex(0)
    init(_ orders: [Order]) { self.orders = Dictionary(uniqueKeysWithValues: orders.map { ($0.orderId, $0) }) }

    func order(_ key: OrderKey, provider: Provider) async throws(CallbackRejection) -> Order {
        asked.withLock { $0 += 1 }
        guard let order = orders[key.orderId], key.merchant == order.merchant else { throw .orderNotFound(provider, merchant: key.merchant) }
        return order
    }

    func order(reference: String, provider: Provider, merchant: String) async throws(CallbackRejection) -> Order {
        asked.withLock { $0 += 1 }
        throw .orderNotFound(provider, merchant: merchant)
    }
}

let seedTransactionId = "a78e045c-49c3-4743-9071-f1e0ed71810c"
let apiCredentials = VivaAPICredentials(
    apiURL: "http://viva.test/api", accountsURL: "http://viva.test/accounts", clientId: "client.apps", clientSecret: Secret("s3cret-value"))
let seedCallback = try! VivaSaleCallback(uri: seedApprovedURI)

func transaction(
    _ statusId: String = "F", amount: JSONValue = .fraction(12.00), merchantTrns: JSONValue = "12345678901234567890123456789012"
) -> JSONValue {
    ["statusId": .string(statusId), "amount": amount, "merchantTrns": merchantTrns, "currencyCode": "978"]
}

func rejectionOf(_ body: () throws -> Void) -> CallbackRejection? {
    do { try body() } catch let error as CallbackRejection { return error } catch { return nil }
    return nil
}

@Suite struct VivaConfirmationRuleTests {
    func verdict(
        _ statusId: String, amount: Int64 = 1200, merchantTrns: String? = "12345678901234567890123456789012",
        callback: VivaSaleCallback = seedCallback
    )
        throws(CallbackRejection) -> ProviderVerdict
    {
        try VivaConfirmation.verdict(
            for: VivaTransaction(statusId: statusId, amount: amount, merchantTrns: merchantTrns), callback: callback, order: seedOrder)
    }

    @Test func completedWithTheOrdersAmountAndReferenceSucceedsConfirmed() throws {
        guard case .succeeded(let result) = try verdict("F") else {
            Issue.record("expected success")
            return
        }
        #expect(result["confirmed"] == true)
        #expect(result["statusId"] == "F")
        #expect(result["amount"] == 1200)
        #expect(result["transactionId"] == .string(seedTransactionId))
    }

    @Test func vivasRecordDecidesNotTheForwardedStatus() throws {
        // The URI says fail, Viva says completed: money was taken, so the order succeeds.
        var failed = seedCallback
        failed.status = .fail
        guard case .succeeded(let result) = try verdict("F", callback: failed) else {
            Issue.record("expected success")
            return
        }
        #expect(result["status"] == "success")
        // The URI says success, Viva says error or cancelled: the sale failed.
        guard case .failed("VIVA_SALE_FAILED", _) = try verdict("E"), case .failed("VIVA_SALE_FAILED", _) = try verdict("X") else {
            Issue.record("expected failures")
            return
        }
        guard case .failed("VIVA_REFUNDED", _) = try verdict("R") else {
            Issue.record("expected refunded")
            return
        }
    }

    @Test func aTamperedURIAmountDoesNotMatterButVivasAmountDoes() throws {
        var tampered = seedCallback
        tampered.amount = 1
        guard case .succeeded = try verdict("F", callback: tampered) else {
            Issue.record("expected success")
            return
        }
        guard case .failed("AMOUNT_MISMATCH", let message) = try verdict("F", amount: 1) else {
            Issue.record("expected mismatch")
            return
        }
        #expect(message == "confirmed amount 1 != order amount 1200")
    }

    @Test func anotherSalesTransactionOrAnUnfinishedOneChangesNothing() {
        let other = rejectionOf { _ = try verdict("F", merchantTrns: "someone-else") }
        #expect(other?.status == 409 && other?.code == "REFERENCE_MISMATCH")
        #expect(rejectionOf { _ = try verdict("F", merchantTrns: nil) }?.code == "REFERENCE_MISMATCH")
        let inProgress = rejectionOf { _ = try verdict("A") }
        #expect(inProgress?.status == 409 && inProgress?.code == "NOT_FINAL")
    }

    @Test func amountsAreReadInMajorUnits() {
        #expect(VivaTransaction.minorUnits(.fraction(15.00)) == 1500)
        #expect(VivaTransaction.minorUnits(.fraction(10.5)) == 1050)
        #expect(VivaTransaction.minorUnits(.fraction(12.34)) == 1234)
        #expect(VivaTransaction.minorUnits(.fraction(0.29)) == 29)
        #expect(VivaTransaction.minorUnits(.integer(15)) == 1500)
        #expect(VivaTransaction.minorUnits(.fraction(1.005)) == nil)
        #expect(VivaTransaction.minorUnits(.fraction(-1)) == nil)
        #expect(VivaTransaction.minorUnits(.integer(Int64.max)) == nil)
        #expect(VivaTransaction.minorUnits("15.00") == nil)
        #expect(
            VivaTransaction(body: Array(#"{"statusId":"F","amount":15.00,"merchantTrns":"r"}"#.utf8))
                == VivaTransaction(statusId: "F", amount: 1500, merchantTrns: "r"))
        #expect(VivaTransaction(body: Array(#"{"amount":15.00}"#.utf8)) == nil)
        #expect(VivaTransaction(body: Array(#"{"statusId":"F","amount":1,"merchantTrns":5}"#.utf8)) == nil)
    }
}

@Suite struct VivaTransactionsClientTests {
    @Test func theTokenIsFetchedWithClientCredentialsAndCachedUntilShortlyBeforeExpiry() async throws {
        let api = FakeVivaAPI()
        api.state.withLock { $0.transactions[seedTransactionId] = transaction() }
        let clock = Mutex<Int64>(1_000_000)
        let client = VivaTransactionsClient(now: { clock.withLock { $0 } })
        _ = try await client.transaction(seedTransactionId, api: apiCredentials, http: api)
        _ = try await client.transaction(seedTransactionId, api: apiCredentials, http: api)
        #expect(api.state.withLock { $0.tokenRequests.count } == 1)
        let tokenRequest = try #require(api.state.withLock { $0.tokenRequests.first })
        #expect(tokenRequest.method == .POST && tokenRequest.url == "http://viva.test/accounts/connect/token")
        #expect(tokenRequest.header("Authorization") == "Basic " + Data("client.apps:s3cret-value".utf8).base64EncodedString())
        #expect(tokenRequest.header("Content-Type") == "application/x-www-form-urlencoded")
        #expect(tokenRequest.body == Array("grant_type=client_credentials".utf8))
        let fetch = try #require(api.state.withLock { $0.transactionRequests.last })
        #expect(fetch.method == .GET && fetch.url == "http://viva.test/api/checkout/v2/transactions/\(seedTransactionId)")
        #expect(fetch.header("Authorization") == "Bearer tok-1")
        #expect(!fetch.description.contains("tok-1"))

        // 300 s lifetime, renewed 60 s early.
        clock.withLock { $0 += 239_000 }
        _ = try await client.transaction(seedTransactionId, api: apiCredentials, http: api)
        #expect(api.state.withLock { $0.tokenRequests.count } == 1)
        clock.withLock { $0 += 1_000 }
        _ = try await client.transaction(seedTransactionId, api: apiCredentials, http: api)
        #expect(api.state.withLock { ($0.tokenRequests.count, $0.transactionRequests.last?.header("Authorization")) } == (2, "Bearer tok-2"))
    }

    @Test func failuresAreRefusalsThatChangeNothing() async {
        let api = FakeVivaAPI()
        let client = VivaTransactionsClient()
        func refusal() async -> CallbackRejection? {
            do { _ = try await client.transaction(seedTransactionId, api: apiCredentials, http: api) } catch { return error }
            return nil
        }
        let unknown = await refusal()
        #expect(unknown?.status == 404 && unknown?.code == "TRANSACTION_NOT_FOUND")
        api.state.withLock { $0.transactionStatus = 401 }
        #expect(await refusal()?.code == "VIVA_UNAVAILABLE")
        // A refused token is dropped: the next confirmation asks for a new one.
        api.state.withLock { $0.transactionStatus = 500 }
        #expect(await refusal()?.status == 503)
        #expect(api.state.withLock { $0.tokenRequests.count } == 2)
        api.state.withLock { $0.transactionStatus = 403 }
        _ = await refusal()
        api.state.withLock { $0.tokenStatus = 401 }
        let badCredentials = await refusal()
        #expect(badCredentials?.message.contains("token endpoint answered 401") == true)
        #expect(badCredentials?.status == 503 && badCredentials?.code == "VIVA_UNAVAILABLE")
        #expect(badCredentials?.message.contains("s3cret") == false)
    }
}

@Suite struct VivaForwardedResultTests {
    static let order = Order(
        orderId: "ord-viva-1", operation: .sale, amount: 1200, currency: "EUR",
        params: ["clientTransactionId": "12345678901234567890123456789012", "tipAmount": 200])

    func connector(_ viva: VivaConfig) async -> VivaConnector {
        await VivaConnector(config: PaypipeConfig(merchants: ["default": MerchantConfig(viva)]))
    }

    func forward(
        _ connector: VivaConnector, uri: String = seedApprovedURI, api: FakeVivaAPI, lookup: CountingLookup
    ) async -> Result<CallbackDecision, CallbackRejection> {
        let body: JSONValue = ["orderId": "ord-viva-1", "uri": .string(uri)]
        do {
            return .success(
                try await connector.forwardedResult(body.bytes, context: CallbackContext(orders: lookup, http: api, remoteAddress: "127.0.0.1")))
        } catch {
            return .failure(error)
        }
    }

    static func rejection(_ result: Result<CallbackDecision, CallbackRejection>) -> CallbackRejection? {
        if case .failure(let error) = result { return error }
        return nil
    }

    @Test func aConfirmedResultSucceedsAndAForgedOneIsRefusedBeforeAnyOrderLookup() async throws {
        let viva = VivaConfig(merchantKey: "K", appId: "A", callback: "interapp-callback", api: apiCredentials)
        let connector = await connector(viva)
        let api = FakeVivaAPI()
        let lookup = CountingLookup([Self.order])

        let forged = await forward(connector, api: api, lookup: lookup)
        #expect(Self.rejection(forged)?.code == "TRANSACTION_NOT_FOUND")
        #expect(lookup.asked.withLock { $0 } == 0)
        let malformed = await forward(connector, uri: "interapp-callback://result?status=success", api: api, lookup: lookup)
        #expect(Self.rejection(malformed)?.status == 400)
        #expect(lookup.asked.withLock { $0 } == 0)

        api.state.withLock { $0.transactions[seedTransactionId] = transaction() }
        guard case .success(let decision) = await forward(connector, api: api, lookup: lookup),
            case .succeeded(let result)? = decision.verdict
        else {
            Issue.record("expected a confirmed success")
            return
        }
        #expect(result["confirmed"] == true)
        #expect(decision.event == "ord-viva-1|\(seedTransactionId)")
    }

    @Test func withoutCredentialsOnlyAnOptInTakesTheURIUnconfirmed() async throws {
        let api = FakeVivaAPI()
        let lookup = CountingLookup([Self.order])
        let refusing = await connector(VivaConfig(merchantKey: "K", appId: "A", callback: "interapp-callback"))
        let refused = Self.rejection(await forward(refusing, api: api, lookup: lookup))
        #expect(refused?.status == 403 && refused?.code == "CONFIRMATION_UNAVAILABLE")
        #expect(lookup.asked.withLock { $0 } == 0)

        let accepting = await connector(VivaConfig(merchantKey: "K", appId: "A", callback: "interapp-callback", acceptUnconfirmedCallbacks: true))
        guard case .success(let decision) = await forward(accepting, api: api, lookup: lookup), case .succeeded(let result)? = decision.verdict else {
            Issue.record("expected an unconfirmed success")
            return
        }
        #expect(result["confirmed"] == false)
        #expect(api.state.withLock { $0.tokenRequests.count + $0.transactionRequests.count } == 0)
    }

    @Test func aConfirmedResultMustStillComeBackOnTheOrdersScheme() async {
        let viva = VivaConfig(merchantKey: "K", appId: "A", callback: "other-app", api: apiCredentials)
        let api = FakeVivaAPI()
        api.state.withLock { $0.transactions[seedTransactionId] = transaction() }
        let result = await forward(await connector(viva), api: api, lookup: CountingLookup([Self.order]))
        #expect(Self.rejection(result)?.code == "WRONG_CALLBACK_SCHEME")
    }
}

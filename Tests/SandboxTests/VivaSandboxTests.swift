import PaypipeCore
import Testing
import Viva
import VivaTesting

@testable import Sandbox
@testable import VivaEmulation

@Suite struct VivaSandboxTests {
    @Test func sandboxCallbacksValidateAgainstTheOrder() throws {
        let order = VivaFixtures.saleOrder(amount: 2500, ["clientTransactionId": "ref & co=1 ü", "tipAmount": 300, "installments": ["preferred": 3]])
        let url = try VivaSale.url(order: order, config: VivaFixtures.config)
        let sale = try VivaSandbox.readSale(url)
        let approved = VivaSandbox.approved(sale)
        #expect(try VivaSaleCallback(uri: approved.uri) == approved)
        let validation = try VivaSaleCallback.validate(uri: approved.uri, order: order, config: VivaFixtures.config)
        guard case .succeeded(let result) = validation.verdict else {
            Issue.record("expected success")
            return
        }
        #expect(result["tipAmount"] == 300 && result["amount"] == 2500 && result["installments"] == 3)
        #expect(VivaSandbox.approved(sale) == approved)

        let declined = VivaSandbox.declined(sale, message: "Insufficient funds")
        guard
            case .failed("VIVA_SALE_FAILED", _) = try VivaSaleCallback.validate(uri: declined.uri, order: order, config: VivaFixtures.config).verdict
        else {
            Issue.record("expected failure")
            return
        }
    }
}

@Suite struct VivaSandboxAPITests {
    static let api = VivaAPICredentials(
        apiURL: "http://sandbox/viva", accountsURL: "http://sandbox/viva", clientId: "client.apps", clientSecret: Secret("api-secret"))
    static let config = VivaConfig(merchantKey: "SG23323424EXS3", appId: "com.vivawallet.InterAppDemo", callback: "interapp-callback", api: api)

    static func relative(_ request: HTTPRequestSpec) -> HTTPRequestSpec {
        var copy = request
        copy.url = String(request.url.dropFirst("http://sandbox/viva".count))
        return copy
    }

    @Test func onlySalesItRecordedAreConfirmedAndOnlyWithValidClientCredentials() throws {
        let emulation = VivaEmulator(merchants: [("default", Self.config), ("other", VivaConfig(merchantKey: "OTHER", appId: "a", callback: "cb"))])
        let order = VivaFixtures.saleOrder(amount: 1050, ["clientTransactionId": "ref-1"])
        let sale = try VivaSandbox.readSale(try VivaSale.url(order: order, config: Self.config))
        let paid = emulation.handle(HTTPRequestSpec(method: .POST, url: "/sale", body: (["uri": .string(sale.url)] as JSONValue).bytes))
        #expect(paid.status == 200)
        let transactionId = try #require(VivaSandbox.approved(sale).transactionId)

        // Wrong secret or grant: no token.
        var wrong = Self.api
        wrong.clientSecret = Secret("guess")
        #expect(emulation.handle(Self.relative(VivaAPIRequests.token(wrong))).status == 401)
        var noGrant = Self.relative(VivaAPIRequests.token(Self.api))
        noGrant.body = Array("grant_type=password".utf8)
        #expect(emulation.handle(noGrant).status == 400)

        let tokenResponse = emulation.handle(Self.relative(VivaAPIRequests.token(Self.api)))
        #expect(tokenResponse.status == 200)
        let token = try #require((try JSONValue.parse(tokenResponse.body))["access_token"]?.stringValue)
        let fetched = emulation.handle(Self.relative(VivaAPIRequests.transaction(transactionId, api: Self.api, token: Secret(token))))
        #expect(fetched.status == 200)
        #expect(VivaTransaction(body: fetched.body) == VivaTransaction(statusId: "F", amount: 1050, merchantTrns: "ref-1"))
        let unknown = VivaSandbox.uuid(from: "never-paid")
        #expect(emulation.handle(Self.relative(VivaAPIRequests.transaction(unknown, api: Self.api, token: Secret(token)))).status == 404)
        #expect(emulation.handle(Self.relative(VivaAPIRequests.transaction(transactionId, api: Self.api, token: Secret("forged")))).status == 401)
        #expect(emulation.tokensIssued == 1)
    }
}

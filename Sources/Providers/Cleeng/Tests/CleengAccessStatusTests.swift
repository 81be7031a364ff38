import PaypipeCore
import Testing

@testable import Cleeng

func rpc(_ text: String, status: Int = 200) -> HTTPResponseSpec { HTTPResponseSpec(status: status, body: Array(text.utf8)) }

@Suite struct CleengAccessStatusTests {
    @Test func buildsTheJSONRPCRequest() throws {
        let order = receiptOrder(["ipAddress": "203.0.113.7"])
        let request = try CleengAccessStatusCall.request(order: order, config: config, requestId: 3)
        #expect(request.method == .POST)
        #expect(request.url == "http://127.0.0.1:9104/3.0/json-rpc")
        #expect(request.header("Authorization") == nil)
        #expect(
            try JSONValue.parse(request.body) == [
                "method": "getAccessStatus", "jsonrpc": "2.0", "id": 3,
                "params": ["customerToken": .string(seedToken), "offerId": "E123123123_US", "ipAddress": "203.0.113.7"],
            ])
        let withoutIP = try CleengAccessStatusCall.request(order: receiptOrder(), config: config, requestId: 1)
        #expect(try JSONValue.parse(withoutIP.body)["params"]?["ipAddress"] == nil)
    }

    @Test func grantedIsSucceededWithTheGrant() {
        let status = CleengAccessStatusCall.classify(
            rpc(
                #"{"result":{"accessGranted":true,"grantType":"purchase","expiresAt":1767225600,"purchasedDirectly":true},"error":null,"id":1,"jsonrpc":"2.0"}"#
            ),
            expectedId: 1)
        #expect(status == .granted(CleengAccessGrant(grantType: "purchase", expiresAt: 1_767_225_600, purchasedDirectly: true)))
        #expect(status.verdict == .succeeded(["accessGranted": true, "grantType": "purchase", "expiresAt": 1_767_225_600]))
    }

    @Test func grantedWithoutExpiryHasNullExpiresAt() {
        let status = CleengAccessStatusCall.classify(
            rpc(
                #"{"result":{"accessGranted":true,"grantType":"purchase","expiresAt":null,"purchasedDirectly":true},"error":null,"id":1,"jsonrpc":"2.0"}"#
            ))
        #expect(status.verdict == .succeeded(["accessGranted": true, "grantType": "purchase", "expiresAt": .null]))
    }

    @Test func notGrantedKeepsPolling() {
        let status = CleengAccessStatusCall.classify(
            rpc(
                #"{"result":{"accessGranted":false,"grantType":null,"expiresAt":null,"purchasedDirectly":false},"error":null,"id":1,"jsonrpc":"2.0"}"#
            ))
        #expect(status == .notGranted)
        #expect(status.verdict == nil)
    }

    @Test(arguments: [(Int64(1), "CLEENG_INVALID_CUSTOMER_TOKEN"), (4, "CLEENG_OFFER_NOT_FOUND"), (16, "CLEENG_INVALID_ARGUMENTS")])
    func fatalErrorsStopPolling(_ code: Int64, _ failure: String) {
        let status = CleengAccessStatusCall.classify(
            rpc(
                #"{"result":null,"error":{"code":\#(code),"message":"Nope"},"id":1,"jsonrpc":"2.0"}"#))
        #expect(status == .fatalError(code: code, message: "Nope"))
        guard case .failed(let got, let message)? = status.verdict else {
            Issue.record("expected failed")
            return
        }
        #expect(got.rawValue == failure)
        #expect(message.contains("\(code)") && message.contains("Nope"))
    }

    @Test(arguments: [
        rpc(#"{"result":null,"error":{"code":14,"message":"IP limit"},"id":1,"jsonrpc":"2.0"}"#),
        rpc(#"{"result":null,"error":{"code":99,"message":"?"},"id":1,"jsonrpc":"2.0"}"#),
        rpc(#"{"result":null,"error":{"code":"1","message":"string code"},"id":1,"jsonrpc":"2.0"}"#),
        rpc("<html>bad gateway</html>", status: 502),
        rpc(#"{"result":{"accessGranted":true}}"#, status: 503),
        rpc("not json"),
        rpc(#"{"result":{"accessGranted":"yes"},"error":null,"id":1}"#),
        rpc(#"{"result":null,"error":null,"id":1}"#),
        rpc(#"{"result":{"accessGranted":true},"error":null,"id":2}"#),
        rpc("[1,2]"),
    ])
    func everythingElseKeepsPolling(_ response: HTTPResponseSpec) {
        let status = CleengAccessStatusCall.classify(response, expectedId: 1)
        guard case .transient = status else {
            Issue.record("expected transient, got \(status)")
            return
        }
        #expect(status.verdict == nil)
    }
}

@Suite struct CleengPollingTests {
    @Test func defaultsAndOverridesInMilliseconds() async throws {
        let connector = await CleengConnector(config: PaypipeConfig(merchants: ["default": MerchantConfig(config)]))
        let standard = connector.pollingPolicy(timers: PaypipeConfig.Timers())
        #expect(standard.intervalMs == 5000 && standard.deadlineMs == 60000)
        #expect(standard.giveUpVerdict == .failed(code: "ACCESS_NOT_GRANTED", message: "access not granted within 60 s"))
        var timers = PaypipeConfig.Timers()
        timers[.cleengPollInterval] = 250
        timers[.cleengGiveUp] = 1500
        let quick = connector.pollingPolicy(timers: timers)
        #expect(quick.intervalMs == 250 && quick.deadlineMs == 1500)
        #expect(quick.giveUpVerdict == .failed(code: "ACCESS_NOT_GRANTED", message: "access not granted within 1500 ms"))
        #expect(CleengConnector.pollingPolicy(intervalMs: 0) == nil)
        #expect(CleengConnector.pollingPolicy(deadlineMs: -1) == nil)
    }

    @Test func aPollIsGetAccessStatusForTheReceiptsCustomerAndOffer() async throws {
        let connector = await CleengConnector(config: PaypipeConfig(merchants: ["default": MerchantConfig(config)]))
        let target = try connector.pollTarget(for: receiptOrder(["ipAddress": "203.0.113.7"]))
        let request = connector.pollRequest(target, requestId: 3)
        #expect(request == (try CleengAccessStatusCall.request(order: receiptOrder(["ipAddress": "203.0.113.7"]), config: config, requestId: 3)))
        let other = Order(orderId: "x", merchant: "nobody", operation: .appleReceipt, params: receiptOrder().params)
        #expect(throws: Rejection.self) { try connector.pollTarget(for: other) }
    }

    @Test func eachAnswerMeansEndedNotYetOrUnanswered() {
        let grant = CleengAccessGrant(grantType: "purchase")
        #expect(CleengAccessStatus.granted(grant).answer == .ended(.succeeded(grant.result)))
        #expect(CleengAccessStatus.notGranted.answer == .notYet)
        #expect(CleengAccessStatus.transient(reason: "HTTP 503").answer == .unanswered(reason: "HTTP 503"))
        guard case .ended(.failed("CLEENG_OFFER_NOT_FOUND", _)) = CleengAccessStatus.fatalError(code: 4, message: "x").answer else {
            Issue.record("a fatal error ends the order")
            return
        }
    }
}

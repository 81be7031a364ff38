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
        #expect(try JSONValue.parse(request.body) == [
            "method": "getAccessStatus", "jsonrpc": "2.0", "id": 3,
            "params": ["customerToken": .string(seedToken), "offerId": "E123123123_US", "ipAddress": "203.0.113.7"],
        ])
        let withoutIP = try CleengAccessStatusCall.request(order: receiptOrder(), config: config, requestId: 1)
        #expect(try JSONValue.parse(withoutIP.body)["params"]?["ipAddress"] == nil)
    }

    @Test func grantedIsSucceededWithTheGrant() {
        let status = CleengAccessStatusCall.classify(rpc(
            #"{"result":{"accessGranted":true,"grantType":"purchase","expiresAt":1767225600,"purchasedDirectly":true},"error":null,"id":1,"jsonrpc":"2.0"}"#),
            expectedId: 1)
        #expect(status == .granted(CleengAccessGrant(grantType: "purchase", expiresAt: 1_767_225_600, purchasedDirectly: true)))
        #expect(status.verdict == .succeeded(["accessGranted": true, "grantType": "purchase", "expiresAt": 1_767_225_600]))
    }

    @Test func grantedWithoutExpiryHasNullExpiresAt() {
        let status = CleengAccessStatusCall.classify(rpc(
            #"{"result":{"accessGranted":true,"grantType":"purchase","expiresAt":null,"purchasedDirectly":true},"error":null,"id":1,"jsonrpc":"2.0"}"#))
        #expect(status.verdict == .succeeded(["accessGranted": true, "grantType": "purchase", "expiresAt": .null]))
    }

    @Test func notGrantedKeepsPolling() {
        let status = CleengAccessStatusCall.classify(rpc(
            #"{"result":{"accessGranted":false,"grantType":null,"expiresAt":null,"purchasedDirectly":false},"error":null,"id":1,"jsonrpc":"2.0"}"#))
        #expect(status == .notGranted)
        #expect(status.verdict == nil)
    }

    @Test(arguments: [(Int64(1), "CLEENG_INVALID_CUSTOMER_TOKEN"), (4, "CLEENG_OFFER_NOT_FOUND"), (16, "CLEENG_INVALID_ARGUMENTS")])
    func fatalErrorsStopPolling(_ code: Int64, _ failure: String) {
        let status = CleengAccessStatusCall.classify(rpc(
            #"{"result":null,"error":{"code":\#(code),"message":"Nope"},"id":1,"jsonrpc":"2.0"}"#))
        #expect(status == .fatalError(code: code, message: "Nope"))
        guard case .failed(let got, let message)? = status.verdict else { Issue.record("expected failed"); return }
        #expect(got == failure)
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
        guard case .transient = status else { Issue.record("expected transient, got \(status)"); return }
        #expect(status.verdict == nil)
    }
}

@Suite struct CleengPollingPolicyTests {
    let accepted: Int64 = 1_700_000_000_000

    @Test func seedDefaults() {
        let policy = CleengPollingPolicy.standard
        #expect(policy.intervalMs == 5000 && policy.deadlineMs == 60000)
        #expect(policy.firstPollAt(acceptedAt: accepted) == accepted + 5000)
        #expect(policy.nextPollAt(after: accepted + 5000) == accepted + 10000)
        #expect(policy.isExpired(at: accepted + 60000, acceptedAt: accepted) == nil)
        #expect(policy.isExpired(at: accepted + 60001, acceptedAt: accepted)
            == .failed(code: "ACCESS_NOT_GRANTED", message: "access not granted within 60 s"))
    }

    @Test func overridesInMilliseconds() throws {
        let policy = try #require(CleengPollingPolicy(intervalMs: 250, deadlineMs: 1500))
        #expect(policy.firstPollAt(acceptedAt: 0) == 250)
        #expect(policy.giveUpVerdict == .failed(code: "ACCESS_NOT_GRANTED", message: "access not granted within 1500 ms"))
        #expect(CleengPollingPolicy(intervalMs: 0) == nil)
        #expect(CleengPollingPolicy(deadlineMs: -1) == nil)
        var timers = PaypipeConfig.Timers()
        timers.cleengPollIntervalMs = 1000
        timers.cleengGiveUpMs = 10000
        #expect(CleengPollingPolicy(timers: timers) == CleengPollingPolicy(intervalMs: 1000, deadlineMs: 10000))
    }
}

@Suite struct CleengReceiptPollerTests {
    let t0: Int64 = 1_700_000_000_000

    @Test func pollsEveryIntervalUntilGranted() {
        var poller = CleengReceiptPoller(acceptedAt: t0)
        #expect(poller.phase == .accepted)
        #expect(poller.tick(at: t0) == .wait(until: t0 + 5000))
        #expect(poller.tick(at: t0 + 5000) == .sendPoll(requestId: 1))
        #expect(poller.phase == .polling)
        #expect(poller.tick(at: t0 + 5100) == .wait(until: t0 + 60000 + 5000 + 1))
        #expect(poller.receive(.notGranted, requestId: 1, at: t0 + 5200) == .wait(until: t0 + 10000))
        #expect(poller.tick(at: t0 + 10000) == .sendPoll(requestId: 2))
        let grant = CleengAccessGrant(grantType: "purchase", expiresAt: nil, purchasedDirectly: true)
        #expect(poller.receive(.granted(grant), requestId: 2, at: t0 + 10300) == .emit(.succeeded(grant.result)))
        #expect(poller.phase == .granted)
        #expect(poller.tick(at: t0 + 15000) == .stop)
    }

    @Test func fatalErrorEndsAtOnce() {
        var poller = CleengReceiptPoller(acceptedAt: t0)
        _ = poller.tick(at: t0 + 5000)
        let action = poller.receive(.fatalError(code: 4, message: "Offer not found"), requestId: 1, at: t0 + 5100)
        guard case .emit(.failed(let code, _)) = action else { Issue.record("expected failure, got \(action)"); return }
        #expect(code == "CLEENG_OFFER_NOT_FOUND")
        #expect(poller.phase == .failed)
    }

    @Test func transientErrorsNeverShortenTheScheduleAndExpiryFollowsTheLastPoll() {
        var poller = CleengReceiptPoller(acceptedAt: t0)
        var now = t0
        var sent: [Int64] = []
        var final: CleengReceiptPoller.Action?
        while final == nil, now <= t0 + 120_000 {
            switch poller.tick(at: now) {
            case .sendPoll(let id):
                sent.append(now - t0)
                let status: CleengAccessStatus = id % 2 == 0 ? .transient(reason: "HTTP 503") : .fatalError(code: 14, message: "x").asTransient
                if case .emit(let verdict) = poller.receive(status, requestId: id, at: now + 50) { final = .emit(verdict) }
            case .emit(let verdict): final = .emit(verdict)
            case .wait, .stop: break
            }
            now += 50
        }
        #expect(sent == stride(from: Int64(5000), through: 60000, by: 5000).map { $0 })
        #expect(final == .emit(.failed(code: "ACCESS_NOT_GRANTED", message: "access not granted within 60 s")))
        #expect(poller.phase == .expired)
        #expect(poller.lastTransientReason != nil)
    }

    @Test func staleResultsAreIgnoredAndLateTicksSkipMissedSlots() {
        var poller = CleengReceiptPoller(acceptedAt: t0)
        #expect(poller.tick(at: t0 + 17_000) == .sendPoll(requestId: 1))
        #expect(poller.nextPollAt == t0 + 20_000)
        let grant = CleengAccessGrant(grantType: "purchase")
        #expect(poller.receive(.granted(grant), requestId: 7, at: t0 + 17_100) == .wait(until: t0 + 65_001))
        #expect(poller.phase == .polling)
        #expect(poller.receive(.notGranted, requestId: 1, at: t0 + 17_200) == .wait(until: t0 + 20_000))
    }

    @Test func aPollInFlightAtTheDeadlineIsAwaitedThenGivenUp() {
        var poller = CleengReceiptPoller(acceptedAt: t0)
        #expect(poller.tick(at: t0 + 60_000) == .sendPoll(requestId: 1))
        #expect(poller.tick(at: t0 + 62_000) == .wait(until: t0 + 65_001))
        let grant = CleengAccessGrant(grantType: "purchase")
        #expect(poller.receive(.granted(grant), requestId: 1, at: t0 + 62_500) == .emit(.succeeded(grant.result)))

        var silent = CleengReceiptPoller(acceptedAt: t0)
        _ = silent.tick(at: t0 + 60_000)
        guard case .emit(.failed("ACCESS_NOT_GRANTED", _)) = silent.tick(at: t0 + 65_001) else {
            Issue.record("a lost poll must not hold the receipt forever"); return
        }
    }

    @Test func noPollAfterTheDeadline() {
        var poller = CleengReceiptPoller(acceptedAt: t0)
        guard case .emit(.failed("ACCESS_NOT_GRANTED", _)) = poller.tick(at: t0 + 60_001) else {
            Issue.record("expected expiry"); return
        }
        #expect(poller.pollsSent == 0)
    }
}

extension CleengAccessStatus {
    /// Error 14 as the classifier reads it: it keeps polling.
    fileprivate var asTransient: CleengAccessStatus {
        CleengAccessStatusCall.classify(rpc(#"{"result":null,"error":{"code":14,"message":"IP limit"},"id":1,"jsonrpc":"2.0"}"#))
    }
}

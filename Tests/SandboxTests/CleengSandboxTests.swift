import Cleeng
import CleengTesting
import PaypipeCore
import TestSupport
import Testing

@testable import CleengEmulation
@testable import Sandbox

@Suite struct CleengSandboxTests {
    static func order(_ orderId: String, transactionId: String) -> Order {
        Order(
            orderId: orderId, operation: .appleReceipt,
            params: [
                "customerToken": "ZAP8dgKPIEgBulSZZBdyv1O0wzg1pucyHf8gUGg2X6ZhdRaH", "offerId": "E123123123_US",
                "receiptData": "eyJzaWduYXR1cmUiOiJBQXBVY21WalpXbHdkQT09In0=", "transactionId": .string(transactionId),
            ])
    }

    @Test func accessFlipsToGrantedAfterTheConfiguredDelay() async throws {
        try await withSandbox(SandboxConfiguration().with { $0.cleeng.grantAfterMilliseconds = 3000 }) { sandbox in
            let config = try #require(try Fixtures.merchant(sandbox.config).cleeng)
            let order = Self.order("cl-flow", transactionId: "1000000123456789")
            let receipt = try CleengReceipt(order: order)
            let access = try CleengAccessStatusCall.request(order: order, config: config, requestId: 7)
            #expect(access.url == "http://127.0.0.1:\(sandbox.port)/cleeng/3.0/json-rpc")

            // No receipt yet: not granted.
            #expect(CleengAccessStatusCall.classify(try await sandbox.send(access), expectedId: 7) == .notGranted)

            let sent = ContinuousClock.now
            let response = try await sandbox.send(try CleengReceipt.request(order: order, config: config))
            #expect(response.status == 200)
            #expect(CleengReceiptResponse.classify(response, receipt: receipt).kind == "pending")
            #expect(CleengAccessStatusCall.classify(try await sandbox.send(access), expectedId: 7) == .notGranted)

            // Read until granted: never before the delay, and not long after it.
            var granted: CleengAccessStatus?
            _ = await eventually(within: .seconds(10)) {
                granted = (try? await sandbox.send(access)).map { CleengAccessStatusCall.classify($0, expectedId: 7) }
                if case .granted = granted { return true }
                return false
            }
            guard case .granted = granted else {
                Issue.record("expected access granted, got \(granted)")
                return
            }
            #expect(ContinuousClock.now - sent >= .milliseconds(3000), "granted before the configured delay")
            #expect(sandbox.ledger.effects("cleeng:1000000123456789") == 1)
        }
    }

    @Test func accessIsNeverGrantedWhenDisabled() async throws {
        try await withSandbox(SandboxConfiguration().with { $0.cleeng.grantAfterMilliseconds = nil }) { sandbox in
            let config = try #require(try Fixtures.merchant(sandbox.config).cleeng)
            let order = Self.order("cl-never", transactionId: "1000000000000042")
            _ = try await sandbox.send(try CleengReceipt.request(order: order, config: config))
            try await Task.sleep(for: .milliseconds(50))
            let access = try CleengAccessStatusCall.request(order: order, config: config, requestId: 1)
            #expect(CleengAccessStatusCall.classify(try await sandbox.send(access)) == .notGranted)
        }
    }

    @Test func aWrongPasswordIsRefusedWith401() async throws {
        try await withSandbox { sandbox in
            var config = try #require(try Fixtures.merchant(sandbox.config).cleeng)
            config.password = Secret("wrong-password")
            let order = Self.order("cl-401", transactionId: "1000000000000401")
            let response = try await sandbox.send(try CleengReceipt.request(order: order, config: config))
            #expect(response.status == 401)
            #expect(CleengReceiptResponse.classify(response, receipt: try CleengReceipt(order: order)).kind == "failed:CLEENG_UNAUTHORIZED")
            #expect(sandbox.ledger.effects("cleeng:1000000000000401") == 0)
            #expect(sandbox.ledger.requests("cleeng:1000000000000401") == 1)
        }
    }

    @Test func aMalformedAccessRequestGetsError16() async throws {
        try await withSandbox { sandbox in
            let response = try await sandbox.send(
                HTTPRequestSpec(
                    method: .POST, url: "http://127.0.0.1:\(sandbox.port)/cleeng/3.0/json-rpc",
                    body: Array(#"{"method":"getAccessStatus","params":{"offerId":"E1"},"jsonrpc":"2.0","id":3}"#.utf8)))
            #expect(CleengAccessStatusCall.classify(response) == .fatalError(code: 16, message: "Invalid arguments: customerToken is required"))
        }
    }
}

// MARK: The emulator on its own, without the server

extension CleengSandboxTests {
    @Test func acceptsWhatTheSignerBuilds() throws {
        let request = try CleengReceipt.request(order: CleengFixtures.receiptOrder(), config: CleengFixtures.config)
        let check = CleengSandbox.verifyReceiptRequest(request, username: "publisher", password: Secret("s3cr3t-pa55"))
        #expect(check.response.status == 200)
        #expect(check.receipt?.transactionId == "1000000123456789")
        guard case .pending = CleengReceiptResponse.classify(check.response, offerId: "E123123123_US", transactionId: "1000000123456789") else {
            Issue.record("the sandbox's acceptance must classify as pending")
            return
        }
    }

    @Test func refusesWrongCredentials() throws {
        var request = try CleengReceipt.request(order: CleengFixtures.receiptOrder(), config: CleengFixtures.config)
        let check = CleengSandbox.verifyReceiptRequest(request, username: "publisher", password: Secret("other"))
        #expect(check.response.status == 401)
        #expect(check.receipt == nil)
        request.headers.removeAll { $0.name == "Authorization" }
        #expect(CleengSandbox.verifyReceiptRequest(request, username: "publisher", password: Secret("s3cr3t-pa55")).response.status == 401)
    }

    @Test(arguments: ["customerToken", "offerId", "receiptData", "transactionId"])
    func refusesBodiesMissingAField(_ field: String) throws {
        var request = try CleengReceipt.request(order: CleengFixtures.receiptOrder(), config: CleengFixtures.config)
        guard case .object(var body) = try JSONValue.parse(request.body) else {
            Issue.record("body")
            return
        }
        body[field] = nil
        request.body = Array(JSONValue.object(body).serialized.utf8)
        let check = CleengSandbox.verifyReceiptRequest(request, username: "publisher", password: Secret("s3cr3t-pa55"))
        #expect(check.response.status == 400)
        #expect(String(decoding: check.response.body, as: UTF8.self).contains(field))
        #expect(!String(decoding: check.response.body, as: UTF8.self).contains(CleengFixtures.receiptBase64))
    }

    @Test func accessStatusRoundTrip() throws {
        let request = try CleengAccessStatusCall.request(
            order: CleengFixtures.receiptOrder(["ipAddress": "2001:db8::1"]), config: CleengFixtures.config, requestId: 9)
        let query = try CleengSandbox.parseAccessStatusRequest(request.body).get()
        #expect(
            query.id == 9 && query.customerToken == CleengFixtures.seedToken && query.offerId == "E123123123_US" && query.ipAddress == "2001:db8::1")

        let granted = CleengSandbox.accessStatusResponse(id: query.id, grant: CleengAccessGrant(grantType: "purchase", expiresAt: 1_800_000_000))
        #expect(
            CleengAccessStatusCall.classify(granted, expectedId: 9)
                == .granted(CleengAccessGrant(grantType: "purchase", expiresAt: 1_800_000_000, purchasedDirectly: true)))
        #expect(CleengAccessStatusCall.classify(CleengSandbox.accessStatusResponse(id: 9, grant: nil), expectedId: 9) == .notGranted)
        let error = CleengSandbox.accessStatusError(id: 9, code: 1, message: CleengSandbox.standardMessage(for: 1))
        #expect(CleengAccessStatusCall.classify(error, expectedId: 9) == .fatalError(code: 1, message: "Invalid customer token"))
        guard case .transient = CleengAccessStatusCall.classify(CleengSandbox.accessStatusError(id: 9, code: 14, message: "IP limit reached")) else {
            Issue.record("14 keeps polling")
            return
        }
    }

    @Test func malformedAccessRequestsGetErrors() {
        func code(_ text: String) -> Int64? {
            if case .failure(let error) = CleengSandbox.parseAccessStatusRequest(Array(text.utf8)) { return error.code }
            return nil
        }
        #expect(code("nope") == -32700)
        #expect(code(#"{"method":"getCustomer","params":{},"jsonrpc":"2.0","id":1}"#) == -32601)
        #expect(code(#"{"method":"getAccessStatus","params":{"offerId":"E1"},"jsonrpc":"2.0","id":1}"#) == 16)
        #expect(code(#"{"method":"getAccessStatus","params":{"customerToken":"t","offerId":"E1","ipAddress":"x"},"jsonrpc":"2.0","id":1}"#) == 16)
        #expect(code(#"{"method":"getAccessStatus","params":{"customerToken":"t","offerId":"E1"},"jsonrpc":"2.0","id":1}"#) == nil)
    }
}

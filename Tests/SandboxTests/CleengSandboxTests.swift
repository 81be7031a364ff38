import Cleeng
import PaypipeCore
import Testing

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
        try await withSandbox(SandboxConfiguration(cleengGrantAfterMilliseconds: 400)) { sandbox in
            let config = try #require(try Fixtures.merchant(sandbox.config).cleeng)
            let order = Self.order("cl-flow", transactionId: "1000000123456789")
            let receipt = try CleengReceipt(order: order)
            let access = try CleengAccessStatusCall.request(order: order, config: config, requestId: 7)
            #expect(access.url == "http://127.0.0.1:\(sandbox.port)/cleeng/3.0/json-rpc")

            // No receipt yet: not granted.
            #expect(CleengAccessStatusCall.classify(try await sandbox.send(access), expectedId: 7) == .notGranted)

            let response = try await sandbox.send(try CleengReceipt.request(order: order, config: config))
            #expect(response.status == 200)
            #expect(CleengReceiptResponse.classify(response, receipt: receipt).kind == "pending")
            #expect(CleengAccessStatusCall.classify(try await sandbox.send(access), expectedId: 7) == .notGranted)

            try await Task.sleep(for: .milliseconds(450))
            let granted = CleengAccessStatusCall.classify(try await sandbox.send(access), expectedId: 7)
            guard case .granted = granted else {
                Issue.record("expected access granted, got \(granted)")
                return
            }
            #expect(sandbox.ledger.effects("cleeng:1000000123456789") == 1)
        }
    }

    @Test func accessIsNeverGrantedWhenDisabled() async throws {
        try await withSandbox(SandboxConfiguration(cleengGrantAfterMilliseconds: nil)) { sandbox in
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
            let response = try await sandbox.send(HTTPRequestSpec(
                method: .POST, url: "http://127.0.0.1:\(sandbox.port)/cleeng/3.0/json-rpc",
                body: Array(#"{"method":"getAccessStatus","params":{"offerId":"E1"},"jsonrpc":"2.0","id":3}"#.utf8)))
            #expect(CleengAccessStatusCall.classify(response) == .fatalError(code: 16, message: "Invalid arguments: customerToken is required"))
        }
    }
}

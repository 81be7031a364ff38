import Foundation
import PaypipeCore
import Testing
import TrustPayments

@testable import Sandbox

@Suite struct TrustPaymentsSandboxTests {
    static func updateOrder(_ orderId: String, amount: Int64, reference: String = "57-9-12345678") -> Order {
        Order(
            orderId: orderId, operation: .transactionUpdate,
            params: ["transactionReference": .string(reference), "updates": ["baseamount": .integer(amount)]])
    }

    @Test func anUpdateIsAcceptedAndClassifiedAsSucceeded() async throws {
        try await withSandbox { sandbox in
            let config = try #require(try Fixtures.merchant(sandbox.config).trustpayments)
            let request = try TPWebServices.request(for: Self.updateOrder("tp-ok", amount: 1050), config: config)
            #expect(request.http.url == "http://127.0.0.1:\(sandbox.port)/trustpayments/json/")
            let response = try await sandbox.send(request.http)
            #expect(response.status == 200)
            // The echoed requestreference is what classify insists on.
            let parsed = try TPWebServicesResponse(body: response.body)
            #expect(parsed.requestReference == request.requestReference)
            #expect(TPWebServices.classify(response, for: request).kind == "succeeded")
            #expect(sandbox.ledger.effects("trustpayments:" + request.requestReference) == 1)
            #expect(sandbox.ledger.requests("trustpayments:" + request.requestReference) == 1)
        }
    }

    @Test(arguments: [(Int64(70000), "failed:"), (60010, "retry"), (1050, "succeeded")])
    func testAmountsBehaveAsDocumented(amount: Int64, expected: String) async throws {
        try await withSandbox { sandbox in
            let config = try #require(try Fixtures.merchant(sandbox.config).trustpayments)
            let request = try TPWebServices.request(for: Self.updateOrder("tp-amount-\(amount)", amount: amount), config: config)
            let response = try await sandbox.send(request.http)
            #expect(response.status == 200)
            #expect(TPWebServices.classify(response, for: request).kind.hasPrefix(expected))
            let effects = sandbox.ledger.effects("trustpayments:" + request.requestReference)
            #expect(effects == (expected == "succeeded" ? 1 : 0))
        }
    }

    @Test func wrongWebServicesPasswordIsRefusedWith401() async throws {
        try await withSandbox { sandbox in
            var config = try #require(try Fixtures.merchant(sandbox.config).trustpayments)
            config.webservicesPassword = Secret("not-the-password")
            let request = try TPWebServices.request(for: Self.updateOrder("tp-401", amount: 1050), config: config)
            let response = try await sandbox.send(request.http)
            #expect(response.status == 401)
            #expect(TPWebServices.classify(response, for: request).kind == "failed:UNAUTHORIZED")
            #expect(sandbox.ledger.effects("trustpayments:" + request.requestReference) == 0)
            #expect(sandbox.ledger.requests("trustpayments:" + request.requestReference) == 1)
        }
    }

    @Test func aQueryFindsTheUpdateInPlace() async throws {
        try await withSandbox { sandbox in
            let config = try #require(try Fixtures.merchant(sandbox.config).trustpayments)
            let update = try TPWebServices.request(for: Self.updateOrder("tp-resolve", amount: 2500, reference: "57-9-55555555"), config: config)
            _ = try await sandbox.send(update.http)
            let query = TPWebServices.referenceQuery(
                transactionReference: "57-9-55555555", for: OrderKey(merchant: "default", orderId: "tp-resolve"), config: config)
            let answer = try await sandbox.send(query.http)
            #expect(TPWebServices.resolveUpdate(queryResponse: answer, query: query, update: update).kind == "succeeded")

            // A different amount is not in place: the module says the update may be sent again.
            let other = try TPWebServices.request(for: Self.updateOrder("tp-resolve-2", amount: 9999, reference: "57-9-55555555"), config: config)
            #expect(TPWebServices.resolveUpdate(queryResponse: answer, query: query, update: other).kind == "retry")
        }
    }

    @Test func anSDKPaymentIsFoundByAnOrderQuery() async throws {
        try await withSandbox { sandbox in
            let config = try #require(try Fixtures.merchant(sandbox.config).trustpayments)
            let order = Order(
                orderId: "tp-sdk-1", operation: .subscriptionJwt, amount: 1050, currency: "GBP",
                params: ["subscriptionType": "RECURRING", "unit": "MONTH", "frequency": 1, "number": 1, "finalNumber": 12])
            let expected = TPExpectedOrder(order: order, config: config)

            // Before the customer pays, the order query finds nothing: pending.
            let query = TPWebServices.orderQuery(for: order.key, config: config)
            let before = try await sandbox.send(query.http)
            #expect(TPWebServices.classifyOrderQuery(before, for: query, expected: expected).kind == "pending")

            let jwt = try TPJWTSigner(config: config).sign(order: order, issuedAt: Timestamp.nowMilliseconds() / 1000)
            let payment = try await sandbox.send(HTTPRequestSpec(
                method: .POST, url: "http://127.0.0.1:\(sandbox.port)/trustpayments/sdk/payment",
                headers: [HTTPHeader("Content-Type", "application/json")], body: Array(JSONValue.object(["jwt": .string(jwt)]).serialized.utf8)))
            #expect(payment.status == 200)
            let document = try JSONValue.parse(payment.body)
            #expect(document["jwt"]?.stringValue?.split(separator: ".").count == 3)

            let after = try await sandbox.send(query.http)
            let verdict = TPWebServices.classifyOrderQuery(after, for: query, expected: expected)
            #expect(verdict.kind == "succeeded")
        }
    }

    @Test func anSDKPaymentSignedWithAnotherSecretIsRefused() async throws {
        try await withSandbox { sandbox in
            var config = try #require(try Fixtures.merchant(sandbox.config).trustpayments)
            config.jwtSecret = Secret("another-secret-of-at-least-32-bytes-long!!")
            let order = Order(
                orderId: "tp-sdk-2", operation: .subscriptionJwt, amount: 1050, currency: "GBP",
                params: ["subscriptionType": "RECURRING", "unit": "MONTH", "frequency": 1, "number": 1, "finalNumber": 12])
            let jwt = try TPJWTSigner(config: config).sign(order: order, issuedAt: Timestamp.nowMilliseconds() / 1000)
            let payment = try await sandbox.send(HTTPRequestSpec(
                method: .POST, url: "http://127.0.0.1:\(sandbox.port)/trustpayments/sdk/payment",
                body: Array(JSONValue.object(["jwt": .string(jwt)]).serialized.utf8)))
            #expect(payment.status == 400)
            #expect(try await sandbox.ledgerDocument()["effects"] == .object([:]))
        }
    }
}

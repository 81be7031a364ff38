import Foundation
import PaypipeCore
import Testing
import TrustPayments
import TrustPaymentsTesting

@testable import Sandbox
@testable import TrustPaymentsEmulation

/// The emulator's REFUND, read with its own rules: a settled AUTH, never more than it captured,
/// and a request sent twice refunds twice.
@Suite struct TrustPaymentsRefundSandboxTests {
    static let auth: [String: JSONValue] = [
        "transactionreference": "57-9-11111111", "requesttypedescription": "AUTH", "errorcode": "0", "settlestatus": "100",
        "baseamount": "1050", "currencyiso3a": "GBP", "orderreference": "ord-1", "sitereference": "test_site12345",
    ]

    static func refund(_ orderId: String, amount: Int64, parent: String = "57-9-11111111") -> Order {
        Order(
            orderId: orderId, operation: .tpRefund, amount: amount, currency: "GBP",
            params: ["refundOf": "ord-1", "transactionReference": .string(parent)])
    }

    func emulator(_ auth: [String: JSONValue] = Self.auth) -> TrustPaymentsEmulator {
        let emulator = TrustPaymentsEmulator(merchants: [("default", TPFixtures.config)])
        emulator.merchants[0].store.withLock { $0.upsert(auth) }
        return emulator
    }

    func send(_ order: Order, to emulator: TrustPaymentsEmulator, ledger: SandboxLedger) throws -> String {
        let request = try TPWebServices.request(for: order, config: TPFixtures.config)
        let http = HTTPRequestSpec(method: .POST, url: TrustPaymentsEmulator.webServicesPath, headers: request.http.headers, body: request.http.body)
        return TPFixtures.kind(TPWebServices.classify(emulator.webServices(http, merchant: emulator.merchants[0], ledger: ledger), for: request))
    }

    @Test func partialRefundsUpToTheCaptureThenRefused() throws {
        let emulator = emulator(), ledger = SandboxLedger(keyLimit: 100)
        #expect(try send(Self.refund("rf-1", amount: 600), to: emulator, ledger: ledger) == "succeeded")
        #expect(try send(Self.refund("rf-2", amount: 451), to: emulator, ledger: ledger) == "failed:REFUND_AMOUNT_TOO_GREAT")
        #expect(try send(Self.refund("rf-3", amount: 450), to: emulator, ledger: ledger) == "succeeded")
        #expect(try send(Self.refund("rf-4", amount: 1), to: emulator, ledger: ledger) == "failed:REFUND_AMOUNT_TOO_GREAT")
        #expect(emulator.refundRequests().map(\.errorcode) == ["0", "20007", "0", "20007"])
    }

    @Test func theParentMustBeASettledAuthThatWasNotDeclined() throws {
        var unsettled = Self.auth
        unsettled["settlestatus"] = "0"
        var declined = Self.auth
        declined["errorcode"] = "70000"
        var subscription = Self.auth
        subscription["requesttypedescription"] = "SUBSCRIPTION"
        let ledger = SandboxLedger(keyLimit: 100)
        #expect(try send(Self.refund("rf-u", amount: 100), to: emulator(unsettled), ledger: ledger) == "failed:REFUND_PARENT_NOT_SETTLED")
        #expect(try send(Self.refund("rf-d", amount: 100), to: emulator(declined), ledger: ledger) == "failed:REFUND_PARENT_DECLINED")
        #expect(try send(Self.refund("rf-s", amount: 100), to: emulator(subscription), ledger: ledger) == "failed:REFUND_PARENT_NOT_AUTH")
        #expect(try send(Self.refund("rf-m", amount: 100, parent: "57-9-2"), to: emulator(), ledger: ledger) == "failed:REFUND_PARENT_NOT_FOUND")
        #expect(try send(Self.refund("rf-x", amount: 70000), to: emulator(), ledger: ledger) == "failed:REFUND_AMOUNT_TOO_GREAT")
    }

    @Test func aRefundSentTwiceRefundsTwiceAndIsFoundByItsOrderreference() throws {
        let emulator = emulator(), ledger = SandboxLedger(keyLimit: 100)
        let order = Self.refund("rf-twice", amount: 500)
        #expect(try send(order, to: emulator, ledger: ledger) == "succeeded")
        #expect(try send(order, to: emulator, ledger: ledger) == "succeeded")
        let requests = emulator.refundRequests()
        #expect(requests.count == 2)
        #expect(Set(requests.map(\.requestReference)).count == 1)
        let refunds = emulator.merchants[0].store.withLock { $0.refundsByParent["57-9-11111111"] ?? [] }
        #expect(refunds.count == 2)
        #expect(Set(refunds).count == 2)
        for reference in refunds { #expect(ledger.effects("trustpayments:refund:" + reference) == 1) }

        let refund = try TPWebServices.request(for: order, config: TPFixtures.config)
        let query = TPWebServices.orderQuery(for: order.key, config: TPFixtures.config)
        let http = HTTPRequestSpec(method: .POST, url: TrustPaymentsEmulator.webServicesPath, headers: query.http.headers, body: query.http.body)
        let answer = emulator.webServices(http, merchant: emulator.merchants[0], ledger: ledger)
        let verdict = TPWebServices.resolveRefund(queryResponse: answer, query: query, refund: refund, orderId: order.orderId, beforeResubmit: true)
        #expect(TPFixtures.kind(verdict) == "succeeded")
        let unseen = TPWebServices.orderQuery(for: Self.refund("rf-never", amount: 1).key, config: TPFixtures.config)
        let none = emulator.webServices(
            HTTPRequestSpec(method: .POST, url: TrustPaymentsEmulator.webServicesPath, headers: unseen.http.headers, body: unseen.http.body),
            merchant: emulator.merchants[0], ledger: ledger)
        let never = TPWebServices.resolveRefund(
            queryResponse: none, query: unseen, refund: try TPWebServices.request(for: Self.refund("rf-never", amount: 1), config: TPFixtures.config),
            orderId: "rf-never", beforeResubmit: true)
        #expect(TPFixtures.kind(never) == "neverSeen")
    }

    /// The engine's first AUTH becomes refundable once the sandbox's clock has settled it.
    @Test func theFirstAuthIsRefundableOnceSettledOverHTTP() async throws {
        try await withSandbox { sandbox in
            let config = try #require(try Fixtures.merchant(sandbox.config).trustpayments)
            let order = Order(
                orderId: "tp-pay-1", operation: .subscriptionJwt, amount: 1050, currency: "GBP",
                params: ["subscriptionType": "RECURRING", "unit": "MONTH", "frequency": 1, "number": 1, "finalNumber": 12])
            let jwt = try TPJWTSigner(config: config).sign(order: order, issuedAt: Timestamp.nowMilliseconds() / 1000)
            let payment = try await sandbox.send(
                HTTPRequestSpec(
                    method: .POST, url: "http://127.0.0.1:\(sandbox.port)/trustpayments/sdk/payment",
                    headers: [HTTPHeader("Content-Type", "application/json")], body: JSONValue.object(["jwt": .string(jwt)]).bytes))
            #expect(payment.status == 200)
            let query = TPWebServices.orderQuery(for: order.key, config: config)
            let found = TPWebServices.classifyOrderQuery(
                try await sandbox.send(query.http), for: query, expected: TPExpectedOrder(order: order, config: config))
            guard case .succeeded(let result) = found, let auth = result["transactionReference"]?.stringValue else {
                Issue.record("the payment must be found, got \(found)")
                return
            }
            let refund = try TPWebServices.request(for: Self.refund("tp-rf-1", amount: 1050, parent: auth), config: config)
            #expect(TPFixtures.kind(TPWebServices.classify(try await sandbox.send(refund.http), for: refund)) == "failed:REFUND_PARENT_NOT_SETTLED")

            let clock = try await sandbox.send(
                HTTPRequestSpec(
                    method: .POST, url: "http://127.0.0.1:\(sandbox.port)/_sandbox/clock", body: JSONValue.object(["advanceMs": 1]).bytes))
            #expect(clock.status == 200)
            #expect(TPFixtures.kind(TPWebServices.classify(try await sandbox.send(refund.http), for: refund)) == "succeeded")
            #expect(sandbox.ledger.requests("trustpayments:" + refund.requestReference) == 2)
        }
    }
}

import Foundation
import PaypipeCore
import Testing
import VivaTesting

@testable import Viva

@Suite struct VivaRefundTests {
    static let api = VivaAPICredentials(
        apiURL: "https://demo-api.vivapayments.com", accountsURL: "https://demo-accounts.vivapayments.com", clientId: "c", clientSecret: Secret("s"))

    static func refund(amount: Int64 = 600) throws -> VivaRefund {
        try VivaRefund(
            order: Order(
                orderId: "rf-1", operation: .vivaRefund, amount: amount, currency: "EUR",
                params: ["refundOf": "sale-1", "transactionId": "b1f5c1d2-aaaa"]))
    }

    static func answer(_ body: JSONValue, status: Int = 200) -> HTTPResponseSpec { HTTPResponseSpec(status: status, body: body.bytes) }

    static func kind(_ verdict: ProviderVerdict) -> String {
        switch verdict {
        case .failed(let code, _): "failed:\(code)"
        case .succeeded: "succeeded"
        case .unknown: "unknown"
        case .pending: "pending"
        case .retry: "retry"
        case .neverSeen: "neverSeen"
        }
    }

    /// PROVIDERS-MONEY §4 [VV-CANCEL-LEG]: `DELETE /api/transactions/{transactionId}?amount={cents}`.
    @Test func refundRequestShape() throws {
        let request = try Self.refund().request(api: Self.api, token: Secret("tok"))
        #expect(request.method == .DELETE)
        #expect(request.url == "https://demo-api.vivapayments.com/api/transactions/b1f5c1d2-aaaa?amount=600")
        #expect(request.header("Authorization") == "Bearer tok")
        #expect(request.body.isEmpty)
        #expect(!request.description.contains("tok"))
    }

    @Test func answers() throws {
        let refund = try Self.refund()
        let ok: JSONValue = ["TransactionId": "new-1", "StatusId": "F", "ErrorCode": 0, "ErrorText": .null]
        #expect(Self.kind(refund.classify(Self.answer(ok))) == "succeeded")
        #expect(Self.kind(refund.classify(Self.answer(["ErrorCode": 403, "ErrorText": "x"], status: 400))) == "failed:VIVA_REFUND_403")
        #expect(Self.kind(refund.classify(Self.answer(["TransactionId": "n", "StatusId": "A", "ErrorCode": 0]))) == "unknown")
        #expect(Self.kind(refund.classify(Self.answer(["TransactionId": "n", "StatusId": "E", "ErrorCode": 0]))) == "failed:VIVA_REFUND_0")
        #expect(Self.kind(refund.classify(HTTPResponseSpec(status: 502))) == "unknown")
        #expect(Self.kind(refund.classify(HTTPResponseSpec(status: 404))) == "failed:HTTP_404")
        // A lost answer: only a sale refunded in full (R, the refund's amount) settles it.
        let full: JSONValue = ["statusId": "R", "amount": .fraction(6.00), "merchantTrns": "x"]
        #expect(Self.kind(refund.resolve(Self.answer(full))) == "succeeded")
        #expect(Self.kind(try Self.refund(amount: 300).resolve(Self.answer(full))) == "unknown")
        #expect(Self.kind(refund.resolve(Self.answer(["statusId": "F", "amount": .fraction(6.00)]))) == "unknown")
    }

    @Test func theTokenLeadsToTheRefundOrTheRead() throws {
        let refund = try Self.refund()
        let token = Self.answer(["access_token": "t1", "expires_in": 300, "token_type": "Bearer"])
        #expect(refund.readToken(token, api: Self.api, resolving: false) == .followUp(refund.request(api: Self.api, token: Secret("t1"))))
        #expect(
            refund.readToken(token, api: Self.api, resolving: true)
                == .followUp(VivaAPIRequests.transaction("b1f5c1d2-aaaa", api: Self.api, token: Secret("t1"))))
        #expect(
            refund.readToken(HTTPResponseSpec(status: 503), api: Self.api, resolving: false)
                == .verdict(.retry(reason: "Viva's token endpoint answered HTTP 503 without an access_token")))
        guard case .verdict(.failed("VIVA_UNAUTHORIZED", _)) = refund.readToken(HTTPResponseSpec(status: 401), api: Self.api, resolving: false) else {
            Issue.record("refused credentials fail the refund")
            return
        }
    }

    @Test func capturesAndTargets() throws {
        let refunding = VivaRefunding()
        let refundOrder = Order(
            orderId: "rf-1", operation: .vivaRefund, amount: 600, currency: "EUR", params: ["refundOf": "sale-1", "transactionId": "abc"])
        #expect(refunding.refundTarget(of: refundOrder) == RefundTarget(originalOrderId: "sale-1", captureReference: "abc"))
        let sale = VivaFixtures.saleOrder(amount: 1200)
        let outcome = Outcome(
            orderId: sale.orderId, merchant: "default", provider: "viva", operation: "sale", status: .succeeded,
            result: ["transactionId": "abc", "amount": 1200])
        #expect(refunding.captures(of: sale, outcome: outcome) == [Capture(reference: "abc", amount: 1200, currency: "EUR")])
        var failed = outcome
        failed.status = .failed
        #expect(refunding.captures(of: sale, outcome: failed).isEmpty)
    }
}

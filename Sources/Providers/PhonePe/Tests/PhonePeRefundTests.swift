import Foundation
import PaypipeCore
import PhonePeTesting
import Testing

@testable import PhonePe

@Suite struct PhonePeRefundTests {
    static func refundOrder(
        _ orderId: String = "rf-1", amount: Int64 = 20000,
        params: [String: JSONValue] = ["refundOf": "debit-order-1", "originalTransactionId": "SCHED-TX-1"]
    ) -> Order {
        Order(orderId: orderId, operation: .phonePeRefund, amount: amount, currency: "INR", params: params)
    }

    static let merchant = PhonePeMerchant(config: Fixtures.config())

    static func envelope(_ status: Int = 200, success: Bool = true, code: String, data: JSONValue? = nil) -> HTTPResponseSpec {
        var object: [String: JSONValue] = ["success": .bool(success), "code": .string(code), "message": "msg"]
        if let data { object["data"] = data }
        return HTTPResponseSpec(status: status, body: JSONValue.object(object).bytes)
    }

    /// PROVIDERS-MONEY §3 [PP-B2S]: `POST /v3/credit/backToSource` with merchantId, a new
    /// transactionId, originalTransactionId, amount, merchantOrderId and message, base64 in
    /// `request`, X-VERIFY = sha256(base64 + path + salt) ### index.
    @Test func refundRequestShape() throws {
        let refund = try PhonePeRefund(order: Self.refundOrder())
        let (request, status) = try refund.requests(merchant: Self.merchant)
        #expect(request.method == .POST)
        #expect(request.url == "http://127.0.0.1:9103/v3/credit/backToSource")
        let payload = try #require(Fixtures.decodedPayload(request))
        #expect(
            payload == [
                "merchantId": "MERCHANTUAT", "transactionId": .string(refund.transactionId), "originalTransactionId": "SCHED-TX-1",
                "amount": 20000, "merchantOrderId": .string(refund.transactionId), "message": "refund",
            ])
        #expect(refund.transactionId.count == 35)
        #expect(refund.transactionId == (try PhonePeRefund(order: Self.refundOrder())).transactionId)
        #expect(refund.transactionId != (try PhonePeRefund(order: Self.refundOrder("rf-2"))).transactionId)
        let base64 = try #require(try JSONValue.parse(request.body)["request"]?.stringValue)
        #expect(
            request.header("X-VERIFY")
                == Digest.sha256Hex(Array((base64 + "/v3/credit/backToSource" + Fixtures.salt).utf8)) + "###1")
        let statusPath = "/v3/transaction/MERCHANTUAT/\(refund.transactionId)/status"
        #expect(status.method == .GET)
        #expect(status.url == "http://127.0.0.1:9103" + statusPath)
        #expect(status.header("X-VERIFY") == Digest.sha256Hex(Array((statusPath + Fixtures.salt).utf8)) + "###1")
    }

    @Test func refundParamRules() {
        func field(_ order: Order) -> String? {
            do {
                _ = try PhonePeRefund(order: order)
                return nil
            } catch { return error.field }
        }
        #expect(field(Self.refundOrder(params: ["originalTransactionId": "TX1"])) == "params.refundOf")
        #expect(field(Self.refundOrder(params: ["refundOf": "o-1"])) == "params.originalTransactionId")
        #expect(field(Self.refundOrder(params: ["refundOf": "o-1", "originalTransactionId": "TX 1"])) == "params.originalTransactionId")
        #expect(field(Self.refundOrder(params: ["refundOf": "o-1", "originalTransactionId": "TX1", "amount": 5])) == "params.amount")
        #expect(
            field(
                Order(orderId: "r", operation: .phonePeRefund, amount: 100, currency: "EUR", params: ["refundOf": "o", "originalTransactionId": "T"]))
                == "currency")
    }

    @Test(arguments: [
        (200, "PAYMENT_SUCCESS", "succeeded"), (200, "PAYMENT_PENDING", "pending"), (400, "INVALID_TRANSACTION_ID", "unknown"),
        (200, "INTERNAL_SERVER_ERROR", "unknown"), (503, "PAYMENT_ERROR", "unknown"), (400, "PAYMENT_ERROR", "failed:PAYMENT_ERROR"),
        (400, "EXCESS_REFUND_AMOUNT", "failed:EXCESS_REFUND_AMOUNT"), (401, "AUTHORIZATION_FAILED", "failed:AUTHORIZATION_FAILED"),
        (400, "BAD_REQUEST", "failed:BAD_REQUEST"), (404, "TRANSACTION_NOT_FOUND", "failed:TRANSACTION_NOT_FOUND"),
    ])
    func refundAnswers(status: Int, code: String, expected: String) throws {
        let refund = try PhonePeRefund(order: Self.refundOrder())
        let data: JSONValue = ["transactionId": .string(refund.transactionId), "amount": 20000, "providerReferenceId": "T123"]
        #expect(Fixtures.kind(refund.classify(Self.envelope(status, success: status == 200, code: code, data: data))) == expected)
    }

    @Test func statusReadings() throws {
        let refund = try PhonePeRefund(order: Self.refundOrder())
        func read(_ response: HTTPResponseSpec, beforeResubmit: Bool = false, finalCheck: Bool = false) -> String {
            Fixtures.kind(refund.classifyStatus(response, beforeResubmit: beforeResubmit, finalCheck: finalCheck))
        }
        let done = Self.envelope(code: "PAYMENT_SUCCESS", data: ["amount": 20000, "paymentState": "COMPLETED"])
        #expect(read(done) == "succeeded")
        #expect(read(Self.envelope(code: "PAYMENT_SUCCESS", data: ["amount": 19999])) == "failed:AMOUNT_MISMATCH")
        let pending = Self.envelope(code: "PAYMENT_PENDING", data: ["amount": 20000, "paymentState": "PENDING"])
        #expect(read(pending) == "pending")
        // At the last check a refund PhonePe still works on may yet be paid out: never "nothing moved".
        #expect(read(pending, finalCheck: true) == "unknown")
        let notFound = Self.envelope(404, success: false, code: "TRANSACTION_NOT_FOUND")
        #expect(read(notFound, beforeResubmit: true) == "neverSeen")
        #expect(read(notFound) == "unknown")
        #expect(read(Self.envelope(code: "PAYMENT_ERROR")) == "failed:PAYMENT_ERROR")
        #expect(read(Self.envelope(code: "SUCCESS", data: ["paymentState": "FAILED"])) == "failed:REFUND_FAILED")
    }

    @Test func theConnectorPollsAPendingRefundAndResolvesARedeliveryByStatus() async throws {
        let connector = await PhonePeConnector(config: PaypipeConfig(merchants: ["default": MerchantConfig(Fixtures.config())]))
        #expect(PhonePeConnector.operations.first { $0.operation == .phonePeRefund }?.movesMoney([:]) == true)
        #expect(connector.pendingFollowUp(for: .phonePeRefund, timers: PaypipeConfig.Timers()) != nil)
        let order = Self.refundOrder()
        guard case .request(let signed) = try connector.sign(order, purpose: .submit, nowSeconds: 0),
            case .request(let check)? = try connector.signStatusCheck(order, pending: [:], purpose: .statusCheck, nowSeconds: 0)
        else {
            Issue.record("a refund and its status check are HTTP requests")
            return
        }
        #expect(signed.request.url.hasSuffix("/v3/credit/backToSource"))
        #expect(check.request == signed.resolve)
        let exchange = Exchange(order: order, signed: signed, purpose: .submit, phase: .submitting)
        #expect(connector.redelivery(of: exchange) == .resolveFirst(try #require(signed.resolve)))
        #expect(connector.readFailure(.mayHaveBeenSent("reset"), of: signed.request, in: exchange) == .unknown(reason: "reset"))
        let pending = Self.envelope(code: "PAYMENT_PENDING")
        #expect(
            connector.read(pending, to: signed.request, in: exchange)
                == .verdict(.pending(["transactionId": .string(try PhonePeRefund(order: order).transactionId)])))
        let expiry = Exchange(order: order, signed: check, purpose: .expiryCheck, phase: .submitting)
        guard case .verdict(.unknown) = connector.read(pending, to: check.request, in: expiry) else {
            Issue.record("a refund pending at its last check is unknown")
            return
        }
    }

    @Test func capturesAndTargets() {
        let refunding = PhonePeRefunding()
        #expect(refunding.refundTarget(of: Self.refundOrder()) == RefundTarget(originalOrderId: "debit-order-1", captureReference: "SCHED-TX-1"))
        let debit = Order(
            orderId: "debit-order-1", operation: .debitExecute, amount: 39900, currency: "INR",
            params: ["subscriptionId": "S1", "merchantUserId": "U1", "transactionId": "SCHED-TX-1", "notificationId": "N1"])
        func outcome(_ status: Outcome.Status) -> Outcome {
            Outcome(
                orderId: debit.orderId, merchant: "default", provider: "phonepe", operation: "debitExecute", status: status,
                result: ["transactionId": "SCHED-TX-1", "providerReferenceId": "P1"])
        }
        #expect(refunding.captures(of: debit, outcome: outcome(.succeeded)) == [Capture(reference: "SCHED-TX-1", amount: 39900, currency: "INR")])
        #expect(refunding.captures(of: debit, outcome: outcome(.failed)).isEmpty)
        #expect(refunding.captures(of: Fixtures.order(), outcome: outcome(.succeeded)).isEmpty)
    }
}

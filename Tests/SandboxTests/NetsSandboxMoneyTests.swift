import NetsEasy
import NetsEasyTesting
import PaypipeCore
import Testing

@testable import NetsEasyEmulation

/// The sandbox charges a checkout's reservation and refunds charges as Nexi documents: never
/// beyond what is left, a repeated Idempotency-Key answered with its first answer and counted.
@Suite struct NetsSandboxMoneyTests {
    /// A completed checkout of the fixture's order (1050 SEK): its paymentId and subscriptionId.
    static func completed(_ sandbox: inout NetsSandbox) throws -> (paymentId: String, subscriptionId: String) {
        let paymentId = try NetsSandboxTests.createPayment(in: &sandbox)
        _ = sandbox.completeCheckout(paymentId: paymentId, timestampMilliseconds: NetsFixtures.now * 1000)
        let subscriptionId = try #require(sandbox.payments[paymentId]?.subscriptionId)
        return (paymentId, subscriptionId)
    }

    static func chargeOrder(_ orderId: String, paymentId: String, amount: Int64) -> Order {
        Order(orderId: orderId, operation: .netsChargePayment, amount: amount, currency: "SEK", params: ["paymentId": .string(paymentId)])
    }

    static func refundOrder(_ orderId: String, chargeId: String, paymentId: String, amount: Int64) -> Order {
        Order(
            orderId: orderId, operation: .netsRefund, amount: amount, currency: "SEK",
            params: ["refundOf": "x", "chargeId": .string(chargeId), "paymentId": .string(paymentId)])
    }

    @Test func aReservationIsChargedOnceAndNeverBeyondIt() throws {
        var sandbox = NetsSandboxTests.sandbox()
        let (paymentId, subscriptionId) = try Self.completed(&sandbox)
        let over = try NetsFirstCharge.sign(Self.chargeOrder("c-over", paymentId: paymentId, amount: 1051), config: NetsFixtures.config)
        #expect(sandbox.handle(over, now: NetsFixtures.now).status == 400)
        let charge = try NetsFirstCharge.sign(Self.chargeOrder("c-1", paymentId: paymentId, amount: 1050), config: NetsFixtures.config)
        let first = sandbox.handle(charge, now: NetsFixtures.now)
        let again = sandbox.handle(charge, now: NetsFixtures.now)
        #expect(first.status == 201 && again.status == 201 && first.body == again.body)
        #expect(sandbox.repeats[NetsPayments.idempotencyKey(for: OrderKey(merchant: "default", orderId: "c-1"))] == 1)
        // A second charge under a new key: nothing is left of the reservation.
        let second = try NetsFirstCharge.sign(Self.chargeOrder("c-2", paymentId: paymentId, amount: 1), config: NetsFixtures.config)
        #expect(sandbox.handle(second, now: NetsFixtures.now).status == 400)
        #expect(sandbox.totals(subscriptionId: subscriptionId) == NetsSandbox.Totals(charged: 1050, charges: 1, refunded: 0, refunds: 0))
        let read = NetsFirstCharge.readPayment(
            sandbox.handle(try NetsPayments.fetchPayment(paymentId: paymentId, config: NetsFixtures.config), now: NetsFixtures.now),
            order: Self.chargeOrder("c-1", paymentId: paymentId, amount: 1050))
        guard case .succeeded(let result) = read else {
            Issue.record("\(read)")
            return
        }
        #expect(result["chargedAmount"] == 1050)
    }

    @Test func refundsStayWithinTheirChargeAndReportTheirState() throws {
        var sandbox = NetsSandboxTests.sandbox()
        let (paymentId, subscriptionId) = try Self.completed(&sandbox)
        let charge = try NetsFirstCharge.sign(Self.chargeOrder("c-1", paymentId: paymentId, amount: 1050), config: NetsFixtures.config)
        let chargeId = try #require(try JSONValue.parse(sandbox.handle(charge, now: NetsFixtures.now).body)["chargeId"]?.stringValue)
        func refund(_ orderId: String, _ amount: Int64) throws -> HTTPResponseSpec {
            sandbox.handle(
                try NetsRefunds.sign(
                    Self.refundOrder(orderId, chargeId: chargeId, paymentId: paymentId, amount: amount), config: NetsFixtures.config),
                now: NetsFixtures.now)
        }
        #expect(try refund("r-1", 1000).status == 201)
        #expect(try refund("r-2", 51).status == 400, "only 50 is left")
        sandbox.failNextRefund = true
        #expect(try refund("r-3", 50).status == 201)
        #expect(try refund("r-4", 50).status == 201, "a failed refund gives its amount back")
        #expect(try refund("r-1", 1000).status == 201, "a repeated key is the first refund")
        #expect(sandbox.totals(subscriptionId: subscriptionId) == NetsSandbox.Totals(charged: 1050, charges: 1, refunded: 1050, refunds: 2))
        let payment = try JSONValue.parse(
            sandbox.handle(try NetsPayments.fetchPayment(paymentId: paymentId, config: NetsFixtures.config), now: NetsFixtures.now).body)
        #expect(payment["payment"]?["summary"]?["refundedAmount"] == 1050)
        #expect(payment["payment"]?["refunds"]?.arrayValue?.map { $0["state"]?.stringValue ?? "" }.sorted() == ["Completed", "Completed", "Failed"])
        let unknownCharge = Self.refundOrder("r-5", chargeId: "nosuchcharge", paymentId: paymentId, amount: 1)
        #expect(sandbox.handle(try NetsRefunds.sign(unknownCharge, config: NetsFixtures.config), now: NetsFixtures.now).status == 404)
    }
}

import NetsEasy
import PaypipeCore
import Testing

/// The first payment's charge and refunds, as the connector builds and reads them.
@Suite struct NetsMoneyTests {
    static let paymentId = "025400006091b1ef6937598058c4e487"
    static let chargeId = "aec0aceb9c1c4e5b9a2a1f3fdc5e4f44"

    static func succeededCreate(amount: Int64? = 1050) -> (Order, Outcome) {
        let order = Fixtures.createOrder(amount: amount)
        let outcome = Outcome(
            order: order, status: .succeeded, result: ["paymentId": .string(paymentId), "subscriptionId": "d079718bff6345dd947b4950c023750f"],
            attempts: 1)
        return (order, outcome)
    }

    static func refund(amount: Int64 = 500) -> Order {
        Order(
            orderId: "refund-1", operation: .netsRefund, amount: amount, currency: "SEK",
            params: ["refundOf": "ord-000123", "chargeId": .string(chargeId), "paymentId": .string(paymentId)])
    }

    static func payment(_ fields: String) -> HTTPResponseSpec {
        Fixtures.response(200, #"{"payment":{"paymentId":"\#(paymentId)",\#(fields)}}"#)
    }

    @Test func aCheckoutsReservationIsChargedByAnOrderOfItsOwnUnlessNetsChargesIt() throws {
        let (order, outcome) = Self.succeededCreate()
        let charge = try #require(NetsFirstCharge.order(after: order, outcome: outcome, mode: .charge))
        #expect(charge.operation == .netsChargePayment && charge.amount == 1050 && charge.currency == "SEK")
        #expect(charge.orderId == ScheduledAttempt.followingOrderId(of: order.key, purpose: "first") && charge.orderId.hasPrefix("sched-"))
        #expect(ScheduledAttempt.step(ofOrderId: charge.orderId) == nil, "not a scheduled cycle's id")
        #expect(NetsFirstCharge.order(after: order, outcome: outcome, mode: .checkout) == nil)
        let (verification, verified) = Self.succeededCreate(amount: nil)
        #expect(NetsFirstCharge.order(after: verification, outcome: verified, mode: .charge) == nil, "a verification charges nothing")

        let request = try NetsFirstCharge.sign(charge, config: Fixtures.config)
        #expect(request.method == .POST && request.url == "https://test.api.dibspayment.eu/v1/payments/\(Self.paymentId)/charges")
        #expect(request.header("Idempotency-Key") == NetsPayments.idempotencyKey(for: charge.key))
        #expect(try JSONValue.parse(request.body) == ["amount": 1050])
        #expect(NetsRequestKind(request) == .chargePayment)
    }

    @Test func checkoutModeAsksNetsToChargeAndChargeModeOnlyReserves() throws {
        var config = Fixtures.config
        config.firstPayment = .checkout
        let charged = try NetsPayments.createSubscription(Fixtures.createOrder(), config: config, now: Fixtures.now)
        #expect(try JSONValue.parse(charged.body)["checkout"]?["charge"] == true)
        let reserved = try NetsPayments.createSubscription(Fixtures.createOrder(), config: Fixtures.config, now: Fixtures.now)
        #expect(try JSONValue.parse(reserved.body)["checkout"]?["charge"] == nil, "charge mode only reserves at checkout")
    }

    @Test func aLostChargeAnswerIsSettledByThePayment() throws {
        let (order, outcome) = Self.succeededCreate()
        let charge = try #require(NetsFirstCharge.order(after: order, outcome: outcome, mode: .charge))
        let taken = NetsFirstCharge.readPayment(
            Self.payment(#""summary":{"reservedAmount":1050,"chargedAmount":1050},"charges":[{"chargeId":"\#(Self.chargeId)","amount":1050}]"#),
            order: charge)
        guard case .succeeded(let result) = taken else {
            Issue.record("\(taken)")
            return
        }
        #expect(result["chargeId"] == .string(Self.chargeId) && result["chargedAmount"] == 1050 && result["firstPaymentOf"] == "ord-000123")
        let untouched = NetsFirstCharge.readPayment(Self.payment(#""summary":{"reservedAmount":1050},"charges":[]"#), order: charge)
        guard case .neverSeen = untouched else {
            Issue.record("nothing charged: \(untouched)")
            return
        }
        let part = NetsFirstCharge.readPayment(
            Self.payment(#""summary":{"chargedAmount":500},"charges":[{"chargeId":"\#(Self.chargeId)","amount":500}]"#), order: charge)
        guard case .unknown = part else {
            Issue.record("part charged: \(part)")
            return
        }
        guard
            case .failed(code: .netsBadRequest, _) = NetsFirstCharge.readCharge(
                Fixtures.response(400, #"{"errors":{"amount":["x"]}}"#), order: charge)
        else {
            Issue.record("a refused charge fails")
            return
        }
    }

    @Test func aRefundIsPendingUntilThePaymentShowsItsState() throws {
        let order = Self.refund()
        let request = try NetsRefunds.sign(order, config: Fixtures.config)
        #expect(request.url == "https://test.api.dibspayment.eu/v1/charges/\(Self.chargeId)/refunds" && NetsRequestKind(request) == .refundCharge)
        #expect(try JSONValue.parse(request.body) == ["amount": 500])
        #expect(request.header("Idempotency-Key") == NetsPayments.idempotencyKey(for: order.key))
        guard case .pending(let pending) = NetsRefunds.readRefund(Fixtures.response(201, #"{"refundId":"r1"}"#), order: order) else {
            Issue.record("a refund answer is pending")
            return
        }
        #expect(pending["refundId"] == "r1" && pending["refundOf"] == "ord-000123")
        func state(_ state: String, lastCheck: Bool = false) -> ProviderVerdict {
            NetsRefunds.readState(
                Self.payment(#""refunds":[{"refundId":"r0","amount":9,"state":"Failed"},{"refundId":"r1","amount":500,"state":"\#(state)"}]"#),
                order: order, refundId: "r1", lastCheck: lastCheck)
        }
        guard case .succeeded(let done) = state("Completed") else {
            Issue.record("Completed succeeds")
            return
        }
        #expect(done["refundedAmount"] == 500)
        for failed in ["Failed", "Cancelled", "Expired"] {
            guard case .failed(code: .netsRefundFailed, _) = state(failed) else {
                Issue.record("\(failed) fails")
                return
            }
        }
        guard case .pending = state("Pending") else {
            Issue.record("Pending stays pending")
            return
        }
        guard case .unknown = state("Pending", lastCheck: true) else {
            Issue.record("Pending at the last check is not nothing moved")
            return
        }
        #expect(throws: Rejection.self) { try NetsRefunds.sign(Self.refund(amount: 0), config: Fixtures.config) }
    }

    @Test func refundsNameTheirCaptureAndChargesReportTheirs() async throws {
        let connector = await NetsConnector(config: PaypipeConfig(merchants: ["default": MerchantConfig(Fixtures.config)]))
        let refunding = try #require(connector.refunding)
        #expect(refunding.refundTarget(of: Self.refund()) == RefundTarget(originalOrderId: "ord-000123", captureReference: Self.chargeId))
        #expect(refunding.refundTarget(of: Fixtures.chargeOrder()) == nil)
        let charge = Fixtures.chargeOrder()
        let charged = Outcome(order: charge, status: .succeeded, result: ["paymentId": "p", "chargeId": "c1"], attempts: 1)
        #expect(refunding.captures(of: charge, outcome: charged) == [Capture(reference: "c1", amount: 1050, currency: "SEK")])
        let (order, reserved) = Self.succeededCreate()
        #expect(refunding.captures(of: order, outcome: reserved).isEmpty, "a reservation is not a capture")
        let following = try #require(connector.followingOrder(after: order, outcome: reserved))
        #expect(following.operation == .netsChargePayment)
    }
}

import NetsEasy
import PaypipeCore
import Testing

@testable import Sandbox

@Suite struct NetsSandboxTests {
    static func createOrder(_ orderId: String) -> Order {
        Order(
            orderId: orderId, operation: .createSubscription, amount: 1050, currency: "SEK",
            params: ["endDate": "2049-07-18T00:00:00+01:00", "interval": 30, "reference": "sub-42"])
    }

    static var now: Int64 { Timestamp.nowMilliseconds() / 1000 }

    @Test func anIdempotencyKeyReplayGetsTheFirstAnswerAndTakesEffectOnce() async throws {
        try await withSandbox(SandboxConfiguration(netsCompleteCheckoutAfterMilliseconds: nil)) { sandbox in
            let config = try #require(try Fixtures.merchant(sandbox.config).nets)
            let order = Self.createOrder("nets-replay")
            let request = try NetsPayments.sign(order, config: config, now: Self.now)
            #expect(request.url == "http://127.0.0.1:\(sandbox.port)/nets/v1/payments")
            let first = try await sandbox.send(request)
            let second = try await sandbox.send(request)
            #expect(first.status == 201)
            #expect(second.status == 201)
            #expect(first.body == second.body)
            #expect(NetsPayments.classifyCreate(first).kind == "pending")

            let key = "nets:" + NetsPayments.idempotencyKey(for: order.key)
            #expect(sandbox.ledger.requests(key) == 2)
            #expect(sandbox.ledger.effects(key) == 1)
            let document = try await sandbox.ledgerDocument()
            #expect(document["requests"]?[key] == .integer(2))
            #expect(document["effects"]?[key] == .integer(1))
            #expect(document["total"] == .integer(2))
        }
    }

    @Test func aWrongSecretKeyIsRefusedWith401() async throws {
        try await withSandbox { sandbox in
            var config = try #require(try Fixtures.merchant(sandbox.config).nets)
            config.secretKey = Secret("wrong-key")
            let request = try NetsPayments.sign(Self.createOrder("nets-401"), config: config, now: Self.now)
            let response = try await sandbox.send(request)
            #expect(response.status == 401)
            #expect(NetsPayments.classifyCreate(response).kind == "failed:NETS_UNAUTHORIZED")
            #expect(sandbox.ledger.effects("nets:" + NetsPayments.idempotencyKey(for: Self.createOrder("nets-401").key)) == 0)
        }
    }

    @Test func checkoutCompletesThenSubscriptionIsReadableChargeableAndTheWebhookArrives() async throws {
        try await Receiver.run { receiver, callbackPort in
            let settings = SandboxConfiguration(netsCompleteCheckoutAfterMilliseconds: 50)
            try await withSandbox(settings, callbackPort: callbackPort) { sandbox in
                let config = try #require(try Fixtures.merchant(sandbox.config).nets)
                let webhookURL = "http://127.0.0.1:\(callbackPort)/callbacks/nets"
                let create = try NetsPayments.sign(Self.createOrder("nets-flow"), config: config, now: Self.now, webhookURL: webhookURL)
                let created = try await sandbox.send(create)
                let paymentId = try #require(NetsPayments.classifyCreate(created).result?["paymentId"]?.stringValue)

                let deliveries = try await receiver.wait(for: 1)
                let delivery = try #require(deliveries.first)
                #expect(delivery.path == "/callbacks/nets")
                guard let event = try? NetsWebhook.verify(headers: delivery.headers, body: delivery.body, config: config) else {
                    Issue.record("webhook was not authentic")
                    return
                }
                #expect(event.paymentId == paymentId)
                #expect(event.kind == .checkoutCompleted)
                #expect(event.amount == 1050)

                // getSubscription: payment, then the subscription the module asks for next.
                let fetch = try NetsPayments.sign(
                    Order(orderId: "nets-get", operation: .getSubscription, params: ["paymentId": .string(paymentId)]), config: config, now: Self.now)
                let payment = try await sandbox.send(fetch)
                guard case .send(let next) = NetsPayments.handle(payment, to: fetch) else {
                    Issue.record("expected a subscription request after the payment")
                    return
                }
                let subscription = try await sandbox.send(next)
                let verdict = NetsPayments.classifySubscription(subscription)
                #expect(verdict.kind == "succeeded")
                let subscriptionId = try #require(verdict.result?["subscriptionId"]?.stringValue)

                let chargeOrder = Order(
                    orderId: "nets-charge", operation: .chargeSubscription, amount: 1050, currency: "SEK",
                    params: ["subscriptionId": .string(subscriptionId), "reference": "charge-1"])
                let charge = try NetsPayments.sign(chargeOrder, config: config, now: Self.now)
                let charged = try await sandbox.send(charge)
                #expect(NetsPayments.classifyCharge(charged).kind == "succeeded")
                #expect(sandbox.ledger.effects("nets:" + NetsPayments.idempotencyKey(for: chargeOrder.key)) == 1)
            }
        }
    }

    @Test func aChargeOfAnUnknownSubscriptionIsNotFound() async throws {
        try await withSandbox { sandbox in
            let config = try #require(try Fixtures.merchant(sandbox.config).nets)
            let chargeOrder = Order(
                orderId: "nets-charge-404", operation: .chargeSubscription, amount: 1050, currency: "SEK",
                params: ["subscriptionId": "d079718bff6345dd947b4950c023750f", "reference": "charge-1"])
            let response = try await sandbox.send(try NetsPayments.sign(chargeOrder, config: config, now: Self.now))
            #expect(response.status == 404)
            #expect(NetsPayments.classifyCharge(response).kind.hasPrefix("failed"))
            #expect(sandbox.ledger.effects("nets:" + NetsPayments.idempotencyKey(for: chargeOrder.key)) == 0)
        }
    }
}

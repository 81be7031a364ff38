import PaypipeCore
import NetsEasy
import Synchronization

/// Nets Easy under `/nets`: `POST /v1/payments`, `GET /v1/payments/{id}`,
/// `GET /v1/subscriptions/{id}`, `POST /v1/subscriptions/{id}/charges`, all answered by one
/// `NetsSandbox` per merchant (the merchant is the one whose secret key the request carries).
/// After a create, the emulated customer completes the hosted page and the registered
/// webhooks are delivered.
final class NetsEmulation: Sendable {
    final class Merchant: Sendable {
        let name: String
        let config: NetsConfig
        let sandbox: Mutex<NetsSandbox>
        init(name: String, config: NetsConfig) {
            self.name = name
            self.config = config
            sandbox = Mutex(NetsSandbox(secretKey: config.secretKey))
        }
    }

    let merchants: [Merchant]

    init(merchants: [(name: String, config: NetsConfig)]) {
        self.merchants = merchants.map { Merchant(name: $0.name, config: $0.config) }
    }

    /// The merchant whose secret key is the request's `Authorization` (compared in constant
    /// time), else the default one, whose sandbox then refuses the request with 401.
    func merchant(for request: HTTPRequestSpec) -> Merchant? {
        if merchants.count > 1, let authorization = request.header("Authorization") {
            if let match = merchants.first(where: { NetsSandbox.isSecretKey(authorization, $0.config.secretKey) }) { return match }
        }
        return merchants.first
    }

    func handle(_ request: HTTPRequestSpec, emulator: SandboxEmulator) -> HTTPResponseSpec {
        guard let merchant = merchant(for: request) else {
            return SandboxEmulator.json(404, ["error": "no merchant with nets is configured"])
        }
        let kind = NetsRequestKind(request)
        let now = SandboxEmulator.epochSeconds()
        let (response, created) = merchant.sandbox.withLock { sandbox in
            let before = sandbox.payments.count
            let response = sandbox.handle(request, now: now)
            return (response, sandbox.payments.count > before)
        }
        guard (200...299).contains(response.status), kind?.mayTakeEffect == true else { return response }
        if let key = request.header("Idempotency-Key") { emulator.ledger.tookEffect("nets:" + key.prefix(128)) }
        if created, let paymentId = (try? JSONValue.parse(response.body))?["paymentId"]?.stringValue,
            let delay = emulator.configuration.netsCompleteCheckoutAfterMilliseconds, delay >= 0
        {
            emulator.scheduler.schedule(afterMilliseconds: delay) { [emulator] in
                await Self.completeCheckout(paymentId: paymentId, merchant: merchant, emulator: emulator)
            }
        }
        return response
    }

    /// The customer paid on the hosted page: the subscription now exists; deliver the webhooks.
    static func completeCheckout(paymentId: String, merchant: Merchant, emulator: SandboxEmulator) async {
        let now = Timestamp.nowMilliseconds()
        let (registered, payment) = merchant.sandbox.withLock { sandbox in
            (sandbox.completeCheckout(paymentId: paymentId, timestampMilliseconds: now), sandbox.payments[paymentId])
        }
        var deliveries = registered
        if let override = emulator.configuration.netsWebhookURL {
            for index in deliveries.indices { deliveries[index].url = override }
            if deliveries.isEmpty, let payment, !merchant.config.webhookAuthorization.isEmpty {
                let content = NetsWebhookContent(
                    kind: .checkoutCompleted, eventId: "sbx" + Digest.sha256Hex(Array("checkout\u{0}\(paymentId)".utf8)).prefix(29),
                    paymentId: paymentId, amount: payment.amount, currency: payment.currency, reference: payment.reference,
                    timestampMilliseconds: now)
                let tampering: NetsWebhookTampering =
                    switch emulator.configuration.netsWebhookVariant {
                    case .genuine: .none
                    case .wrongAuthorization: .authorization("sandbox-forged-authorization")
                    case .wrongAmount: .amount(payment.amount + 1)
                    }
                deliveries = [NetsSandbox.webhookDelivery(content, config: merchant.config, url: override, tampering: tampering)]
            }
        }
        for delivery in deliveries {
            guard let url = delivery.url else { continue }
            let request = HTTPRequestSpec(method: .POST, url: url, headers: delivery.headers, body: delivery.body)
            await emulator.outbound.deliver(request, label: "nets webhook for payment \(paymentId)")
        }
    }
}

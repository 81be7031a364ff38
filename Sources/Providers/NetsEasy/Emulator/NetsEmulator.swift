import NetsEasy
import PaypipeCore
import Sandbox
import Synchronization

/// Nets Easy under `/nets`: `POST /v1/payments`, `GET /v1/payments/{id}`,
/// `PUT /v1/payments/{id}/terminate`, `GET /v1/subscriptions/{id}`,
/// `POST /v1/subscriptions/{id}/charges`, `GET /v1/subscriptions/{id}/charges/status`, all answered by one
/// `NetsSandbox` per merchant (the merchant is the one whose secret key the request carries).
/// After a create, the emulated customer completes the hosted page and the registered
/// webhooks are delivered.
package final class NetsEmulator: ProviderEmulator {
    package static let provider = Provider.nets

    package final class Merchant: Sendable {
        let name: String
        let config: NetsConfig
        let sandbox: Mutex<NetsSandbox>
        init(name: String, config: NetsConfig) {
            self.name = name
            self.config = config
            sandbox = Mutex(NetsSandbox(secretKey: config.secretKey))
        }
    }

    package let merchants: [Merchant]
    /// The last charge webhooks sent per subscriptionId, for `resendLast`.
    package let lastDeliveries = Mutex<[String: [NetsWebhookDelivery]]>([:])

    package func ledgerKey(_ request: HTTPRequestSpec) -> SandboxLedgerKey {
        .now(request.method == .POST ? request.header("Idempotency-Key") : nil)
    }

    package convenience init(config: PaypipeConfig) {
        self.init(merchants: SandboxMerchants.of(NetsConfig.self, in: config))
    }

    package init(merchants: [(name: String, config: NetsConfig)]) {
        self.merchants = merchants.map { Merchant(name: $0.name, config: $0.config) }
    }

    /// The merchant whose secret key is the request's `Authorization` (compared in constant
    /// time), else the default one, whose sandbox then refuses the request with 401.
    package func merchant(for request: HTTPRequestSpec) -> Merchant? {
        if merchants.count > 1, let authorization = request.header("Authorization") {
            if let match = merchants.first(where: { NetsSandbox.isSecretKey(authorization, $0.config.secretKey) }) { return match }
        }
        return merchants.first
    }

    package func handle(_ request: HTTPRequestSpec, context: SandboxContext) async -> HTTPResponseSpec {
        guard let merchant = merchant(for: request) else {
            return SandboxContext.json(404, ["error": "no merchant with nets is configured"])
        }
        let kind = NetsRequestKind(request)
        let now = SandboxContext.epochSeconds()
        let (response, created, deliveries) = merchant.sandbox.withLock { sandbox in
            let before = sandbox.payments.count
            let response = sandbox.handle(request, now: now)
            return (response, sandbox.payments.count > before, sandbox.takeDeliveries())
        }
        if !deliveries.isEmpty {
            if let subscriptionId = deliveries.compactMap({ (try? JSONValue.parse($0.body))?["data"]?["subscriptionId"]?.stringValue }).first {
                lastDeliveries.withLock { $0[subscriptionId] = deliveries }
            }
            // Nets sends a charge's webhooks after it has answered the charge.
            context.scheduler.schedule(afterMilliseconds: 50) { [context] in
                for delivery in deliveries {
                    guard let url = delivery.url else { continue }
                    await context.outbound.deliver(
                        HTTPRequestSpec(method: .POST, url: url, headers: delivery.headers, body: delivery.body), label: "nets charge webhook")
                }
            }
        }
        guard (200...299).contains(response.status), kind?.mayTakeEffect == true else { return response }
        if let key = request.header("Idempotency-Key") { context.ledger.tookEffect("nets:" + key.prefix(128)) }
        if created, let paymentId = (try? JSONValue.parse(response.body))?["paymentId"]?.stringValue,
            let delay = context.configuration.nets.completeCheckoutAfterMilliseconds, delay >= 0
        {
            context.scheduler.schedule(afterMilliseconds: delay) { [context] in
                await Self.completeCheckout(paymentId: paymentId, merchant: merchant, context: context)
            }
        }
        return response
    }

    /// The customer paid on the hosted page: the subscription now exists; deliver the webhooks
    /// the payment registered, and only those (none registered, none sent: the pipeline then
    /// learns of it with `GET /v1/payments/{paymentId}`, as with real Nets).
    package static func completeCheckout(paymentId: String, merchant: Merchant, context: SandboxContext) async {
        let now = Timestamp.nowMilliseconds()
        let deliveries = merchant.sandbox.withLock { sandbox in
            sandbox.completeCheckout(paymentId: paymentId, timestampMilliseconds: now, variant: context.configuration.nets.webhookVariant)
        }
        for delivery in deliveries {
            guard let url = delivery.url else { continue }
            let request = HTTPRequestSpec(method: .POST, url: url, headers: delivery.headers, body: delivery.body)
            await context.outbound.deliver(request, label: "nets webhook for payment \(paymentId)")
        }
    }
}

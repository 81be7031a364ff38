import PaypipeCore
import Sandbox

/// Nets never charges a subscription by itself: the merchant does (through paypipe's
/// `chargeSubscription`). What a test or the demo can change is the card:
/// - `declineNext` `{"subscription": <subscriptionId>, "code"?}`: the subscription's next charge
///   is refused (402 with that `code`, e.g. 51 insufficient funds or 41 lost card; 911 when
///   none is given) and its `payment.charge.failed.v2` webhooks are sent;
/// - `resendLast` `{"subscription"}`: the last charge's webhooks again, as Nets redelivers them.
extension NetsEmulator: SubscriptionEmulator {
    package func act(_ action: String, body: JSONValue, context: SandboxContext) async -> HTTPResponseSpec {
        guard let subscriptionId = body["subscription"]?.stringValue else { return SandboxContext.json(400, ["error": "subscription is required"]) }
        if action == "resendLast" {
            guard let deliveries = lastDeliveries.withLock({ $0[subscriptionId] }) else {
                return SandboxContext.json(404, ["error": "nothing sent yet"])
            }
            for delivery in deliveries {
                guard let url = delivery.url else { continue }
                await context.outbound.deliver(
                    HTTPRequestSpec(method: .POST, url: url, headers: delivery.headers, body: delivery.body), label: "nets charge webhook")
            }
            return SandboxContext.json(200, ["subscription": .string(subscriptionId), "sent": .integer(Int64(deliveries.count))])
        }
        guard action == "declineNext" else { return SandboxContext.json(404, ["error": "nets actions: declineNext, resendLast"]) }
        let code = body["code"]?.stringValue ?? NetsSandbox.declineCode
        guard (1...8).contains(code.utf8.count) else { return SandboxContext.json(400, ["error": "code must be 1 to 8 characters"]) }
        for merchant in merchants where merchant.sandbox.withLock({ $0.declineNextCharge(subscriptionId: subscriptionId, code: code) }) {
            return SandboxContext.json(200, ["subscription": .string(subscriptionId), "declineNext": true])
        }
        return SandboxContext.json(404, ["error": "no such subscription"])
    }
}

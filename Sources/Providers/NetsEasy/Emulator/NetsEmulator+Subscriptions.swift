import PaypipeCore
import Sandbox

/// Nets never charges a subscription by itself: the merchant does (through paypipe's
/// `chargeSubscription`). What a test or the demo can change is the card:
/// - `declineNext` `{"subscription": <subscriptionId>, "code"?}`: the subscription's next charge
///   is refused (402 with that `code`, e.g. 51 insufficient funds or 41 lost card; 911 when
///   none is given) and its `payment.charge.failed.v2` webhooks are sent;
/// - `resendLast` `{"subscription"}`: the last charge's webhooks again, as Nets redelivers them;
/// - `totals` `{"subscription"}`: what the subscription's payments charged and refunded, and how
///   many writes were answered again from a repeated Idempotency-Key (`repeated`);
/// - `failNextRefund` `{}`: the next refund ends Failed.
extension NetsEmulator: SubscriptionEmulator {
    package func act(_ action: String, body: JSONValue, context: SandboxContext) async -> HTTPResponseSpec {
        if action == "failNextRefund" {
            for merchant in merchants { merchant.sandbox.withLock { $0.failNextRefund = true } }
            return SandboxContext.json(200, ["failNextRefund": true])
        }
        if action == "totals", let subscriptionId = body["subscription"]?.stringValue {
            var totals = NetsSandbox.Totals()
            var repeated = 0
            for merchant in merchants {
                let (found, repeats) = merchant.sandbox.withLock { ($0.totals(subscriptionId: subscriptionId), $0.repeats.values.reduce(0, +)) }
                totals.charged += found.charged
                totals.charges += found.charges
                totals.refunded += found.refunded
                totals.refunds += found.refunds
                repeated += repeats
            }
            return SandboxContext.json(
                200,
                [
                    "subscription": .string(subscriptionId), "charged": .integer(totals.charged), "charges": .integer(Int64(totals.charges)),
                    "refunded": .integer(totals.refunded), "refunds": .integer(Int64(totals.refunds)), "repeated": .integer(Int64(repeated)),
                ])
        }
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
        guard action == "declineNext" else {
            return SandboxContext.json(404, ["error": "nets actions: declineNext, resendLast, totals, failNextRefund"])
        }
        let code = body["code"]?.stringValue ?? NetsSandbox.declineCode
        guard (1...8).contains(code.utf8.count) else { return SandboxContext.json(400, ["error": "code must be 1 to 8 characters"]) }
        for merchant in merchants where merchant.sandbox.withLock({ $0.declineNextCharge(subscriptionId: subscriptionId, code: code) }) {
            return SandboxContext.json(200, ["subscription": .string(subscriptionId), "declineNext": true])
        }
        return SandboxContext.json(404, ["error": "no such subscription"])
    }
}

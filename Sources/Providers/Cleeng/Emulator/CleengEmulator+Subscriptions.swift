import PaypipeCore
import Sandbox

/// A granted offer is a subscription that Cleeng renews at the end of each period (the App
/// Store charging the customer), unless the customer cancelled: then access lapses at the end
/// of the period and getAccessStatus answers `accessGranted: false`. Nothing is pushed: the
/// pipeline finds out by asking (seed 003: "rely on Cleeng when checking entitlement").
/// - `cancel` `{"customerToken", "offerId"}`: the offer is not renewed again.
/// - `resubscribe` `{"customerToken", "offerId"}`: the customer buys the offer again (in the App
///   Store): a new period from now, renewing again.
/// The period is `--provider-option cleeng.periodDays=N` (30 by default).
extension CleengEmulator: SubscriptionEmulator {
    package func periodMilliseconds(_ context: SandboxContext) -> Int64 {
        (context.option(.cleeng, "periodDays").flatMap { Int64($0) }.map { max(1, $0) } ?? 30) * 86_400_000
    }

    package func advance(from: Int64, to: Int64, context: SandboxContext) async -> Int {
        let period = periodMilliseconds(context)
        entitlements.withLock { entitlements in
            for (key, var entitlement) in entitlements where entitlement.renewing && entitlement.expiresAt <= to {
                while entitlement.expiresAt <= to { entitlement.expiresAt += period }
                entitlements[key] = entitlement
            }
        }
        return 0
    }

    package func act(_ action: String, body: JSONValue, context: SandboxContext) async -> HTTPResponseSpec {
        guard action == "cancel" || action == "resubscribe" else {
            return SandboxContext.json(404, ["error": "cleeng actions: cancel, resubscribe"])
        }
        guard let token = body["customerToken"]?.stringValue, let offerId = body["offerId"]?.stringValue else {
            return SandboxContext.json(400, ["error": "customerToken and offerId are required"])
        }
        let key = Self.receiptKey(customerToken: token, offerId: offerId)
        let (now, period) = (context.clock.nowMilliseconds, periodMilliseconds(context))
        let found = entitlements.withLock { entitlements -> Bool in
            guard entitlements[key] != nil else { return false }
            if action == "cancel" {
                entitlements[key]?.renewing = false
            } else {
                entitlements[key] = Entitlement(expiresAt: now + period)
            }
            return true
        }
        guard found else { return SandboxContext.json(404, ["error": "no granted offer for this customer"]) }
        return SandboxContext.json(200, [action == "cancel" ? "cancelled" : "resubscribed": true])
    }
}

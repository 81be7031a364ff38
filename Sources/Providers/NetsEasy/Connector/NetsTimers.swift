import PaypipeCore

extension ProviderTimer {
    /// How long Nets is trusted to remember a charge's `Idempotency-Key`: a redelivered charge
    /// whose status Nets cannot find by its key is sent again only this long after the order
    /// was accepted, and goes to review after.
    public static let netsIdempotencyKeyLifetime = ProviderTimer("netsIdempotencyKeyLifetimeMs", default: 3_600_000)
}

extension NetsConfig {
    public static let timers: [ProviderTimer] = [.netsIdempotencyKeyLifetime]
}

import PaypipeCore

extension ProviderTimer {
    /// How often the pollers ask getAccessStatus for an accepted receipt.
    public static let cleengPollInterval = ProviderTimer("cleengPollIntervalMs", default: 5000)
    /// How long after the receipt the pollers give up waiting for access.
    public static let cleengGiveUp = ProviderTimer("cleengGiveUpMs", default: 60000)
}

extension CleengConfig {
    public static let timers: [ProviderTimer] = [.cleengPollInterval, .cleengGiveUp]
}

import PaypipeCore

extension ProviderTimer {
    /// How long an auth request or a debit waits for its S2S callback before its status call.
    public static let phonepeCallbackWait = ProviderTimer("phonepeCallbackWaitMs", default: 900_000)
}

extension PhonePeConfig {
    public static let timers: [ProviderTimer] = [.phonepeCallbackWait]
}

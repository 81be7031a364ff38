import PaypipeCore

extension ProviderTimer {
    /// The oldest response JWT (by its `iat`, in seconds) the callback validator believes.
    public static let tpResponseMaxAge = ProviderTimer("tpResponseMaxAgeS", default: 3600)
}

extension TrustPaymentsConfig {
    public static let timers: [ProviderTimer] = [.tpResponseMaxAge]
}

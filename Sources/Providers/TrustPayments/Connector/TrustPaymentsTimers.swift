import PaypipeCore

extension ProviderTimer {
    /// The oldest response JWT (by its `iat`, in seconds) the callback validator believes.
    public static let tpResponseMaxAge = ProviderTimer("tpResponseMaxAgeS", default: 3600)
    /// How long after the start of an engine payment's due day its notification may take before
    /// it is asked for with TRANSACTIONQUERY: the engine runs once on that day, at an hour Trust
    /// Payments does not say, so a day and a margin.
    public static let tpReconcileAfter = ProviderTimer("tpReconcileAfterMs", default: 26 * 3_600_000)
    /// How long after a TRANSACTIONQUERY that did not find the payment it is asked again.
    public static let tpReconcileRetry = ProviderTimer("tpReconcileRetryMs", default: 6 * 3_600_000)
    /// How many TRANSACTIONQUERYs find nothing before the payment is handed to a person: with the
    /// defaults, the two days over which Trust Payments retries an offline notification.
    public static let tpReconcileAsks = ProviderTimer("tpReconcileAsks", default: 8)
}

extension TrustPaymentsConfig {
    public static let timers: [ProviderTimer] = [.tpResponseMaxAge, .tpReconcileAfter, .tpReconcileRetry, .tpReconcileAsks]
}

import Sandbox

/// How the checkout webhooks a payment registered are made.
public enum NetsWebhookVariant: String, Sendable, CaseIterable {
    case genuine
    /// Answered 401 by paypipe.
    case wrongAuthorization = "wrong-authorization"
    /// Authentic, read as AMOUNT_MISMATCH.
    case wrongAmount = "wrong-amount"
}

/// How the Nets emulator's customer and webhooks behave.
public struct NetsEmulatorSettings: EmulatorSettings {
    public var webhookVariant = NetsWebhookVariant.genuine
    /// Time after a create until the emulated customer completes the hosted payment page (the
    /// subscription then exists and webhooks are delivered). Default 2000; nil (or negative)
    /// never completes.
    public var completeCheckoutAfterMilliseconds: Int? = 2000

    public init() {}
}

extension SandboxConfiguration {
    public var nets: NetsEmulatorSettings {
        get { self[NetsEmulatorSettings.self] }
        set { self[NetsEmulatorSettings.self] = newValue }
    }
}

import Sandbox

/// When the Cleeng emulator grants access after an accepted receipt.
public struct CleengEmulatorSettings: EmulatorSettings {
    /// Time after an accepted receipt from which getAccessStatus reports access granted.
    /// Default 10000. nil (or negative) never grants, to exercise the poller's give-up path.
    public var grantAfterMilliseconds: Int? = 10000
    /// When set, access is granted from this getAccessStatus call on (counted per customer
    /// token), whatever the time; `grantAfterMilliseconds` is then ignored. Default nil.
    public var grantOnPoll: Int?

    public init() {}
}

extension SandboxConfiguration {
    public var cleeng: CleengEmulatorSettings {
        get { self[CleengEmulatorSettings.self] }
        set { self[CleengEmulatorSettings.self] = newValue }
    }
}

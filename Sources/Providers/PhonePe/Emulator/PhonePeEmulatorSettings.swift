import Sandbox

/// How the PhonePe emulator's customer and callbacks behave.
public struct PhonePeEmulatorSettings: EmulatorSettings {
    /// Delay between an accepted auth/init (or debit) and its S2S callback, also when the status
    /// call starts reporting the terminal state. Default 1000.
    public var callbackDelayMilliseconds = 1000
    /// How the S2S callback is made: `.genuine` (default), `.wrongChecksum` or `.wrongAmount`.
    public var callbackVariant = PhonePeSandboxCallbackVariant.genuine

    public init() {}

    public var problems: [String] {
        callbackDelayMilliseconds < 0 ? ["PhonePe callback delay must be 0 or more milliseconds"] : []
    }
}

extension SandboxConfiguration {
    public var phonePe: PhonePeEmulatorSettings {
        get { self[PhonePeEmulatorSettings.self] }
        set { self[PhonePeEmulatorSettings.self] = newValue }
    }
}

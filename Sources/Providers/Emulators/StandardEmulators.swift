import CleengEmulation
import Logging
import NetsEasyEmulation
import PaypipeCore
import PhonePeEmulation
import Sandbox
import TrustPaymentsEmulation
import VivaEmulation

/// The registry's one line per provider emulator: the sandbox serves these.
public enum StandardEmulators {
    public static let all: [any ProviderEmulator.Type] = [
        TrustPaymentsEmulator.self,
        NetsEmulator.self,
        PhonePeEmulator.self,
        CleengEmulator.self,
        VivaEmulator.self,
    ]
}

extension SandboxServer {
    /// The sandbox serving every standard provider.
    public convenience init(configuration: SandboxConfiguration, config: PaypipeConfig, logger: Logger) throws(SandboxConfigurationError) {
        try self.init(configuration: configuration, config: config, emulators: StandardEmulators.all, logger: logger)
    }
}

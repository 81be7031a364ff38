/// An emulator's own settings, declared in its provider's folder and kept in
/// `SandboxConfiguration` by type: `init()` gives the defaults `paypipe-sandbox` uses without flags.
public protocol EmulatorSettings: Sendable {
    init()
    /// The problems with these settings, one line each.
    var problems: [String] { get }
}

extension EmulatorSettings {
    public var problems: [String] { [] }
}

/// How the sandbox behaves. Every default is the one `paypipe-sandbox` uses without flags.
public struct SandboxConfiguration: Sendable {
    /// Interface to bind. Default "127.0.0.1": the sandbox accepts forged payments, so it is not
    /// exposed beyond the machine unless asked.
    public var host: String
    /// TCP port. Default 9100; 0 binds an ephemeral port (learn it from `onListening`).
    public var port: Int
    /// Delay added before answering every provider request (not /healthz or the ledger).
    /// Default 0. Asynchronous: thousands of delayed requests can be in flight at once.
    public var latencyMilliseconds: Int
    /// Fraction (0.0...1.0) of provider requests answered HTTP 500 without being processed.
    /// Default 0.0. Which requests fail is decided by `errorSeed` and the arrival order, so a
    /// run with the same seed and the same request order fails the same requests.
    public var errorRate: Double
    /// Seed for the error-injection sequence. Default 0x5EED.
    public var errorSeed: UInt64
    /// Attempts per callback or webhook delivery (a non-2xx answer or a transport
    /// failure is retried with a doubling back-off from `outboundRetryBaseMilliseconds`). Default 4.
    public var outboundAttempts: Int
    /// First back-off between outbound attempts. Default 200.
    public var outboundRetryBaseMilliseconds: Int
    /// Upper bound on distinct keys the ledger tracks individually; beyond it requests are only
    /// counted in the totals (`untrackedKeys` says how many were not tracked). Default 2,000,000.
    public var ledgerKeyLimit: Int
    /// Largest request body accepted (bigger ones get 413). Default 1 MiB.
    public var maxBodyBytes: Int
    /// Settings of emulators that have no field here, by `<provider>.<name>`
    /// (`SandboxContext.option`). Default none.
    public var providerOptions: [String: String]
    /// A file the sandbox writes its clock's offset to (ms ahead of the wall clock) whenever
    /// `/_sandbox/clock` moves it: the ledger's `schedules.clockOffsetFile`, so that the
    /// schedules and the providers keep one time in tests and the demo. Default none.
    public var clockOffsetFile: String?
    /// Each emulator's own settings (`subscript(_:)`), by type; absent ones are their defaults.
    private var emulatorSettings: [ObjectIdentifier: any EmulatorSettings] = [:]

    public init(
        host: String = "127.0.0.1",
        port: Int = 9100,
        latencyMilliseconds: Int = 0,
        errorRate: Double = 0.0,
        errorSeed: UInt64 = 0x5EED,
        outboundAttempts: Int = 4,
        outboundRetryBaseMilliseconds: Int = 200,
        ledgerKeyLimit: Int = 2_000_000,
        maxBodyBytes: Int = 1 << 20,
        providerOptions: [String: String] = [:],
        clockOffsetFile: String? = nil
    ) {
        self.host = host
        self.port = port
        self.latencyMilliseconds = latencyMilliseconds
        self.errorRate = errorRate
        self.errorSeed = errorSeed
        self.outboundAttempts = outboundAttempts
        self.outboundRetryBaseMilliseconds = outboundRetryBaseMilliseconds
        self.ledgerKeyLimit = ledgerKeyLimit
        self.maxBodyBytes = maxBodyBytes
        self.providerOptions = providerOptions
        self.clockOffsetFile = clockOffsetFile
    }

    /// The problems with these settings, one line each; empty when they are usable.
    public var problems: [String] {
        var problems: [String] = []
        if host.isEmpty { problems.append("host must not be empty") }
        if !(0...65535).contains(port) { problems.append("port must be 0...65535") }
        if latencyMilliseconds < 0 { problems.append("latency must be 0 or more milliseconds") }
        if !(errorRate >= 0 && errorRate <= 1) { problems.append("error rate must be between 0.0 and 1.0") }
        if outboundAttempts < 1 { problems.append("outbound attempts must be at least 1") }
        if outboundRetryBaseMilliseconds < 0 { problems.append("outbound retry back-off must be 0 or more milliseconds") }
        if ledgerKeyLimit < 0 { problems.append("ledger key limit must be 0 or more") }
        if maxBodyBytes < 1024 { problems.append("max body size must be at least 1024 bytes") }
        for settings in emulatorSettings.values { problems += settings.problems }
        return problems
    }

    /// One emulator's settings.
    public subscript<Settings: EmulatorSettings>(_ type: Settings.Type) -> Settings {
        get { emulatorSettings[ObjectIdentifier(type)] as? Settings ?? Settings() }
        set { emulatorSettings[ObjectIdentifier(type)] = newValue }
    }

    /// This configuration with `change` made: `SandboxConfiguration(port: 0).with { $0.phonePe.callbackDelayMilliseconds = 0 }`.
    public func with(_ change: (inout SandboxConfiguration) -> Void) -> SandboxConfiguration {
        var changed = self
        change(&changed)
        return changed
    }
}

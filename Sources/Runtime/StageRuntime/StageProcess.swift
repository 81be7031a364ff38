import ArgumentParser
import FoundationEssentials
import Logging
import PaypipeCore
import ServiceLifecycle
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The options every stage executable shares: the config, endpoint overrides, the metrics
/// address and the log level.
package struct StageOptions: ParsableArguments {
    @Option(help: "Config file (docs/configuration.md); default $PAYPIPE_CONFIG.") package var config: String?
    @Option(help: "Log level (trace, debug, info, notice, warning, error, critical); default $PAYPIPE_LOG_LEVEL or info.")
    package var logLevel: String?
    @Option(help: "Log format: text, or json (one object per line); default $PAYPIPE_LOG_FORMAT or text.")
    package var logFormat: String?
    @Option(help: "host:port for GET /metrics and /healthz (port 0: any free port, logged).") package var metrics: String?
    @Option(help: "Override endpoints.intake.") var intake: String?
    @Option(help: "Override endpoints.outcomes.") var outcomes: String?
    @Option(help: "Override endpoints.outcomesReplay.") var outcomesReplay: String?
    @Option(help: "Override endpoints.admin.") var admin: String?
    @Option(help: "Override endpoints.signQueue.") var signQueue: String?
    @Option(help: "Override endpoints.signedIn.") var signedIn: String?
    @Option(help: "Override endpoints.signedOut.") var signedOut: String?
    @Option(help: "Override endpoints.results.") var results: String?
    @Option(help: "Override endpoints.ledgerRPC.") var ledgerRpc: String?
    @Option(help: "Override endpoints.pollQueue.") var pollQueue: String?
    @Option(help: "Override endpoints.callbacks (host:port the callback validator listens on).") var callbacks: String?

    package init() {}

    /// The config with the endpoint overrides applied; a bad config, or one unsafe for
    /// production (`unsafeForProduction`), ends the process with a one-line reason. `secrets: false` for stages that must hold none (their values are empty).
    /// `connectors`: those whose settings sections the config may hold.
    /// `alsoSecrets`: secret settings read even with `secrets: false` (the ledger's withheld ones).
    package func loadConfig(secrets: Bool, alsoSecrets: Set<String> = [], connectors: [any ProviderConnector.Type]) -> PaypipeConfig {
        guard let path = config ?? ProcessInfo.processInfo.environment["PAYPIPE_CONFIG"] else {
            StageProcess.fail("no config: pass --config PATH or set PAYPIPE_CONFIG")
        }
        var loaded: PaypipeConfig
        do {
            loaded = try PaypipeConfig.load(
                path: path, sources: secrets ? .process : PaypipeConfig.Sources.process.withoutSecrets(except: alsoSecrets),
                sections: connectors.map { $0.settingsSection })
        } catch {
            StageProcess.fail("bad config \(path): \(error)")
        }
        let overrides: [(String?, WritableKeyPath<PaypipeConfig.Endpoints, String>)] = [
            (intake, \.intake), (outcomes, \.outcomes), (outcomesReplay, \.outcomesReplay), (signQueue, \.signQueue), (signedIn, \.signedIn),
            (signedOut, \.signedOut), (results, \.results), (ledgerRpc, \.ledgerRPC), (pollQueue, \.pollQueue),
            (callbacks, \.callbacks), (admin, \.admin),
        ]
        for case (let value?, let keyPath) in overrides { loaded.endpoints[keyPath: keyPath] = value }
        // After the overrides: an address given on the command line is held to the same rule.
        let unsafe = loaded.unsafeForProduction
        if !unsafe.isEmpty { StageProcess.fail("refusing config \(path): " + unsafe.map(\.description).joined(separator: "; ")) }
        return loaded
    }

    /// A logger writing to stderr at `--log-level`, in `--log-format`.
    package func logger(_ label: String) -> Logger {
        let format = logFormat ?? ProcessInfo.processInfo.environment["PAYPIPE_LOG_FORMAT"]
        if let format, format != "text", format != "json" { StageProcess.fail("--log-format must be text or json, got \(format.prefix(32))") }
        StageOptions.bootstrapLogging(json: format == "json")
        var logger = Logger(label: label)
        let level = logLevel ?? ProcessInfo.processInfo.environment["PAYPIPE_LOG_LEVEL"]
        logger.logLevel = level.flatMap(Logger.Level.init(rawValue:)) ?? .info
        return logger
    }
}

extension StageOptions {
    /// swift-log may be bootstrapped once per process.
    private static let bootstrapped = Mutex(false)

    static func bootstrapLogging(json: Bool) {
        bootstrapped.withLock { done in
            guard !done else { return }
            done = true
            if json {
                LoggingSystem.bootstrap { JSONLogHandler(label: $0) }
            } else {
                LoggingSystem.bootstrap { TextLogHandler(label: $0) }
            }
        }
    }
}

/// What every stage executable shares beyond its options.
package enum StageProcess {
    /// Puts every thread of this process that runs at a lower nice value than the main thread
    /// at the main thread's, when a stage was started below normal priority (`paypipe up
    /// --worker-nice`, `nice -n`). On Linux a nice value is a thread's, and libdispatch gives
    /// the threads it starts the one of their QoS when it may (as root it may): Swift
    /// concurrency's threads, and the libzmq and NIO threads they start, would run at 0 and
    /// -4 whatever the stage was started at. A thread libdispatch starts later is not covered;
    /// the stages' busy threads (their loop, libzmq's, NIO's) exist before their loop starts.
    package static func keepThreadsAtStartingNice() {
        let which = __priority_which_t(PRIO_PROCESS.rawValue)
        let main = id_t(getpid())
        errno = 0
        let starting = getpriority(which, main)
        guard errno == 0, starting > 0, let tasks = directoryEntries("/proc/self/task") else { return }
        for name in tasks {
            guard let thread = id_t(name), thread != main else { continue }
            errno = 0
            let nice = getpriority(which, thread)
            if errno == 0, nice < starting { _ = setpriority(which, thread, starting) }
        }
    }

    /// The executable's name, as it was started.
    package static var processName: String { CommandLine.arguments.first?.split(separator: "/").last.map(String.init) ?? "paypipe" }

    package static func fail(_ reason: String, status: Int32 = 1) -> Never {
        writeAll(Array("\(processName): \(reason)\n".utf8), to: STDERR_FILENO)
        exit(status)
    }

    package static func printLine(_ line: String) {
        writeAll(Array((line + "\n").utf8), to: STDOUT_FILENO)
    }

    /// Writes every byte to a standard stream, unbuffered, as FileHandle does (Foundation's
    /// FileHandle would load Foundation and ICU into every stage).
    package static func writeAll(_ bytes: [UInt8], to descriptor: Int32) {
        bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
                if written > 0 {
                    offset += written
                } else if written < 0, errno == EINTR {
                    continue
                } else {
                    return
                }
            }
        }
    }

    /// Runs a stage's services in one `ServiceGroup` that shuts them down gracefully on SIGTERM
    /// or SIGINT, in reverse order: list the stage first and its
    /// servers after it, so the servers stop before the stage finishes its in-flight work.
    ///
    /// A service that ends or fails shuts the others down gracefully too. Cancelling them instead
    /// (ServiceGroup's default) would crash a stage whose `/healthz` or `/metrics` had just
    /// accepted a connection: NIO traps on a server channel's connection that nobody served
    /// ("Deinited NIOAsyncWriter without calling finish()", apple/swift-nio#3481), so a ledger
    /// giving up on its store would die of SIGILL instead of exiting 75.
    ///
    /// With `tracing`, the span exporter runs first, so it stops last and sends the stage's last
    /// spans.
    package static func run(_ services: [any Service], logger: Logger, tracing: PaypipeConfig.Tracing? = nil) async {
        var services = services
        do {
            if let exporter = try StageTracing.bootstrap(tracing, serviceName: processName) { services.insert(exporter, at: 0) }
        } catch {
            fail("tracing: \(error)")
        }
        let configured = services.map {
            ServiceGroupConfiguration.ServiceConfiguration(
                service: $0, successTerminationBehavior: .gracefullyShutdownGroup, failureTerminationBehavior: .gracefullyShutdownGroup)
        }
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: configured, gracefulShutdownSignals: [.sigterm, .sigint], cancellationSignals: [], logger: logger))
        do {
            try await group.run()
        } catch let error as any StageExit {
            fail("\(error)", status: error.exitStatus)
        } catch {
            fail("\(error)")
        }
    }
}

extension StageProcess {
    /// Runs a stage with its `/metrics` and `/healthz` server beside it.
    package static func run(
        stage: some MeasuredStage, metricsAddress: String, role: String, logger: Logger, tracing: PaypipeConfig.Tracing? = nil
    ) async {
        do {
            await run([stage, try stage.metrics.server(address: metricsAddress, role: role, logger: logger)], logger: logger, tracing: tracing)
        } catch {
            fail("\(error)")
        }
    }
}

/// A failure that ends a stage with its own exit status, so a supervisor can tell it from a
/// bad configuration (status 1) and restart the stage.
package protocol StageExit: Error {
    var exitStatus: Int32 { get }
}

/// A stage that exports metrics.
package protocol MeasuredStage: Service {
    var metrics: StageMetrics { get }
}

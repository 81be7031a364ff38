import Dispatch
import Foundation
import Logging
import PaypipeCore
import ServiceLifecycle

/// A stage as a swift-service-lifecycle `Service`: graceful shutdown (SIGTERM/SIGINT through
/// the `ServiceGroup`) calls the stage's `stop`, which stops taking work, finishes what is in
/// flight and flushes outcomes before `run` returns.
public struct StageService: Service {
    let runStage: @Sendable () async throws -> Void
    let stopStage: @Sendable () -> Void

    public init(run: @escaping @Sendable () async throws -> Void, stop: @escaping @Sendable () -> Void) {
        runStage = run
        stopStage = stop
    }

    public func run() async throws {
        try await withGracefulShutdownHandler {
            try await runStage()
        } onGracefulShutdown: {
            stopStage()
        }
    }
}

/// What every stage executable shares: config loading with a one-line failure, logging to
/// stderr, and graceful stop on SIGTERM/SIGINT.
public enum StageProcess {
    public static func loadConfig(path: String?, secrets: Bool = true) -> PaypipeConfig {
        guard let path = path ?? ProcessInfo.processInfo.environment["PAYPIPE_CONFIG"] else {
            fail("no config: pass --config PATH or set PAYPIPE_CONFIG")
        }
        do {
            return try PaypipeConfig.load(path: path, sources: secrets ? .process : PaypipeConfig.Sources.process.withoutSecrets)
        } catch {
            fail("bad config \(path): \(error)")
        }
    }

    public static func fail(_ reason: String) -> Never {
        FileHandle.standardError.write(Data("\(CommandLine.arguments.first.map { ($0 as NSString).lastPathComponent } ?? "paypipe"): \(reason)\n".utf8))
        exit(1)
    }

    public static func logger(_ label: String) -> Logger {
        LoggingSystem.bootstrap { StreamLogHandler.standardError(label: $0) }
        var logger = Logger(label: label)
        logger.logLevel = ProcessInfo.processInfo.environment["PAYPIPE_LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .info
        return logger
    }

    /// Runs one stage in a `ServiceGroup` that shuts it down gracefully on SIGTERM or SIGINT.
    public static func run(_ stage: StageService, logger: Logger) async {
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: [stage], gracefulShutdownSignals: [.sigterm, .sigint], cancellationSignals: [], logger: logger))
        do {
            try await group.run()
        } catch {
            fail("\(error)")
        }
    }

    /// Calls `stop` on the first SIGTERM or SIGINT; a second one exits at once.
    public static func onTerminationSignal(_ stop: @escaping @Sendable () -> Void) {
        let count = Counter()
        for sig in [SIGTERM, SIGINT] {
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            source.setEventHandler {
                if count.increment() > 1 { exit(130) }
                stop()
            }
            source.resume()
            sources.append(source)
        }
    }

    public static func printLine(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }

    nonisolated(unsafe) private static var sources: [any DispatchSourceSignal] = []

    private final class Counter: @unchecked Sendable {
        private let lock = NSLock()
        private var value = 0
        func increment() -> Int {
            lock.lock()
            defer { lock.unlock() }
            value += 1
            return value
        }
    }
}

import AsyncHTTPClient
import Hummingbird
import Logging
import NIOCore
import NIOPosix
import PaypipeCore
import ServiceLifecycle
import Synchronization
import UnixSignals

/// The provider sandbox as one HTTP server: each emulator it is given (`ProviderEmulator`, one
/// per provider folder's `Emulator/`; `StandardEmulators.all` for the five) under its path
/// prefix `/<provider>/`, so a config can point every provider at one port; plus `GET /healthz`
/// and `GET /_sandbox/ledger` (see `SandboxLedger`). Every check and answer comes from the
/// emulators; this type adds the network, the state between requests, the clock, latency and
/// error injection, and the asynchronous side (callbacks and webhooks an emulator schedules).
public final class SandboxServer: Sendable {
    public let configuration: SandboxConfiguration
    /// What was received and processed; also served at `/_sandbox/ledger`.
    public let ledger: SandboxLedger
    package let config: PaypipeConfig
    package let emulators: [any ProviderEmulator.Type]
    package let logger: Logger

    private struct Lifecycle {
        var group: ServiceGroup?
        var shutdownRequested = false
        var outbound: SandboxOutbound?
    }
    private let lifecycle = Mutex(Lifecycle())

    /// Callbacks and webhooks given up on after every attempt failed (a real provider gives up
    /// too, later): a test that counts what arrived upstream tells a loss of its own from one of
    /// the sandbox's.
    public var droppedDeliveries: Int { lifecycle.withLock { $0.outbound?.snapshot.dropped ?? 0 } }

    /// Throws `SandboxConfigurationError` naming the first unusable setting.
    /// `emulators`: the providers served, each under `/<provider>/`.
    public init(
        configuration: SandboxConfiguration, config: PaypipeConfig, emulators: [any ProviderEmulator.Type], logger: Logger
    ) throws(SandboxConfigurationError) {
        if let problem = configuration.problems.first { throw SandboxConfigurationError(reason: problem) }
        self.configuration = configuration
        self.config = config
        self.emulators = emulators
        self.logger = logger
        ledger = SandboxLedger(keyLimit: configuration.ledgerKeyLimit)
    }

    /// Serves until `shutdown()` (or, with `handleSignals`, SIGTERM/SIGINT): then stops
    /// accepting connections, finishes the requests in flight, cancels pending callbacks and
    /// webhooks, shuts the HTTP client down and returns. `onListening` gets the bound port
    /// (the real one when `port` is 0) once the server accepts connections.
    public func run(handleSignals: Bool = false, onListening: @escaping @Sendable (Int) -> Void = { _ in }) async throws {
        // A provider sends callbacks side by side, not 8 at a time (the client's default): with
        // deliveries queued behind 8 connections, a slow receiver turns the queue into timeouts,
        // retries and a longer queue, whose every cancellation scans it.
        var clientConfiguration = HTTPClient.Configuration(timeout: .init(connect: .seconds(2), read: .seconds(10)))
        clientConfiguration.connectionPool = .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: 256)
        let client = HTTPClient(
            eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: clientConfiguration, backgroundActivityLogger: logger)
        let scheduler = SandboxScheduler()
        let outbound = SandboxOutbound(
            client: client, attempts: configuration.outboundAttempts,
            retryBaseMilliseconds: configuration.outboundRetryBaseMilliseconds, logger: logger)
        let context = SandboxContext(configuration: configuration, ledger: ledger, scheduler: scheduler, outbound: outbound, logger: logger)
        let router = SandboxRouter(context: context, emulators: emulators.map { $0.init(config: config) })
        let port = configuration.port
        let app = Application(
            responder: SandboxResponder(router: router, maxBodyBytes: configuration.maxBodyBytes),
            configuration: ApplicationConfiguration(
                address: .hostname(configuration.host, port: port), serverName: nil, backlog: 4096, reuseAddress: true),
            onServerRunning: { channel in onListening(channel.localAddress?.port ?? port) },
            logger: logger)
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: [app], gracefulShutdownSignals: handleSignals ? [.sigterm, .sigint] : [], logger: logger))
        let stopAtOnce = lifecycle.withLock { state in
            state.group = group
            state.outbound = outbound
            return state.shutdownRequested
        }
        if stopAtOnce { await group.triggerGracefulShutdown() }

        var failure: (any Error)?
        await withTaskGroup(of: Void.self) { tasks in
            tasks.addTask { await scheduler.run() }
            do {
                try await group.run()
            } catch {
                failure = error
            }
            scheduler.finish()
            tasks.cancelAll()
        }
        lifecycle.withLock { $0.group = nil }
        do {
            try await client.shutdown()
        } catch {
            logger.warning("sandbox HTTP client shutdown failed", metadata: ["error": "\(type(of: error))"])
        }
        if let failure { throw failure }
    }

    /// Asks a running (or about to run) server to stop gracefully; `run` then returns.
    public func shutdown() async {
        let group = lifecycle.withLock { state in
            state.shutdownRequested = true
            return state.group
        }
        await group?.triggerGracefulShutdown()
    }
}

public struct SandboxConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
    public let reason: String
    public var description: String { "invalid sandbox settings: \(reason)" }
}

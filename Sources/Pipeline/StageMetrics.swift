import Hummingbird
import Logging
import NIOCore
import Prometheus
import ServiceLifecycle
import Synchronization

/// A stage's Prometheus metrics and the small HTTP server (`GET /metrics`, `GET /healthz`)
/// that exposes them.
public final class StageMetrics: Sendable {
    public let registry = PrometheusCollectorRegistry()
    private let group = Mutex<ServiceGroup?>(nil)
    private let stopped = Mutex(false)

    public init() {}

    public func counter(_ name: String, _ labels: [(String, String)] = [], help: String) -> Counter {
        registry.makeCounter(descriptor: MetricNameDescriptor(metricName: name, unitName: "", helpText: help), labels: labels)
    }

    public func gauge(_ name: String, _ labels: [(String, String)] = [], help: String) -> Gauge {
        registry.makeGauge(descriptor: MetricNameDescriptor(metricName: name, unitName: "", helpText: help), labels: labels)
    }

    public func latency(_ name: String, help: String) -> DurationHistogram {
        registry.makeDurationHistogram(
            descriptor: MetricNameDescriptor(metricName: name, unitName: "", helpText: help),
            buckets: [.milliseconds(1), .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50),
                      .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(5), .seconds(10)])
    }

    /// Serves until `stop()`. `address` is `host:port`; port 0 picks a free one, reported to `onListening`.
    /// `routes` adds a stage's own endpoints next to /metrics and /healthz.
    public func serve(
        address: String, logger: Logger, routes: (Router<BasicRequestContext>) -> Void = { _ in },
        onListening: @escaping @Sendable (Int) -> Void = { _ in }
    ) async throws {
        let parts = address.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count >= 2, let port = Int(parts.last!) else { throw EnvelopeError("metrics address must be host:port, got \(address)") }
        let host = parts.dropLast().joined(separator: ":")
        let registry = self.registry
        let router = Router()
        router.get("/metrics") { _, _ -> Response in
            Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4"],
                body: .init(byteBuffer: ByteBuffer(bytes: registry.emitToBuffer())))
        }
        router.get("/healthz") { _, _ -> String in "ok\n" }
        routes(router)
        let app = Application(
            router: router, configuration: .init(address: .hostname(host, port: port)),
            onServerRunning: { channel in onListening(channel.localAddress?.port ?? port) }, logger: logger)
        let serviceGroup = ServiceGroup(configuration: .init(services: [app], gracefulShutdownSignals: [], logger: logger))
        let stopAtOnce = group.withLock { current in
            current = serviceGroup
            return stopped.withLock { $0 }
        }
        if stopAtOnce { await serviceGroup.triggerGracefulShutdown() }
        try await serviceGroup.run()
    }

    /// Serves in the background, logging the bound port (or the failure) under `role`.
    public func start(address: String, role: String, logger: Logger) -> Task<Void, Never> {
        Task {
            do {
                try await serve(address: address, logger: logger, onListening: { port in
                    logger.info("\(role) metrics", metadata: ["port": "\(port)"])
                })
            } catch {
                logger.error("metrics server failed", metadata: ["error": "\(error)"])
            }
        }
    }

    /// Stops the server started by `start` and waits for it.
    public func stop(_ task: Task<Void, Never>) async {
        await stop()
        await task.value
    }

    public func stop() async {
        stopped.withLock { $0 = true }
        if let serviceGroup = group.withLock({ $0 }) { await serviceGroup.triggerGracefulShutdown() }
    }
}

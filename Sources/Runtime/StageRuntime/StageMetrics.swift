import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import PaypipeCore
import Prometheus
import ServiceLifecycle
import Synchronization

/// A stage's Prometheus metrics and the small HTTP server (`GET /metrics`, `GET /livez`,
/// `GET /readyz`) that exposes them.
package final class StageMetrics: Sendable {
    package let registry = PrometheusCollectorRegistry()
    /// Why the stage cannot take work right now; `/healthz` answers 503 with it.
    private let notReadyReason = Mutex<String?>(nil)

    package init() {}

    /// What the stage itself knows makes it unready, asked at each probe (`checkReadiness`).
    private let readinessCheck = Mutex<(@Sendable () -> String?)?>(nil)

    /// `reason` nil: ready again.
    package func setNotReady(_ reason: String?) { notReadyReason.withLock { $0 = reason } }

    /// Asks `check` at every readiness probe why the stage cannot work (nil: it can), e.g.
    /// whether it reaches a ledger.
    package func checkReadiness(_ check: @escaping @Sendable () -> String?) { readinessCheck.withLock { $0 = check } }

    /// Why the stage cannot take work right now; nil while it can.
    package var notReady: String? {
        if let reason = notReadyReason.withLock({ $0 }) { return reason }
        return readinessCheck.withLock { $0 }?()
    }

    package func counter(_ name: String, _ labels: [(String, String)] = [], help: String) -> Counter {
        registry.makeCounter(descriptor: MetricNameDescriptor(metricName: name, unitName: "", helpText: help), labels: labels)
    }

    package func gauge(_ name: String, _ labels: [(String, String)] = [], help: String) -> Gauge {
        registry.makeGauge(descriptor: MetricNameDescriptor(metricName: name, unitName: "", helpText: help), labels: labels)
    }

    package func latency(_ name: String, _ labels: [(String, String)] = [], help: String) -> DurationHistogram {
        registry.makeDurationHistogram(
            descriptor: MetricNameDescriptor(metricName: name, unitName: "", helpText: help), labels: labels,
            buckets: [
                .milliseconds(1), .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50),
                .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(5), .seconds(10),
            ])
    }

    /// The `/metrics` and `/healthz` server, as a `Service` for the stage's `ServiceGroup`.
    /// `address` is `host:port`; port 0 picks a free one, reported to `onListening`. `routes`
    /// adds a stage's own endpoints next to /metrics and /healthz.
    package func server(
        address: String, logger: Logger, limits: HTTPIngressLimits? = nil, routes: (Router<StageRequestContext>) -> Void = { _ in },
        onListening: @escaping @Sendable (Int) -> Void = { _ in }
    ) throws(EndpointError) -> some Service {
        let registry = self.registry
        // Which release each process runs, and whether it is ready, as series a dashboard and
        // an alert can read without probing every process.
        gauge("paypipe_build_info", [("stage", logger.label), ("version", PaypipeVersion.current)], help: "Always 1: the stage and its release")
            .set(1.0)
        let ready = gauge("paypipe_ready", help: "1 while the stage can take work (its /readyz answers 200), else 0")
        return try Self.httpServer(
            address: address, logger: logger, limits: limits,
            routes: { router in
                router.get("/metrics") { _, _ -> Response in
                    ready.set(self.notReady == nil ? 1.0 : 0.0)
                    return Response(
                        status: .ok, headers: [.contentType: "text/plain; version=0.0.4"],
                        body: .init(byteBuffer: ByteBuffer(bytes: registry.emitToBuffer())))
                }
                // Liveness: the process answers. Readiness: it can reach what it needs (`notReady`);
                // `/healthz` is the readiness of earlier releases.
                router.get("/livez") { _, _ -> Response in
                    Response(status: .ok, headers: [.contentType: "text/plain"], body: .init(byteBuffer: ByteBuffer(string: "ok\n")))
                }
                for path in ["/readyz", "/healthz"] {
                    router.get(RouterPath(path)) { _, _ -> Response in
                        let reason = self.notReady
                        return Response(
                            status: reason == nil ? .ok : .serviceUnavailable, headers: [.contentType: "text/plain"],
                            body: .init(byteBuffer: ByteBuffer(string: reason.map { "not ready: \($0)\n" } ?? "ok\n")))
                    }
                }
                routes(router)
            }, onListening: onListening)
    }

    /// An HTTP server of `routes` alone, without /metrics and the probes: what a stage serves to
    /// the internet (the callback validator), where neither belongs.
    package static func httpServer(
        address: String, logger: Logger, limits: HTTPIngressLimits? = nil, routes: (Router<StageRequestContext>) -> Void,
        onListening: @escaping @Sendable (Int) -> Void = { _ in }
    ) throws(EndpointError) -> some Service {
        let parts = address.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count >= 2, let port = Int(parts.last!) else { throw EndpointError("an HTTP address must be host:port, got \(address)") }
        let host = parts.dropLast().joined(separator: ":")
        let router = Router(context: StageRequestContext.self)
        routes(router)
        return Application(
            router: router, server: limits?.server ?? .http1(),
            configuration: .init(
                address: .hostname(host, port: port), availableConnectionsDelegate: limits.map { MaximumAvailableConnections($0.maxConnections) }),
            onServerRunning: { channel in onListening(channel.localAddress?.port ?? port) }, logger: logger)
    }

    /// `server` for a stage with no routes of its own, logging its port under `role`.
    package func server(address: String, role: String, logger: Logger) throws(EndpointError) -> some Service {
        try server(address: address, logger: logger, onListening: { port in logger.info("\(role) metrics", metadata: ["port": "\(port)"]) })
    }
}

/// The labels an outcome is counted under (`paypipe_outcomes_out_total` on the ledger,
/// `paypipe_submitter_outcomes_total` on the submitters), and the key of its counter.
package struct OutcomeLabels: Sendable, Hashable {
    package var status: String
    package var provider: String
    package var operation: String

    package init(status: String, provider: String, operation: String) {
        (self.status, self.provider, self.operation) = (status, provider, operation)
    }

    package init(_ outcome: Outcome) { self.init(status: outcome.status.rawValue, provider: outcome.provider, operation: outcome.operation) }

    package var pairs: [(String, String)] { [("status", status), ("provider", provider), ("operation", operation)] }
}

/// The request context of a stage's HTTP server: Hummingbird's basics plus the peer's address
/// (the callback validator limits requests per sender).
package struct StageRequestContext: RequestContext, RemoteAddressRequestContext {
    package var coreContext: CoreRequestContextStorage
    package let remoteAddress: SocketAddress?

    package init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress
    }
}

/// An address in the config or on the command line that cannot be used.
package struct EndpointError: Error, Sendable, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}

/// A stage loop's own readiness, published to its metrics only when it changes.
package struct Readiness {
    let metrics: StageMetrics
    private var current: String?? = .none

    package init(metrics: StageMetrics) { self.metrics = metrics }

    /// `reason` nil: ready.
    package mutating func update(_ reason: String?) {
        guard current != .some(reason) else { return }
        current = .some(reason)
        metrics.setNotReady(reason)
    }
}

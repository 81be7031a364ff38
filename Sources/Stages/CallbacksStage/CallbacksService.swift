import HTTPTransport
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import PaypipeCore
import ServiceLifecycle
import StageRuntime
import StageWire
import ZeroMQ

/// `paypipe-callbacks`: the HTTP ingress of docs/protocol.md ("Callbacks in"), one route per
/// connector route. Stateless: orders are read from, and verdicts handed to, the ledger; any
/// number of copies can run behind a load balancer. Its `/metrics`, `/livez` and `/readyz` are
/// served apart (`metrics.server` at `endpoints.callbacksMetrics`), never on the public address.
package final class CallbacksService: MeasuredStage {
    let config: PaypipeConfig
    let registry: ConnectorRegistry
    let logger: Logger
    let onListening: @Sendable (Int) -> Void
    /// What each connection from the internet may take of the server.
    let limits: HTTPIngressLimits
    package let metrics = StageMetrics()

    /// `onListening` gets the bound port (the address may say port 0).
    package init(
        config: PaypipeConfig, registry: ConnectorRegistry, logger: Logger, limits: HTTPIngressLimits = HTTPIngressLimits(),
        onListening: @escaping @Sendable (Int) -> Void = { _ in }
    ) {
        self.config = config
        self.registry = registry
        self.logger = logger
        self.limits = limits
        self.onListening = onListening
    }

    package func run() async throws {
        let links = try StageLinks(config: config, role: .callbacks)
        let context = try ZMQContext()
        defer { context.terminate() }
        let ledger = try LedgerClient(context: context, endpoint: config.endpoints.ledgerRPC, options: links.client(stageOptions()))
        // For connectors that confirm a callback with the provider before believing it.
        let http = ProviderHTTPClient(
            connectTimeoutMilliseconds: config.timers.httpConnectTimeoutMs, requestTimeoutMilliseconds: config.timers.httpRequestTimeoutMs,
            maxIdleConnectionsPerHost: 64)
        let validator = CallbackValidator(directory: ledger, catalog: registry.catalog, http: http)
        let (logger, metrics) = (self.logger, self.metrics)
        metrics.checkReadiness { ledger.reachesLedger ? nil : "no ledger reachable at endpoints.ledgerRPC" }
        StageProcess.keepThreadsAtStartingNice()
        logger.info("callbacks ready", metadata: ["address": "\(config.endpoints.callbacks)", "ledgerRPC": "\(config.endpoints.ledgerRPC)"])

        @Sendable func answer(_ route: String, _ result: CallbackAnswer) -> Response {
            metrics.counter(
                "paypipe_callbacks_total", [("route", route), ("result", result.result)],
                help: "Callbacks received, by route and result (a rejection code for 4xx)"
            )
            .increment()
            if result.isRejection {
                logger.warning(
                    "callback refused",
                    metadata: [
                        "route": "\(route)", "status": "\(result.status)", "code": "\(result.result)", "reason": "\(result.message.prefix(160))",
                    ])
            }
            return Response(
                status: HTTPResponse.Status(code: result.status), headers: [.contentType: "application/json"],
                body: ResponseBody(byteBuffer: ByteBuffer(string: result.body + "\n")))
        }
        let tooLarge = CallbackAnswer.rejected(.tooLarge("the body is larger than 64 KiB"))
        let routes = registry.connectors.flatMap(\.callbackRoutes)
        let trustedProxies = Set(config.endpoints.callbacksTrustedProxies)
        let onListening = self.onListening
        // Callback routes alone: /metrics and the probes are the metrics server's, on an address
        // of their own (endpoints.callbacksMetrics), not on this public one.
        let server = try StageMetrics.httpServer(
            address: config.endpoints.callbacks, logger: logger, limits: limits,
            routes: { router in
                for route in routes {
                    let headerNames = route.headers.compactMap { HTTPField.Name($0) }
                    router.post(RouterPath(route.path)) { request, context -> Response in
                        guard let buffer = try? await request.body.collect(upTo: Order.maxFrameBytes) else { return answer(route.label, tooLarge) }
                        let headers = headerNames.flatMap { name in request.headers[values: name].map { HTTPHeader(name.canonicalName, $0) } }
                        let callback = CallbackRequest(headers: headers, body: Array(buffer.readableBytesView))
                        let span = StageTracing.startSpan("POST \(route.path)", continuing: nil, root: true, kind: .server)
                        let client = ForwardedClient.address(
                            peer: context.remoteAddress?.ipAddress, forwardedFor: request.headers[values: .init("X-Forwarded-For")!],
                            trusted: trustedProxies)
                        let result = await validator.handle(route, callback, from: client)
                        if let span {
                            span.attributes["http.route"] = route.path
                            span.attributes["http.response.status_code"] = result.status
                            span.attributes["paypipe.callback_result"] = result.result
                            span.end()
                        }
                        return answer(route.label, result)
                    }
                }
            },
            onListening: { port in
                logger.info("callbacks listening", metadata: ["port": "\(port)"])
                onListening(port)
            })
        // The HTTP server is this stage: its own graceful shutdown answers requests in progress first.
        do {
            try await server.run()
        } catch {
            await http.shutdown()
            throw error
        }
        await http.shutdown()
        await ledger.close()
        logger.info("callbacks stopped")
    }
}

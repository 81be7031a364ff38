import Logging
import OTel
import PaypipeCore
import ServiceLifecycle
import Synchronization
import Tracing

/// Distributed tracing for a stage process (docs/operations.md, "Traces"). Off unless the config
/// has a `tracing` section: then swift-otel's tracer exports every span over OTLP/HTTP, and an
/// order's trace follows it through the stages in the `trace` field of each frame (a W3C
/// `traceparent`). While off, no stage touches the tracing API and frames carry no trace.
package enum StageTracing {
    private static let tracer = Mutex<(any Tracer)?>(nil)
    private static let enabled = Atomic<Bool>(false)

    /// Whether this process makes spans; set once, before any stage loop runs.
    package static var isEnabled: Bool { enabled.load(ordering: .relaxed) }

    /// Starts exporting when `tracing` is set: returns the exporter's service, to run before the
    /// stage in its service group so that it stops after the stage and sends the last spans.
    /// The standard `OTEL_*` variables (e.g. `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`,
    /// `OTEL_TRACES_SAMPLER`) override the config, as swift-otel reads them.
    package static func bootstrap(_ tracing: PaypipeConfig.Tracing?, serviceName: String) throws -> (any Service)? {
        guard let tracing else { return nil }
        var configuration = OTel.Configuration.default
        configuration.serviceName = serviceName
        configuration.resourceAttributes["service.version"] = PaypipeVersion.current
        configuration.traces.enabled = true
        configuration.metrics.enabled = false
        configuration.logs.enabled = false
        configuration.traces.exporter = .otlp
        // Protobuf only: swift-otel writes OTLP/JSON's ids in base64 where the OTLP spec asks for
        // hex, and the OpenTelemetry Collector refuses them (opentelemetry-collector#8720).
        configuration.traces.otlpExporter.protocol = .httpProtobuf
        // Set by hand, the endpoint is taken as it is: the signal's path is ours to add.
        let base = tracing.otlpEndpoint.hasSuffix("/") ? String(tracing.otlpEndpoint.dropLast()) : tracing.otlpEndpoint
        configuration.traces.otlpExporter.endpoint = base + "/v1/traces"
        configuration.traces.sampler = .parentBasedTraceIDRatio(ratio: tracing.sampleRatio) ?? .parentBasedAlwaysOn
        configuration.propagators = [.traceContext]
        // The batch processor's own log lines go to the stage's stderr only when they matter.
        configuration.diagnosticLogLevel = .warning
        let backend = try OTel.makeTracingBackend(configuration: configuration)
        InstrumentationSystem.bootstrap(backend.factory)
        tracer.withLock { $0 = backend.factory }
        enabled.store(true, ordering: .relaxed)
        return backend.service
    }

    /// Starts a span that continues the trace `traceparent` names (a frame's `trace`), or that
    /// starts one when `traceparent` is nil and `root` is true; nil while tracing is off, when
    /// there is no trace to continue and `root` is false, or when the trace is not sampled.
    package static func startSpan(
        _ name: String, continuing traceparent: String?, root: Bool = false, kind: SpanKind, at start: DefaultTracerClock.Instant? = nil
    ) -> (any Span)? {
        guard isEnabled, traceparent.map(isSampled) ?? root, let tracer = tracer.withLock({ $0 }) else { return nil }
        var context = ServiceContext.topLevel
        if let traceparent {
            InstrumentationSystem.instrument.extract(["traceparent": traceparent], into: &context, using: TraceFields())
        }
        return tracer.startAnySpan(name, context: context, ofKind: kind, at: start ?? DefaultTracerClock.now)
    }

    /// Whether a `traceparent` says its trace is sampled (its flags' last bit). The ledger's
    /// sampler decides once per dispatch; a trace it left out gets no spans anywhere.
    static func isSampled(_ traceparent: String) -> Bool {
        guard let flags = traceparent.utf8.last.flatMap({ UInt8(String(UnicodeScalar($0)), radix: 16) }) else { return false }
        return flags & 1 == 1
    }

    /// A recording span's W3C `traceparent`, for the next frame of its order; nil for a span the
    /// sampler left out, so its order's frames carry no trace.
    package static func traceparent(of span: (any Span)?) -> String? {
        guard let span, span.isRecording else { return nil }
        var fields: [String: String] = [:]
        InstrumentationSystem.instrument.inject(span.context, into: &fields, using: TraceFields())
        return fields["traceparent"]
    }

    /// A provider request's span, a child of `parent`: its method and host, never its URL's path
    /// or query, headers or body, which may name a customer or carry a signature.
    package static func startHTTPSpan(_ request: HTTPRequestSpec, in parent: any Span) -> (any Span)? {
        guard let tracer = tracer.withLock({ $0 }) else { return nil }
        let span = tracer.startAnySpan(request.method.rawValue, context: parent.context, ofKind: .client, at: DefaultTracerClock.now)
        span.attributes["http.request.method"] = request.method.rawValue
        if let host = host(of: request.url) { span.attributes["server.address"] = host }
        return span
    }

    /// Ends a provider request's span with its HTTP status, or the transport failure.
    package static func endHTTPSpan(_ span: any Span, _ result: Result<Int, TransportFailure>) {
        switch result {
        case .success(let status):
            span.attributes["http.response.status_code"] = status
            if status >= 500 { span.setStatus(SpanStatus(code: .error)) }
        case .failure(let failure):
            span.attributes["error.type"] = failure.mayHaveBeenSent ? "may_have_been_sent" : "not_sent"
            span.setStatus(SpanStatus(code: .error, message: String(failure.reason.prefix(200))))
        }
        span.end()
    }

    static func host(of url: String) -> String? {
        guard let scheme = url.range(of: "://") else { return nil }
        let rest = url[scheme.upperBound...]
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        let host = authority.split(separator: "@").last.map { $0.hasPrefix("[") ? $0.prefix { $0 != "]" } + "]" : $0.prefix { $0 != ":" } }
        return host.map(String.init).flatMap { $0.isEmpty ? nil : $0 }
    }

    /// merchant, orderId, provider and operation as span attributes.
    package static func describe(_ span: any Span, order: OrderIdentity) {
        span.attributes["paypipe.merchant"] = order.merchant
        span.attributes["paypipe.order_id"] = order.orderId
        span.attributes["paypipe.provider"] = order.provider
        span.attributes["paypipe.operation"] = order.operation
    }
}

extension Tracer {
    /// `startSpan` through an existential: the span as `any Span`.
    fileprivate func startAnySpan(_ name: String, context: ServiceContext, ofKind kind: SpanKind, at start: some TracerInstant) -> any Tracing.Span {
        startSpan(name, context: context, ofKind: kind, at: start)
    }
}

/// The carrier a frame's trace field is read from and written to: W3C trace-context headers.
private struct TraceFields: Extractor, Injector {
    func extract(key: String, from carrier: [String: String]) -> String? { carrier[key] }
    func inject(_ value: String, forKey key: String, into carrier: inout [String: String]) { carrier[key] = value }
}

import Logging
import PaypipeCore
import StageRuntime
import StageWire
import Tracing
import ZeroMQ

/// The ledger's spans, while tracing is on (`StageTracing`). Each dispatch starts a trace: its
/// span runs from the pass that read the work (through its transaction) to the send, and the
/// frame carries it to the signer or poller. Each result a stage sends back continues that trace
/// with a span from the read to the outcome's effects being out. Read from frames and effects,
/// so the core knows nothing of tracing.
enum LedgerTracing {
    /// The dispatch frame with the trace of a span for it, ended now.
    static func dispatching(_ frame: [UInt8], poll: Bool, since start: DefaultTracerClock.Instant?) -> [UInt8] {
        guard let span = StageTracing.startSpan(poll ? "paypipe.poll" : "paypipe.dispatch", continuing: nil, root: true, kind: .producer, at: start)
        else { return frame }
        defer { span.end() }
        // A dispatch the sampler left out costs no more: no attributes, no trace in its frame.
        guard span.isRecording, let header = DispatchFrame.header(of: frame), let order = DispatchFrame.orderJSON(in: frame) else { return frame }
        StageTracing.describe(span, order: identity(TransitionLog.identity(order)))
        span.attributes["paypipe.generation"] = Int(header.generation)
        span.attributes["paypipe.purpose"] = header.purpose.rawValue
        return StageTracing.traceparent(of: span).map { DispatchFrame.appendingTrace($0, to: frame) } ?? frame
    }

    /// A span for each result that carries a trace, to end with `recorded`.
    static func recording(_ results: [ZMQMessage], since start: DefaultTracerClock.Instant?) -> [any Span] {
        results.compactMap { message in
            guard let parts = StageResult.decode(message.body), let trace = parts.trace,
                let span = StageTracing.startSpan("paypipe.record", continuing: trace, kind: .consumer, at: start)
            else { return nil }
            let (metadata, status) = TransitionLog.identityAndStatus(parts.outcome)
            StageTracing.describe(span, order: identity(metadata))
            span.attributes["paypipe.generation"] = Int(parts.ticket.generation)
            span.attributes["paypipe.answering"] = parts.answering.rawValue
            if let status { span.attributes["paypipe.status"] = status }
            return span
        }
    }

    static func recorded(_ spans: [any Span]) {
        for span in spans { span.end() }
    }

    /// The order's identity as the transition log reads it, for `StageTracing.describe`.
    private static func identity(_ metadata: Logger.Metadata) -> OrderIdentity {
        let text = { (key: String) in metadata[key].map { "\($0)" } ?? "" }
        return OrderIdentity(orderId: text("orderId"), merchant: text("merchant"), provider: text("provider"), operation: text("operation"))
    }
}

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
        describe(span, TransitionLog.identity(order))
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
            var status: String?
            _ = JSONValue.forEachMember(of: parts.outcome) { key, value in
                if key.spells("status") { status = value.stringValue }
                return status == nil
            }
            describe(span, TransitionLog.identity(parts.outcome))
            span.attributes["paypipe.generation"] = Int(parts.ticket.generation)
            span.attributes["paypipe.answering"] = parts.answering.rawValue
            if let status { span.attributes["paypipe.status"] = status }
            return span
        }
    }

    static func recorded(_ spans: [any Span]) {
        for span in spans { span.end() }
    }

    private static func describe(_ span: any Span, _ identity: Logger.Metadata) {
        for (key, attribute) in [
            ("merchant", "paypipe.merchant"), ("orderId", "paypipe.order_id"), ("provider", "paypipe.provider"), ("operation", "paypipe.operation"),
        ] {
            if let value = identity[key] { span.attributes[attribute] = "\(value)" }
        }
    }
}

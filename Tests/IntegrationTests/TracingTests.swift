import Foundation
import PaypipeCore
import Testing

@testable import TestSupport

/// Tracing through real stage processes: each exports its spans over OTLP/HTTP (protobuf) to a
/// loopback collector, and the bodies are decoded by the OpenTelemetry project's own classes
/// (`deploy/observability/otlp-spans`), not by paypipe's code.
@Suite("Tracing: an order's spans form one trace across the stages")
struct TracingTests {
    struct ExportedSpan {
        var service, name, kind, traceId, spanId, parentSpanId: String
        var attributes: [String: JSONValue]
        var start, end: Int64
    }

    /// A collector that takes every export (an empty protobuf answer is a full success).
    static func collector() throws -> ScriptedHTTPServer {
        try ScriptedHTTPServer { _ in
            .bytes(Array("HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n".utf8), thenClose: false)
        }
    }

    /// Every span in what `collector` received, decoded by `otlp-spans`.
    static func spans(_ collector: ScriptedHTTPServer) async throws -> [ExportedSpan] {
        let received = collector.requests
        for request in received {
            #expect(request.requestLine.hasPrefix("POST /v1/traces "), "\(request.requestLine)")
            #expect(request.header("Content-Type") == "application/x-protobuf")
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("paypipe-otlp-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        var paths: [String] = []
        for (index, request) in received.enumerated() {
            let path = directory.appendingPathComponent("export-\(index).bin").path
            try Data(request.body).write(to: URL(fileURLWithPath: path))
            paths.append(path)
        }
        guard !paths.isEmpty else { return [] }
        var script = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { script.deleteLastPathComponent() }
        let run = try await runCapturing(script.appendingPathComponent("deploy/observability/otlp-spans").path, paths)
        try #require(run.status == 0, "otlp-spans: \(run.errors)")
        return try run.output.split(separator: "\n").map { line in
            let span = try JSONValue.parse(Array(line.utf8))
            return ExportedSpan(
                service: span["service"]?.stringValue ?? "", name: span["name"]?.stringValue ?? "", kind: span["kind"]?.stringValue ?? "",
                traceId: span["traceId"]?.stringValue ?? "", spanId: span["spanId"]?.stringValue ?? "",
                parentSpanId: span["parentSpanId"]?.stringValue ?? "", attributes: span["attributes"]?.objectValue ?? [:],
                start: span["start"]?.integerValue ?? 0, end: span["end"]?.integerValue ?? 0)
        }
    }

    /// The ledger's sampler decides once per dispatch: an order it leaves out gets no span in any
    /// stage, and goes through as any other.
    @Test func anOrderTheSamplerLeavesOutHasNoSpanAnywhere() async throws {
        let collector = try Self.collector()
        defer { collector.stop() }
        let h = try await PipelineHarness(
            tracing: ["otlpEndpoint": .string("http://127.0.0.1:\(collector.port)"), "sampleRatio": .fraction(1e-12)])
        try await h.stopping { h in
            try h.startSigner()
            try h.startSubmitter()
            for id in ["pp-untraced-1", "pp-untraced-2"] { try await h.send(AsyncFlowTests.phonePeOrder(id)) }
            // One collection for both: what it reads is consumed.
            let ids: Set = ["pp-untraced-1", "pp-untraced-2"]
            let pending = try await h.collect { Set($0.filter { $0.status == .pending }.map(\.orderId)).isSuperset(of: ids) }
            #expect(Set(pending.filter { $0.status == .pending }.map(\.orderId)).isSuperset(of: ids))
        }
        #expect(try await Self.spans(collector).isEmpty)
    }

    @Test func anOrdersDispatchSigningSubmissionAndRecordShareOneTrace() async throws {
        let collector = try Self.collector()
        defer { collector.stop() }
        let h = try await PipelineHarness(tracing: ["otlpEndpoint": .string("http://127.0.0.1:\(collector.port)")])
        var callbackPosted = false
        var checksum: String?
        try await h.stopping { h in
            try h.startSigner()
            try h.startSubmitter()
            try h.startCallbacks()
            try await h.send(AsyncFlowTests.phonePeOrder("pp-traced"))
            let pending = try #require(try await AsyncFlowTests.outcome(h, "pp-traced", .pending))
            let callback = try AsyncFlowTests.completedMandate("pp-traced", pending: pending)
            checksum = callback.xVerify
            let answer = await h.postCallback("/callbacks/phonepe", headers: [("X-VERIFY", callback.xVerify)], body: callback.body)
            #expect(answer?.0 == 200)
            callbackPosted = answer?.0 == 200
            #expect(try await AsyncFlowTests.outcome(h, "pp-traced", .succeeded) != nil)
        }
        // Stopping each stage gracefully sends the spans its exporter still held.
        let spans = try await Self.spans(collector)
        let ours = spans.filter { $0.attributes["paypipe.order_id"] == "pp-traced" }
        let named = { (name: String) in ours.filter { $0.name == name } }
        let dispatch = try #require(named("paypipe.dispatch").first, "spans: \(spans.map { "\($0.service) \($0.name)" })")
        let sign = try #require(named("paypipe.sign").first)
        let submit = try #require(named("paypipe.submit").first)
        let record = try #require(named("paypipe.record").first)
        let request = try #require(spans.first { $0.name == "POST" && $0.parentSpanId == submit.spanId })

        // One trace, each span the child of the one before it, each from its own stage.
        #expect(dispatch.traceId.count == 32 && dispatch.parentSpanId.isEmpty)
        for span in [sign, submit, request, record] { #expect(span.traceId == dispatch.traceId, "\(span.name)") }
        #expect(sign.parentSpanId == dispatch.spanId)
        #expect(submit.parentSpanId == sign.spanId)
        #expect(record.parentSpanId == submit.spanId)
        #expect(
            [dispatch.service, sign.service, submit.service, request.service, record.service] == [
                "paypipe-ledger", "paypipe-signer", "paypipe-submitter", "paypipe-submitter", "paypipe-ledger",
            ])
        #expect(
            [dispatch.kind, sign.kind, submit.kind, request.kind, record.kind] == [
                "SPAN_KIND_PRODUCER", "SPAN_KIND_CONSUMER", "SPAN_KIND_CONSUMER", "SPAN_KIND_CLIENT", "SPAN_KIND_CONSUMER",
            ])
        // What an operator searches by, and what the provider said.
        #expect(dispatch.attributes["paypipe.provider"] == "phonepe" && dispatch.attributes["paypipe.merchant"] == "default")
        #expect(dispatch.attributes["paypipe.generation"] == 1 && dispatch.attributes["paypipe.purpose"] == "submit")
        #expect(record.attributes["paypipe.status"] == "pending" && submit.attributes["paypipe.status"] == "pending")
        #expect(request.attributes["http.request.method"] == "POST" && request.attributes["server.address"] == "127.0.0.1")
        #expect(request.attributes["http.response.status_code"] == 200)
        #expect(dispatch.start <= sign.start && sign.start <= submit.start && submit.start <= request.start && request.end <= record.end)
        // The callback's own span, from the validator.
        if callbackPosted {
            let served = try #require(spans.first { $0.service == "paypipe-callbacks" && $0.name == "POST /callbacks/phonepe" })
            #expect(served.kind == "SPAN_KIND_SERVER" && served.attributes["http.response.status_code"] == 200)
        }
        // No secret and nothing signed reaches a span: not the merchant's salt key, not the
        // checksum of the callback, not the merchant id the signed request carries.
        let exported = collector.requests.map { String(decoding: $0.body, as: UTF8.self) }.joined()
        #expect(!exported.contains(AsyncFlowTests.merchant.phonepe!.saltKey.reveal()))
        #expect(!exported.contains("MERCHANTUAT"))
        if let checksum { #expect(!exported.contains(checksum)) }
    }
}

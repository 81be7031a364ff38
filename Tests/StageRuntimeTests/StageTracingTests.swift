import Testing

@testable import StageRuntime

@Suite("Stage tracing")
struct StageTracingTests {
    @Test func theSampledFlagIsReadFromTheTraceparent() {
        #expect(StageTracing.isSampled("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"))
        #expect(StageTracing.isSampled("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03"))
        #expect(!StageTracing.isSampled("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"))
        #expect(!StageTracing.isSampled("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0z"))
        #expect(!StageTracing.isSampled(""))
    }

    /// Only the host of a provider's URL reaches a span, never its path or query.
    @Test func theHostIsReadFromAURL() {
        #expect(StageTracing.host(of: "https://api.example.com/v1/payments?secret=1") == "api.example.com")
        #expect(StageTracing.host(of: "http://127.0.0.1:9101/nets/v1") == "127.0.0.1")
        #expect(StageTracing.host(of: "http://user:pass@host.example:8080/x") == "host.example")
        #expect(StageTracing.host(of: "http://[::1]:8080/x") == "[::1]")
        #expect(StageTracing.host(of: "no scheme") == nil)
        #expect(StageTracing.host(of: "http:///path") == nil)
    }
}

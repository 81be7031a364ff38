import ArgumentParser
import HTTPTransport
import PaypipeCore
import StageRuntime

#if canImport(Glibc)
import Glibc
#endif

/// `paypipe probe URL`: a container healthcheck without curl or a shell's `/dev/tcp` in the
/// image. Exit 0 on a 200, 1 on any other answer or none in time.
struct ProbeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "probe",
        abstract: "GET a stage's probe (e.g. http://127.0.0.1:9090/readyz): exit 0 on HTTP 200, else 1 with the reason.")

    @Argument(help: "The http:// URL to GET.") var url: String
    @Option(help: "Milliseconds to wait for the answer.") var timeoutMs: Int64 = 2000

    init() {}

    func validate() throws {
        guard url.hasPrefix("http://") else { throw ValidationError("the URL must be http://") }
        guard timeoutMs > 0 else { throw ValidationError("--timeout-ms must be positive") }
    }

    func run() async throws {
        let http = ProviderHTTPClient(connectTimeoutMilliseconds: timeoutMs, requestTimeoutMilliseconds: timeoutMs, maxIdleConnectionsPerHost: 1)
        let result = await http.execute(HTTPRequestSpec(method: .GET, url: url))
        await http.shutdown()
        switch result {
        case .success(let response) where response.status == 200: return
        case .success(let response):
            StageProcess.fail("HTTP \(response.status): \(String(decoding: response.body.prefix(200), as: UTF8.self))")
        case .failure(let failure):
            StageProcess.fail("no answer: \(failure.reason)")
        }
    }
}

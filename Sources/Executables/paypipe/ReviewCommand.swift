import ArgumentParser
import Connectors
import FoundationEssentials
import HTTPTransport
import PaypipeCore
import StageRuntime

#if canImport(Glibc)
import Glibc
#endif

/// `paypipe review`: lists the orders in review (`unknown` NEEDS_REVIEW: resolution ran out, or
/// the dispatch cap was reached) from the ledger's `GET /review`, one outcome per line.
struct ReviewCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "review",
        abstract: "Print the orders in review (unknown, NEEDS_REVIEW) as JSON lines, from the ledger's metrics server.")

    @Option(help: "Print at most this many (the ledger lists at most 1000).") var limit = 1000
    @Option(help: "The ledger's metrics host:port (default: endpoints.ledgerMetrics of --config, else 127.0.0.1:9090).") var ledger: String?
    @Option(help: "Config file to take endpoints.ledgerMetrics from; default $PAYPIPE_CONFIG.") var config: String?
    @Option(help: "Milliseconds to wait for the answer.") var timeoutMs: Int64 = 5000

    init() {}

    func validate() throws {
        guard (1...1000).contains(limit) else { throw ValidationError("--limit must be 1 to 1000") }
        guard timeoutMs > 0 else { throw ValidationError("--timeout-ms must be positive") }
    }

    func run() async throws {
        let address = ledgerAddress()
        let http = ProviderHTTPClient(connectTimeoutMilliseconds: timeoutMs, requestTimeoutMilliseconds: timeoutMs, maxIdleConnectionsPerHost: 1)
        let result = await http.execute(HTTPRequestSpec(method: .GET, url: "http://\(address)/review?limit=\(limit)"))
        await http.shutdown()
        switch result {
        case .success(let response) where response.status == 200:
            StageProcess.writeAll(Array(response.body), to: STDOUT_FILENO)
        case .success(let response):
            StageProcess.fail(
                "the ledger at \(address) answered HTTP \(response.status): \(String(decoding: response.body.prefix(200), as: UTF8.self))")
        case .failure(let failure):
            StageProcess.fail("the ledger at \(address) did not answer: \(failure.reason)")
        }
    }

    private func ledgerAddress() -> String {
        ledger ?? configuredEndpoints(config)?.ledgerMetrics ?? "127.0.0.1:9090"
    }
}

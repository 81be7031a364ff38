import AsyncHTTPClient
import NIOCore
import NIOHTTP1
import PaypipeCore

/// Sends provider requests exactly as the signer built them: one pooled, keep-alive client per
/// process, with connect and request timeouts from the config's timers.
package final class ProviderHTTPClient: Sendable {
    let client: HTTPClient
    let requestTimeout: TimeAmount

    package init(connectTimeoutMilliseconds: Int64, requestTimeoutMilliseconds: Int64, maxConnectionsPerHost: Int = 512) {
        var configuration = HTTPClient.Configuration()
        configuration.timeout = .init(connect: .milliseconds(connectTimeoutMilliseconds), read: .milliseconds(requestTimeoutMilliseconds))
        configuration.connectionPool = .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: maxConnectionsPerHost)
        configuration.decompression = .disabled
        client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        requestTimeout = .milliseconds(requestTimeoutMilliseconds)
    }

    package func execute(_ spec: HTTPRequestSpec) async -> Result<HTTPResponseSpec, TransportFailure> {
        var request = HTTPClientRequest(url: spec.url)
        request.method = HTTPMethod(rawValue: spec.method.rawValue)
        for header in spec.headers { request.headers.add(name: header.name, value: header.value) }
        if !spec.body.isEmpty { request.body = .bytes(ByteBuffer(bytes: spec.body)) }
        do {
            let response = try await client.execute(request, timeout: requestTimeout)
            let body = try await response.body.collect(upTo: 4 << 20)
            return .success(HTTPResponseSpec(
                status: Int(response.status.code), headers: response.headers.map { HTTPHeader($0.name, $0.value) },
                body: Array(buffer: body)))
        } catch {
            return .failure(ProviderHTTPClient.classify(error))
        }
    }

    /// Only failures that certainly happened before the request left count as "not sent";
    /// anything else may have reached the provider and is resolved by a status call.
    static func classify(_ error: any Error) -> TransportFailure {
        if let error = error as? HTTPClientError, error == .connectTimeout {
            return .notSent("connect timeout")
        }
        if let error = error as? IOError, error.errnoCode == 111 /* ECONNREFUSED */ { return .notSent("connection refused") }
        let text = String(describing: error)
        if text.contains("connectionRefused") || text.contains("Connection refused") { return .notSent("connection refused") }
        return .mayHaveBeenSent(String(text.prefix(120)))
    }

    package func shutdown() async {
        try? await client.shutdown()
    }
}

extension ProviderHTTPClient: ProviderHTTPTransport {}

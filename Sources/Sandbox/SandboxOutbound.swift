import AsyncHTTPClient
import Logging
import NIOCore
import PaypipeCore
import Synchronization

/// Sends the sandbox's own requests (PhonePe S2S callbacks, Nets webhooks) through the one
/// shared `HTTPClient`, retrying a bounded number of times. Logs name the delivery and the
/// status, never headers or bodies (they carry signatures and webhook secrets).
public final class SandboxOutbound: Sendable {
    package struct Counters: Sendable {
        var delivered = 0
        var failedAttempts = 0
        var dropped = 0
    }

    private let client: HTTPClient
    private let attempts: Int
    private let retryBaseMilliseconds: Int
    private let logger: Logger
    private let counters = Mutex(Counters())

    package init(client: HTTPClient, attempts: Int, retryBaseMilliseconds: Int, logger: Logger) {
        self.client = client
        self.attempts = max(1, attempts)
        self.retryBaseMilliseconds = retryBaseMilliseconds
        self.logger = logger
    }

    package var snapshot: Counters { counters.withLock { $0 } }

    /// POSTs `request`; `label` says what it is in logs ("phonepe callback for <authRequestId>").
    public func deliver(_ request: HTTPRequestSpec, label: String) async {
        var backoff = retryBaseMilliseconds
        for attempt in 1...attempts {
            if Task.isCancelled { return }
            var outbound = HTTPClientRequest(url: request.url)
            outbound.method = .RAW(value: request.method.rawValue)
            for header in request.headers { outbound.headers.add(name: header.name, value: header.value) }
            outbound.body = .bytes(ByteBuffer(bytes: request.body))
            do {
                let response = try await client.execute(outbound, timeout: .seconds(10))
                _ = try? await response.body.collect(upTo: 64 * 1024)
                if (200...299).contains(Int(response.status.code)) {
                    counters.withLock { $0.delivered += 1 }
                    logger.debug("sandbox delivery succeeded", metadata: ["delivery": "\(label)", "attempt": "\(attempt)"])
                    return
                }
                counters.withLock { $0.failedAttempts += 1 }
                logger.warning(
                    "sandbox delivery refused", metadata: ["delivery": "\(label)", "attempt": "\(attempt)", "status": "\(response.status.code)"])
            } catch {
                if Task.isCancelled { return }
                counters.withLock { $0.failedAttempts += 1 }
                logger.warning(
                    "sandbox delivery failed", metadata: ["delivery": "\(label)", "attempt": "\(attempt)", "error": "\(type(of: error))"])
            }
            if attempt < attempts {
                do { try await Task.sleep(for: .milliseconds(backoff)) } catch { return }
                backoff = min(backoff * 2, 30_000)
            }
        }
        counters.withLock { $0.dropped += 1 }
        logger.error("sandbox delivery dropped after \(attempts) attempts", metadata: ["delivery": "\(label)"])
    }
}

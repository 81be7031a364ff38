import PaypipeCore
import StageWire
import Synchronization
import ZeroMQ

/// What the callback validator and the pollers need from the pipeline's store.
package protocol OrderDirectory: Sendable {
    func call(_ request: LedgerRequest) async throws(LedgerUnavailable) -> LedgerReply
}

/// The ledger did not answer in time, or answered with an error: the caller answers 503 so
/// the provider retries (a settle that did commit is then recognised as a duplicate).
package struct LedgerUnavailable: Error, Sendable, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}

/// Requests to the ledger over one DEALER socket, matched to replies by a request id frame.
/// Many tasks may call at once; each waits at most `timeoutMilliseconds`, re-sending its request
/// every `resendAfterMilliseconds` meanwhile: a request the old connection took dies with a
/// restarting ledger, and the DEALER reconnects by itself. Re-sending is safe because a lookup
/// changes nothing and a settle is idempotent by its event key (the first reply wins).
package final class LedgerClient: OrderDirectory {
    private let duplex: ZMQDuplex
    /// Callers waiting for a reply, by request id.
    private final class Waiting: Sendable {
        private let map = Mutex<[UInt64: CheckedContinuation<[UInt8]?, Never>]>([:])
        func add(_ id: UInt64, _ continuation: CheckedContinuation<[UInt8]?, Never>) { map.withLock { $0[id] = continuation } }
        func resume(_ id: UInt64, with answer: [UInt8]?) { map.withLock { $0.removeValue(forKey: id) }?.resume(returning: answer) }
        func resumeAll() {
            for continuation in map.withLock({ m in
                defer { m = [:] }
                return Array(m.values)
            }) { continuation.resume(returning: nil) }
        }
    }

    private let waiting = Waiting()
    private let nextId = Atomic<UInt64>(1)
    private let timeoutMilliseconds: Int64
    private let resendAfterMilliseconds: Int64
    private let reader = Mutex<Task<Void, Never>?>(nil)

    /// The default budget of one call: a supervised ledger restart fits in it many times over,
    /// while a provider's callback still gets its answer (503, so it retries) well before the 30 s
    /// a webhook sender commonly waits. The providers' documents name no callback timeout, so this
    /// figure is a choice (docs/operations.md, "Store failures and restarts").
    package static let defaultTimeoutMilliseconds: Int64 = 20_000
    /// How often an unanswered request is sent again.
    package static let defaultResendAfterMilliseconds: Int64 = 2000

    /// `options`: e.g. a role's CURVE keys (`StageLinks.client`).
    package init(
        context: ZMQContext, endpoint: String, options: ZMQSocketOptions = stageOptions(),
        timeoutMilliseconds: Int64 = LedgerClient.defaultTimeoutMilliseconds,
        resendAfterMilliseconds: Int64 = LedgerClient.defaultResendAfterMilliseconds
    ) throws(ZMQError) {
        let socket = try context.socket(.dealer, options: options)
        var configuration = ZMQDuplex.Configuration()
        configuration.peers = ZMQPeers(endpoint)
        try socket.connect(configuration.peers!)
        duplex = try ZMQDuplex(socket: socket, configuration: configuration)
        self.timeoutMilliseconds = timeoutMilliseconds
        self.resendAfterMilliseconds = max(1, resendAfterMilliseconds)
        let duplex = self.duplex, waiting = self.waiting
        reader.withLock {
            $0 = Task {
                while let batch = try? await duplex.nextBatch() {
                    for message in batch where message.frames.count == 2 {
                        if let id = LedgerRequestID.parse(message.frames[0]) { waiting.resume(id, with: message.frames[1]) }
                    }
                }
                waiting.resumeAll()
            }
        }
    }

    /// Whether any ledger is connected (for the stage's readiness).
    package var reachesLedger: Bool { duplex.hasPeer }

    package func call(_ request: LedgerRequest) async throws(LedgerUnavailable) -> LedgerReply {
        let id = nextId.add(1, ordering: .relaxed).oldValue
        let payload = request.json.bytes
        let idFrame = LedgerRequestID.frame(id)
        let (timeout, resendAfter) = (timeoutMilliseconds, resendAfterMilliseconds)
        let (waiting, duplex) = (self.waiting, self.duplex)
        let timer = Mutex<Task<Void, Never>?>(nil)
        let answer: [UInt8]? = await withCheckedContinuation { continuation in
            // Registered before the first send, so the timeout and any reply always find the caller.
            waiting.add(id, continuation)
            timer.withLock {
                $0 = Task {
                    var waited: Int64 = 0
                    while waited < timeout {
                        // Every copy carries the same id: whichever reply comes first answers.
                        guard duplex.send(ZMQMessage(frames: [idFrame, payload])) else { break }
                        let pause = min(resendAfter, timeout - waited)
                        do { try await Task.sleep(for: .milliseconds(pause)) } catch { return }
                        waited += pause
                    }
                    waiting.resume(id, with: nil)
                }
            }
        }
        timer.withLock { $0 }?.cancel()
        guard let answer else { throw LedgerUnavailable("the ledger did not answer within \(timeout) ms") }
        do {
            let reply = try LedgerReply.parse(answer, for: request)
            if case .failure(let message) = reply { throw LedgerUnavailable("the ledger failed: \(message)") }
            return reply
        } catch let error as LedgerUnavailable {
            throw error
        } catch {
            throw LedgerUnavailable("unreadable ledger reply")
        }
    }

    package func close() async {
        duplex.stop()
        await duplex.waitUntilClosed()
        await reader.withLock { $0 }?.value
    }
}

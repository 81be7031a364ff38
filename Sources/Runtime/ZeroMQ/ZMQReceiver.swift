import CZeroMQ

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Receives from one socket on a dedicated thread and delivers messages as an `AsyncSequence`.
///
/// The thread blocks in `zmq_msg_recv`, never a Swift concurrency thread. It hands messages over
/// in batches (whatever is already queued, up to `batchSize`) so the per-message cost stays a
/// few array operations. When the consumer falls behind by `bufferCapacity` messages the thread
/// stops receiving, so libzmq's receive HWM and then the sender's HWM push back upstream.
public final class ZMQReceiver: AsyncSequence, Sendable {
    public typealias Element = ZMQMessage

    public struct Configuration: Sendable {
        public var batchSize = 256
        public var bufferCapacity = 4096
        /// How often the thread checks for `stop()` while the socket is idle.
        public var pollIntervalMilliseconds: Int32 = 50
        /// The copies the socket connects to, kept current from the receiver's thread.
        public var peers: ZMQPeers?
        public init() {}
    }

    private let handoff: Handoff<ZMQMessage>

    /// Takes ownership of `socket`: from now on only the receiver's thread touches it.
    public init(socket: ZMQSocket, configuration: Configuration = Configuration()) throws(ZMQError) {
        try socket.setOption(ZMQ_RCVTIMEO, configuration.pollIntervalMilliseconds, "RCVTIMEO")
        let handoff = Handoff<ZMQMessage>(capacity: configuration.bufferCapacity)
        self.handoff = handoff
        let batchSize = configuration.batchSize, peers = configuration.peers
        startThread(name: "zmq-recv") {
            ZMQReceiver.run(socket: socket, handoff: handoff, batchSize: batchSize, peers: peers)
        }
    }

    private static func run(socket: ZMQSocket, handoff: Handoff<ZMQMessage>, batchSize: Int, peers: ZMQPeers?) {
        var failure: ZMQError?
        receiving: while !handoff.isStopping {
            try? peers?.refresh(socket)
            do {
                guard let first = try socket.receive() else { continue }
                var batch = [first]
                batch.reserveCapacity(Swift.min(batchSize, 64))
                while batch.count < batchSize, let next = try socket.receive(dontWait: true) {
                    batch.append(next)
                }
                if !handoff.put(batch) { break receiving }
            } catch {
                if !error.isTerminated { failure = error }
                break receiving
            }
        }
        socket.close()
        handoff.finish(failure)
    }

    /// Stops receiving. Messages already handed over are still delivered; the sequence then ends.
    /// What libzmq had queued inside the socket but not yet received is discarded with it, so
    /// stop the sending side first when nothing may be lost.
    public func stop() { handoff.stop() }

    /// Waits until the receiving thread has closed its socket.
    public func waitUntilClosed() async { await handoff.waitUntilFinished() }

    public func makeAsyncIterator() -> Iterator { Iterator(handoff: handoff) }

    /// The next batch of messages already received (at least one), or nil once stopped and
    /// drained. For consumers that process in groups (e.g. one database transaction per batch);
    /// do not mix with iterating the sequence.
    public func nextBatch() async throws(ZMQError) -> [ZMQMessage]? { try await handoff.take() }

    /// The same, but gives up after `timeoutMilliseconds` with an empty batch. Use this rather
    /// than racing `nextBatch()` against a sleep in a task group: a batch that reaches the losing
    /// child task would be thrown away with it.
    public func nextBatch(timeoutMilliseconds: Int64) async throws(ZMQError) -> [ZMQMessage]? {
        try await handoff.take(timeoutMilliseconds: timeoutMilliseconds)
    }

    public struct Iterator: AsyncIteratorProtocol {
        let handoff: Handoff<ZMQMessage>
        var batch: [ZMQMessage] = []
        var index = 0

        public mutating func next() async throws(ZMQError) -> ZMQMessage? {
            if index < batch.count {
                defer { index += 1 }
                return batch[index]
            }
            guard let next = try await handoff.take() else { return nil }
            batch = next
            index = 1
            return batch[0]
        }
    }
}

/// Starts a detached pthread (never a Swift concurrency thread) running `body`, named `name`
/// (its first 15 bytes, the kernel's limit) for `top -H`, `perf` and `/proc/PID/task`.
public func startThread(name: String, _ body: @escaping @Sendable () -> Void) {
    final class Box: @unchecked Sendable {
        let body: @Sendable () -> Void
        let name: String
        init(_ body: @escaping @Sendable () -> Void, _ name: String) {
            self.body = body
            self.name = name
        }
    }
    let box = Unmanaged.passRetained(Box(body, name)).toOpaque()
    var thread = pthread_t()
    let result = pthread_create(
        &thread, nil,
        { raw in
            let box = Unmanaged<AnyObject>.fromOpaque(raw!).takeRetainedValue()
            if let box = box as? Box {
                nameThisThread(box.name)
                box.body()
            }
            return nil
        }, box)
    precondition(result == 0, "pthread_create failed: \(result)")
    pthread_detach(thread)
}

/// Glibc's `pthread_setname_np` is not visible to Swift (a GNU extension), so through the
/// kernel's file for the calling thread's name. Best effort: a thread without a name still runs.
private func nameThisThread(_ name: String) {
    let fd = open("/proc/thread-self/comm", O_WRONLY)
    guard fd >= 0 else { return }
    defer { close(fd) }
    let bytes = Array(name.utf8.prefix(15))
    _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
}

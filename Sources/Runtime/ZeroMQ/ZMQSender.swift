import CZeroMQ

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Sends on one socket from a dedicated thread, fed by async callers.
///
/// `send` appends to a bounded queue and returns; it suspends while the queue is full. The
/// thread blocks in `zmq_send` when libzmq's send HWM is reached, the queue then fills, and so
/// backpressure reaches the caller without dropping anything.
public final class ZMQSender: Sendable {
    public struct Configuration: Sendable {
        public var queueCapacity = 4096
        /// How often a blocked send wakes to check for a forced stop.
        public var pollIntervalMilliseconds: Int32 = 50
        /// The copies the socket connects to, kept current from the sender's thread before
        /// each batch.
        public var peers: ZMQPeers?
        public init() {}
    }

    /// What `finish` managed to deliver into libzmq before closing.
    public struct DrainReport: Sendable, Equatable {
        public let undelivered: Int
    }

    private struct State {
        var queue: [ZMQMessage] = []
        var threadSleeping = false
        var spaceWaiters: [CheckedContinuation<Void, Never>] = []
        var closing = false
        var drainDeadlineNanoseconds: UInt64 = .max
        var finished = false
        var failure: ZMQError?
        var undelivered = 0
        var finishWaiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Locked(State())
    private let capacity: Int

    /// Takes ownership of `socket`: from now on only the sender's thread touches it.
    public init(socket: ZMQSocket, configuration: Configuration = Configuration()) throws(ZMQError) {
        try socket.setOption(ZMQ_SNDTIMEO, configuration.pollIntervalMilliseconds, "SNDTIMEO")
        capacity = configuration.queueCapacity
        let state = self.state
        let peers = configuration.peers
        startThread(name: "zmq-send") { ZMQSender.run(socket: socket, state: state, peers: peers) }
    }

    /// Queues a message; suspends while the queue is full. Throws once the socket has failed
    /// or the sender was finished.
    public func send(_ message: ZMQMessage) async throws(ZMQError) {
        while try !trySend(message) { await waitForSpace() }
    }

    /// Queues a message unless the queue is full, without suspending: for a caller on an event
    /// loop, which must not wait. Throws once the socket has failed or the sender was finished.
    public func trySend(_ message: ZMQMessage) throws(ZMQError) -> Bool {
        enum Attempt { case queued(wakeThread: Bool), full, failed(ZMQError) }
        let attempt: Attempt = state.withLock { s in
            if let failure = s.failure { return .failed(failure) }
            if s.closing { return .failed(ZMQError("send", errno: ENOTSOCK, message: "the sender is finished")) }
            guard s.queue.count < capacity else { return .full }
            s.queue.append(message)
            return .queued(wakeThread: s.threadSleeping)
        }
        switch attempt {
        case .failed(let error): throw error
        case .full: return false
        case .queued(let wakeThread):
            if wakeThread { state.broadcast() }
            return true
        }
    }

    public func send(_ bytes: [UInt8]) async throws(ZMQError) { try await send(ZMQMessage(bytes)) }

    private func waitForSpace() async {
        let capacity = self.capacity
        await state.suspend(
            until: { $0.queue.count < capacity || $0.closing || $0.failure != nil },
            park: { $0.spaceWaiters.append($1) })
    }

    /// Number of messages queued here and not yet handed to libzmq.
    public var queuedCount: Int { state.withLock { $0.queue.count } }

    /// Delivers everything queued (waiting up to `drainTimeoutMilliseconds` for peers), then
    /// closes the socket, whose LINGER covers what libzmq still holds.
    @discardableResult
    public func finish(drainTimeoutMilliseconds: Int = 5000) async -> DrainReport {
        let deadline = monotonicNanoseconds() + UInt64(drainTimeoutMilliseconds) * 1_000_000
        state.withLock { s in
            if !s.closing {
                s.closing = true
                s.drainDeadlineNanoseconds = deadline
            }
        }
        state.broadcast()
        await state.suspend(until: { $0.finished }, park: { $0.finishWaiters.append($1) })
        return state.withLock { DrainReport(undelivered: $0.undelivered) }
    }

    private static func run(socket: ZMQSocket, state: Locked<State>, peers: ZMQPeers?) {
        var failure: ZMQError?
        var undelivered = 0
        sending: while true {
            let (batch, closing, waiters) = state.wait(until: { s in
                let ready = !s.queue.isEmpty || s.closing
                s.threadSleeping = !ready
                return ready
            }) { s in
                s.threadSleeping = false
                let batch = s.queue
                s.queue = []
                s.queue.reserveCapacity(batch.count)
                let waiters = s.spaceWaiters
                s.spaceWaiters = []
                return (batch, s.closing, waiters)
            }
            for waiter in waiters { waiter.resume() }
            if batch.isEmpty && closing { break sending }
            try? peers?.refresh(socket)
            for (index, message) in batch.enumerated() {
                do {
                    while try !socket.send(message) {
                        if monotonicNanoseconds() > state.withLock({ $0.drainDeadlineNanoseconds }) {
                            undelivered += batch.count - index
                            break sending
                        }
                    }
                } catch {
                    failure = error
                    undelivered += batch.count - index
                    break sending
                }
            }
        }
        socket.close()
        let finishWaiters = state.withLock { s in
            s.finished = true
            s.closing = true
            s.failure = s.failure ?? failure
            s.undelivered = undelivered + s.queue.count
            s.queue = []
            let waiters = s.finishWaiters + s.spaceWaiters
            s.finishWaiters = []
            s.spaceWaiters = []
            return waiters
        }
        for waiter in finishWaiters { waiter.resume() }
    }
}

/// The monotonic clock, for deadlines that the wall clock's steps must not move.
func monotonicNanoseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
}

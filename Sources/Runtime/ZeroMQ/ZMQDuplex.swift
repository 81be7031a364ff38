import CZeroMQ

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Sends and receives on one socket (ROUTER or DEALER) from one dedicated thread.
///
/// A socket is not thread-safe, so a request/reply socket cannot be split between a
/// `ZMQSender` and a `ZMQReceiver`. Here one thread polls the socket together with a wake-up
/// pipe: `send` queues a message and writes one byte to the pipe, and the thread sends what is
/// queued and hands received messages to async consumers in batches.
public final class ZMQDuplex: Sendable {
    public struct Configuration: Sendable {
        public var batchSize = 256
        public var bufferCapacity = 4096
        /// How often the thread checks for `stop()` while nothing happens.
        public var pollIntervalMilliseconds: Int = 50
        /// The copies the socket connects to, kept current from the duplex's thread.
        public var peers: ZMQPeers?
        public init() {}
    }

    private struct Outbox {
        var queue: [ZMQMessage] = []
        var closed = false
    }

    private let handoff: Handoff<ZMQMessage>
    private let outbox = Locked(Outbox())
    private let reachable = Locked(false)

    /// Whether the socket had a peer to send to when its thread last looked (see
    /// `ZMQSocket.canSend`).
    public var hasPeer: Bool { reachable.withLock { $0 } }
    /// Held by the duplex and its thread, so its pipe stays open until both are gone and a late
    /// `wake()` never writes into a reused descriptor.
    private let wakeup: PollWakeup

    /// Takes ownership of `socket`: from now on only the duplex's thread touches it.
    public init(socket: ZMQSocket, configuration: Configuration = Configuration()) throws(ZMQError) {
        let wakeup = try PollWakeup()
        self.wakeup = wakeup
        let handoff = Handoff<ZMQMessage>(capacity: configuration.bufferCapacity)
        self.handoff = handoff
        let outbox = self.outbox, reachable = self.reachable
        startThread(name: "zmq-duplex") {
            ZMQDuplex.run(socket: socket, handoff: handoff, outbox: outbox, reachable: reachable, wakeup: wakeup, configuration: configuration)
        }
    }

    /// Queues a message for sending; false once the duplex is stopped. Never blocks: callers
    /// bound what they queue (request/reply traffic is bounded by its callers' concurrency).
    @discardableResult
    public func send(_ message: ZMQMessage) -> Bool {
        let queued = outbox.withLock { box -> Bool in
            if box.closed { return false }
            box.queue.append(message)
            return true
        }
        if queued { wake() }
        return queued
    }

    /// The next batch of received messages, or nil once stopped.
    public func nextBatch() async throws(ZMQError) -> [ZMQMessage]? { try await handoff.take() }

    /// The same, but gives up after `timeoutMilliseconds` with an empty batch.
    public func nextBatch(timeoutMilliseconds: Int64) async throws(ZMQError) -> [ZMQMessage]? {
        try await handoff.take(timeoutMilliseconds: timeoutMilliseconds)
    }

    /// Stops the thread; queued sends are attempted once more, then the socket closes (LINGER applies).
    public func stop() {
        outbox.withLock { $0.closed = true }
        handoff.stop()
        wake()
    }

    public func waitUntilClosed() async { await handoff.waitUntilFinished() }

    private func wake() { wakeup.signal() }

    private static func run(
        socket: ZMQSocket, handoff: Handoff<ZMQMessage>, outbox: Locked<Outbox>, reachable: Locked<Bool>, wakeup: PollWakeup,
        configuration: Configuration
    ) {
        var failure: ZMQError?
        var pending: [ZMQMessage] = []
        loop: while true {
            pending += outbox.withLock { box -> [ZMQMessage] in
                defer { box.queue.removeAll(keepingCapacity: true) }
                return box.queue
            }
            do {
                var sent = 0
                while sent < pending.count, try socket.send(pending[sent], dontWait: true) { sent += 1 }
                pending.removeFirst(sent)
            } catch {
                failure = error
                break loop
            }
            if handoff.isStopping { break loop }
            try? configuration.peers?.refresh(socket)
            let canSend = socket.canSend || !pending.isEmpty
            reachable.withLock { $0 = canSend }
            let ready: [ZMQPollEvents]
            do {
                ready = try ZMQPoll.wait(
                    [(socket, pending.isEmpty ? .readable : [.readable, .writable])], wakeup: wakeup,
                    timeoutMilliseconds: configuration.pollIntervalMilliseconds
                ).ready
            } catch {
                if !error.isTerminated { failure = error }
                break loop
            }
            if ready[0].contains(.readable) {
                do {
                    var batch: [ZMQMessage] = []
                    while batch.count < configuration.batchSize, let next = try socket.receive(dontWait: true) { batch.append(next) }
                    if !batch.isEmpty, !handoff.put(batch) { break loop }
                } catch {
                    if !error.isTerminated { failure = error }
                    break loop
                }
            }
        }
        outbox.withLock { $0.closed = true }
        for message in pending { _ = try? socket.send(message, dontWait: true) }
        socket.close()
        handoff.finish(failure)
    }
}

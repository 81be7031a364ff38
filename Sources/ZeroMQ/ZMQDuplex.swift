#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CZeroMQ

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
        public init() {}
    }

    private struct Outbox {
        var queue: [ZMQMessage] = []
        var closed = false
    }

    /// Both ends stay open until the duplex and its thread are both gone, so a late `wake()`
    /// never writes into a reused descriptor.
    private final class WakePipe: Sendable {
        let read: Int32, write: Int32
        init(read: Int32, write: Int32) {
            self.read = read
            self.write = write
        }
        deinit {
            close(read)
            close(write)
        }
    }

    private let handoff: Handoff<ZMQMessage>
    private let outbox = Locked(Outbox())
    private let wakePipe: WakePipe

    /// Takes ownership of `socket`: from now on only the duplex's thread touches it.
    public init(socket: ZMQSocket, configuration: Configuration = Configuration()) throws(ZMQError) {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw ZMQError("pipe", errno: errno, message: "cannot create the wake-up pipe") }
        for fd in fds { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) }
        let wakePipe = WakePipe(read: fds[0], write: fds[1])
        self.wakePipe = wakePipe
        let handoff = Handoff<ZMQMessage>(capacity: configuration.bufferCapacity)
        self.handoff = handoff
        let outbox = self.outbox
        startThread(name: "zmq-duplex") {
            ZMQDuplex.run(socket: socket, handoff: handoff, outbox: outbox, wakePipe: wakePipe, configuration: configuration)
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

    private func wake() {
        var byte: UInt8 = 1
        _ = write(wakePipe.write, &byte, 1)
    }

    private static func run(
        socket: ZMQSocket, handoff: Handoff<ZMQMessage>, outbox: Locked<Outbox>, wakePipe: WakePipe, configuration: Configuration
    ) {
        let wakeRead = wakePipe.read
        var failure: ZMQError?
        var pending: [ZMQMessage] = []
        var drain = [UInt8](repeating: 0, count: 256)
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
            guard let handle = try? socket.requireHandle() else { break loop }
            var items = [
                zmq_pollitem_t(socket: handle, fd: 0, events: Int16(ZMQ_POLLIN) | (pending.isEmpty ? 0 : Int16(ZMQ_POLLOUT)), revents: 0),
                zmq_pollitem_t(socket: nil, fd: wakeRead, events: Int16(POLLIN), revents: 0),
            ]
            let ready = zmq_poll(&items, 2, configuration.pollIntervalMilliseconds)
            if ready < 0 {
                if zmq_errno() == EINTR { continue }
                let error = ZMQError("zmq_poll", errno: zmq_errno())
                if !error.isTerminated { failure = error }
                break loop
            }
            if items[1].revents != 0 { while read(wakeRead, &drain, drain.count) > 0 {} }
            if items[0].revents & Int16(ZMQ_POLLIN) != 0 {
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

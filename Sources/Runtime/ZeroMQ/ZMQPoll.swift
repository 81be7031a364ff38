import CZeroMQ
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What a socket is ready for, or what a thread polling it waits for.
public struct ZMQPollEvents: OptionSet, Sendable {
    public let rawValue: Int16
    public init(rawValue: Int16) { self.rawValue = rawValue }
    public static let readable = ZMQPollEvents(rawValue: Int16(ZMQ_POLLIN))
    public static let writable = ZMQPollEvents(rawValue: Int16(ZMQ_POLLOUT))
}

/// `zmq_poll` over several sockets, for one thread that owns them all and serves them in turn
/// (the usual ZeroMQ shape), instead of one thread per socket handing messages to the next.
public enum ZMQPoll {
    /// Waits until one of `requests` is ready for what it asks, or `timeoutMilliseconds` pass
    /// (0 returns at once), and returns what each one is ready for, in the same order.
    ///
    /// With `busy` (the caller's last pass found work) it does not poll: every socket counts as
    /// ready for what was asked, and the caller's reads and sends, which never wait, find out.
    /// Under load that saves `zmq_poll`'s check of every socket on every pass (two system calls
    /// each); only a pass that found nothing waits.
    public static func wait(
        _ requests: [(socket: ZMQSocket, events: ZMQPollEvents)], timeoutMilliseconds: Int, busy: Bool = false
    ) throws(ZMQError) -> [ZMQPollEvents] {
        if busy { return requests.map(\.events) }
        return try poll(requests, descriptor: nil, timeoutMilliseconds: timeoutMilliseconds)
    }

    /// The same, and also returns early when another thread signals `wakeup` (`woken`; always
    /// true when `busy`).
    public static func wait(
        _ requests: [(socket: ZMQSocket, events: ZMQPollEvents)], wakeup: PollWakeup, timeoutMilliseconds: Int, busy: Bool = false
    ) throws(ZMQError) -> (ready: [ZMQPollEvents], woken: Bool) {
        if busy { return (requests.map(\.events), true) }
        var ready = try poll(requests, descriptor: wakeup.readEnd, timeoutMilliseconds: timeoutMilliseconds)
        let woken = ready.removeLast().contains(.readable)
        if woken { wakeup.clear() }
        return (ready, woken)
    }

    private static func poll(
        _ requests: [(socket: ZMQSocket, events: ZMQPollEvents)], descriptor: Int32?, timeoutMilliseconds: Int
    ) throws(ZMQError) -> [ZMQPollEvents] {
        var items: [zmq_pollitem_t] = []
        items.reserveCapacity(requests.count + 1)
        for request in requests {
            items.append(zmq_pollitem_t(socket: try request.socket.requireHandle(), fd: 0, events: request.events.rawValue, revents: 0))
        }
        if let descriptor { items.append(zmq_pollitem_t(socket: nil, fd: descriptor, events: Int16(POLLIN), revents: 0)) }
        while zmq_poll(&items, Int32(items.count), timeoutMilliseconds) < 0 {
            let code = zmq_errno()
            if code != EINTR { throw ZMQError("zmq_poll", errno: code) }
        }
        return items.map { ZMQPollEvents(rawValue: $0.revents) }
    }
}

/// Lets other threads wake a thread blocked in `ZMQPoll.wait` (through a pipe, as `ZMQDuplex`
/// does): e.g. an event loop that has finished work the polling thread must send.
public final class PollWakeup: Sendable {
    let readEnd: Int32
    private let writeEnd: Int32

    public init() throws(ZMQError) {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw ZMQError("pipe", errno: errno, message: "cannot create the wake-up pipe") }
        for fd in fds { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) }
        (readEnd, writeEnd) = (fds[0], fds[1])
    }

    deinit {
        close(readEnd)
        close(writeEnd)
    }

    /// Wakes the polling thread (at once, or at its next wait). Never blocks: a full pipe
    /// already holds a wake-up.
    public func signal() {
        var byte: UInt8 = 1
        _ = write(writeEnd, &byte, 1)
    }

    func clear() {
        // On the stack: a submitter clears it once per wake-up.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 256) { drain in
            while read(readEnd, drain.baseAddress, drain.count) > 0 {}
        }
    }
}

/// Tells a loop on a thread of its own to finish (it checks between passes).
public final class StopFlag: Sendable {
    private let flag = Atomic<Bool>(false)
    public init() {}
    public func stop() { flag.store(true, ordering: .relaxed) }
    public var isStopped: Bool { flag.load(ordering: .relaxed) }
}

/// Runs `body` on a thread of its own (never a Swift concurrency thread) and returns what it
/// returns. Cancellation sets `stopping`, which `body` must check between passes.
public func runOnOwnThread(name: String, stopping: StopFlag, _ body: @escaping @Sendable () throws -> Void) async throws {
    try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { (done: CheckedContinuation<Void, any Error>) in
            startThread(name: name) { done.resume(with: Result { try body() }) }
        }
    } onCancel: {
        stopping.stop()
    }
}

/// Sends on a socket that a polling thread owns, without ever blocking that thread. What
/// libzmq will not take yet (the peers' HWM is reached, or no peer is connected) waits here in
/// order, and goes out on `flush` once the socket polls writable.
public struct ZMQOutbox {
    public let socket: ZMQSocket
    /// How long `drain` gives peers to take what waits here when the owner stops.
    public let drainMilliseconds: Int64
    private var waiting: [ZMQMessage] = []
    private var head = 0

    public init(socket: ZMQSocket, drainMilliseconds: Int64 = 5000) {
        self.socket = socket
        self.drainMilliseconds = drainMilliseconds
    }

    /// Messages waiting for libzmq to take them.
    public var count: Int { waiting.count - head }

    /// Sends `message` now if nothing waits before it and libzmq takes it; otherwise it waits.
    public mutating func send(_ message: ZMQMessage) throws(ZMQError) {
        if count == 0, try socket.send(message, dontWait: true) { return }
        waiting.append(message)
    }

    /// Sends what waits, in order, until libzmq refuses one; true when nothing waits any more.
    @discardableResult
    public mutating func flush() throws(ZMQError) -> Bool {
        while head < waiting.count, try socket.send(waiting[head], dontWait: true) { head += 1 }
        if head == waiting.count {
            waiting.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 1024, head * 2 >= waiting.count {
            waiting.removeFirst(head)
            head = 0
        }
        return count == 0
    }

    /// What it waits to be writable for: nothing when nothing waits.
    public var pollEvents: ZMQPollEvents { count == 0 ? [] : .writable }

    /// For an owner that is stopping: sends what waits in `outboxes` as their sockets become
    /// writable, each for up to its `drainMilliseconds`, and returns how many messages no peer
    /// took in time (they are dropped; the sockets' LINGER then covers what libzmq holds).
    public static func drain(_ outboxes: inout [ZMQOutbox]) throws(ZMQError) -> Int {
        let start = monotonicNanoseconds()
        var abandoned = 0
        while true {
            let elapsed = Int64((monotonicNanoseconds() - start) / 1_000_000)
            for index in outboxes.indices {
                try outboxes[index].flush()
                if outboxes[index].count > 0, elapsed >= outboxes[index].drainMilliseconds {
                    abandoned += outboxes[index].count
                    outboxes[index] = ZMQOutbox(socket: outboxes[index].socket, drainMilliseconds: outboxes[index].drainMilliseconds)
                }
            }
            let waiting = outboxes.filter { $0.count > 0 }
            if waiting.isEmpty { return abandoned }
            _ = try ZMQPoll.wait(waiting.map { ($0.socket, .writable) }, timeoutMilliseconds: 50)
        }
    }
}

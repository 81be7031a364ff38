import Logging
import PaypipeCore
import Synchronization
import ZeroMQ

/// Socket options for the internal hops. A small send HWM keeps little work parked in any one
/// stage copy's queue, so a copy that leaves takes little with it (the ledger redelivers what it
/// does take) and a copy that joins late gets work soon.
package func stageOptions(highWaterMark: Int32 = 1000) -> ZMQSocketOptions {
    var options = ZMQSocketOptions()
    options.sendHighWaterMark = highWaterMark
    options.receiveHighWaterMark = highWaterMark
    options.maxMessageSize = 4 << 20
    return options
}

/// Options for the work queues (ledger → signers, streamer → submitters): every buffer between
/// the ledger and a stage copy's in-flight work is small, so queued work is not hoarded by the
/// first copy to connect, and a copy that leaves takes little with it.
package func workQueueOptions() -> ZMQSocketOptions {
    var options = stageOptions(highWaterMark: 32)
    options.sendBufferBytes = 64 * 1024
    options.receiveBufferBytes = 64 * 1024
    return options
}

package func milliseconds() -> Int64 { Timestamp.nowMilliseconds() }

/// `Timestamp.steadyMilliseconds()`: for leases and timers, which a wall-clock step must not move.
package func steadyMilliseconds() -> Int64 { Timestamp.steadyMilliseconds() }

/// A tick every `interval` until the consumer stops iterating (e.g. through
/// `cancelOnGracefulShutdown()`).
package func ticks(every interval: Duration) -> AsyncStream<Void> {
    AsyncStream { continuation in
        let task = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: interval)
                if case .terminated = continuation.yield() { break }
            }
            continuation.finish()
        }
        continuation.onTermination = { _ in task.cancel() }
    }
}

/// The connecting sockets of one stage's loop, each with the copies it reaches (`ZMQPeers`):
/// connected once, then kept current by `refresh()` from the loop's thread.
package struct ConnectedPeers: Sendable {
    private var links: [(socket: ZMQSocket, peers: ZMQPeers)] = []

    package init() {}

    /// Connects `socket` to every copy behind `endpoint`.
    package mutating func connect(_ socket: ZMQSocket, _ endpoint: String) throws(ZMQError) {
        let peers = ZMQPeers(endpoint)
        try socket.connect(peers)
        links.append((socket, peers))
    }

    /// Follows copies that came or went; a failed connect is tried again at the next refresh.
    package func refresh() {
        for link in links { try? link.peers.refresh(link.socket) }
    }
}

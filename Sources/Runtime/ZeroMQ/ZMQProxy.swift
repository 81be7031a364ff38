import CZeroMQ

/// A streamer: `zmq_proxy_steerable` between a frontend and a backend socket on a dedicated
/// thread, so producers and consumers on either side only connect to stable addresses.
public final class ZMQProxy: Sendable {
    private let control: ZMQSocket
    private let finished = Locked(false)
    private let stopped = Locked(false)

    /// Takes ownership of both sockets; they are closed when the proxy stops.
    public init(context: ZMQContext, frontend: ZMQSocket, backend: ZMQSocket) throws(ZMQError) {
        let endpoint = "inproc://paypipe-proxy-control-\(UInt64.random(in: 0...UInt64.max))"
        let control = try context.socket(.pair)
        try control.bind(endpoint)
        let receiverSide = try context.socket(.pair)
        try receiverSide.connect(endpoint)
        self.control = control
        let finished = self.finished
        startThread(name: "zmq-proxy") {
            if let f = try? frontend.rawHandle(), let b = try? backend.rawHandle(), let c = try? receiverSide.rawHandle() {
                zmq_proxy_steerable(f, b, nil, c)
            }
            frontend.close()
            backend.close()
            receiverSide.close()
            finished.withLock { $0 = true }
            finished.broadcast()
        }
    }

    /// Stops the proxy and waits (briefly, on this thread) until its sockets are closed.
    public func stop() {
        let first = stopped.withLock { value -> Bool in
            defer { value = true }
            return !value
        }
        guard first else { return }
        _ = try? control.send(Array("TERMINATE".utf8))
        finished.wait(until: { $0 }, timeoutNanoseconds: 5_000_000_000) { _ in }
        control.close()
    }
}

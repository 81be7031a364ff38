import CZeroMQ

/// A libzmq context. Thread-safe (libzmq guarantees it), so it may be shared freely.
///
/// Shutdown order matters: close every socket (each drains for its LINGER), then
/// `terminate()`. `terminate()` blocks until all sockets are closed, so closing sockets is
/// the socket owners' job; `shutdown()` wakes any thread blocked in a socket call with ETERM.
public final class ZMQContext: @unchecked Sendable {
    let handle: UnsafeMutableRawPointer
    private let state = Locked(false)

    public init(ioThreads: Int32 = 1) throws(ZMQError) {
        guard let handle = zmq_ctx_new() else { throw ZMQError("zmq_ctx_new") }
        self.handle = handle
        if zmq_ctx_set(handle, ZMQ_IO_THREADS, ioThreads) != 0 {
            let error = ZMQError("zmq_ctx_set(IO_THREADS)")
            zmq_ctx_term(handle)
            throw error
        }
    }

    public func socket(_ type: ZMQSocketType, options: ZMQSocketOptions = ZMQSocketOptions()) throws(ZMQError) -> ZMQSocket {
        try ZMQSocket(context: self, type: type, options: options)
    }

    /// Makes blocking calls on this context's sockets return ETERM; sockets still need closing.
    public func shutdown() { zmq_ctx_shutdown(handle) }

    /// Waits for every socket to be closed (lingering messages sent), then frees the context.
    public func terminate() {
        let first = state.withLock { terminated -> Bool in
            defer { terminated = true }
            return !terminated
        }
        guard first else { return }
        while zmq_ctx_term(handle) != 0 && zmq_errno() == EINTR {}
    }

    deinit { terminate() }

    /// libzmq's version, e.g. (4, 3, 4).
    public static var version: (major: Int32, minor: Int32, patch: Int32) {
        var major: Int32 = 0, minor: Int32 = 0, patch: Int32 = 0
        zmq_version(&major, &minor, &patch)
        return (major, minor, patch)
    }

    public static func has(_ capability: String) -> Bool { zmq_has(capability) == 1 }
}

import CZeroMQ

/// A libzmq failure: the operation, errno and libzmq's own text for it.
public struct ZMQError: Error, Sendable, Equatable, CustomStringConvertible {
    public let operation: String
    public let errno: Int32
    public let message: String

    init(_ operation: String, errno code: Int32 = zmq_errno()) {
        self.operation = operation
        self.errno = code
        self.message = String(cString: zmq_strerror(code))
    }

    init(_ operation: String, errno code: Int32, message: String) {
        self.operation = operation
        self.errno = code
        self.message = message
    }

    public var description: String { "\(operation): \(message) (errno \(errno))" }

    /// The operation would block (timeout or `dontWait`).
    public var isWouldBlock: Bool { errno == EAGAIN }
    /// The context was shut down or terminated.
    public var isTerminated: Bool { errno == ETERM }
    public var isInterrupted: Bool { errno == EINTR }

    static let closed = ZMQError("socket", errno: ENOTSOCK, message: "the socket is closed")
}

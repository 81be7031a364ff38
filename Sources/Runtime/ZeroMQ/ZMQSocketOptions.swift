/// Socket options with explicit defaults: ZeroMQ is a transport, not a queue.
public struct ZMQSocketOptions: Sendable, Equatable {
    /// Messages queued per peer before a send blocks (backpressure). libzmq's default.
    public var sendHighWaterMark: Int32 = 1000
    public var receiveHighWaterMark: Int32 = 1000
    /// Queue only onto connections that are up, so a message is never parked on a dead peer.
    public var immediate = true
    /// How long `close` may spend delivering queued messages. Finite, never 0 by default:
    /// 0 drops whatever is queued, infinite hangs shutdown on a dead peer.
    public var lingerMilliseconds: Int32 = 2000
    /// -1 waits forever.
    public var sendTimeoutMilliseconds: Int32 = -1
    public var receiveTimeoutMilliseconds: Int32 = -1
    /// ZMTP heartbeats, off by default (0). A heartbeat timeout kills a connection whose
    /// receiver is applying backpressure: at its HWM the receiving engine stops reading, so PINGs
    /// go unanswered, the sender drops the connection and the messages queued on it, then
    /// reconnects and delivers the rest out of order (ZeroMQTests reproduces this). Dead peers
    /// are noticed with TCP keepalive instead, which the kernel answers even while the
    /// application is not reading.
    public var heartbeatIntervalMilliseconds: Int32 = 0
    public var heartbeatTimeoutMilliseconds: Int32 = 0
    public var heartbeatTTLMilliseconds: Int32 = 0
    /// TCP keepalive: probe after `tcpKeepaliveIdleSeconds` of silence, every
    /// `tcpKeepaliveIntervalSeconds`, and give up after `tcpKeepaliveCount` missed probes.
    public var tcpKeepalive = true
    public var tcpKeepaliveIdleSeconds: Int32 = 10
    public var tcpKeepaliveIntervalSeconds: Int32 = 5
    public var tcpKeepaliveCount: Int32 = 3
    /// Kernel socket buffer sizes in bytes (0: the OS default). Loopback TCP buffers hold
    /// megabytes, i.e. thousands of small messages beyond the HWMs; work queues that must share
    /// work fairly between consumers shrink them.
    public var sendBufferBytes: Int32 = 0
    public var receiveBufferBytes: Int32 = 0
    /// Largest inbound message in bytes; a peer sending a larger one is disconnected. -1: no limit.
    public var maxMessageSize: Int64 = -1
    public var curve: ZMQCurve? = nil
    /// The ZAP domain a CURVE server socket reports to the context's authenticator, which
    /// decides per domain which clients may connect (`ZMQCurveAuthenticator.Policy`).
    public var zapDomain: String? = nil

    public init() {}
}

/// CURVE security (libsodium). A server without a ZAP handler accepts every client that knows
/// its public key; use `ZMQCurveAuthenticator` to allow only listed client keys.
public enum ZMQCurve: Sendable, Equatable {
    case server(secretKey: String)
    /// `nextServerPublicKey`: while the server's key is being replaced, each connect is made
    /// twice, once expecting each key, so the socket reaches the server whichever it holds.
    /// Only one of the two handshakes can succeed; with `immediate` no message is queued on
    /// the other, which keeps retrying until the server holds that key.
    case client(serverPublicKey: String, publicKey: String, secretKey: String, nextServerPublicKey: String? = nil)
}

/// A Z85-encoded CURVE key pair.
public struct ZMQCurveKeyPair: Sendable, Equatable {
    public let publicKey: String
    public let secretKey: String

    public init(publicKey: String, secretKey: String) {
        self.publicKey = publicKey
        self.secretKey = secretKey
    }
}

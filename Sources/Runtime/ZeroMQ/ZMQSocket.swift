import CZeroMQ

public enum ZMQSocketType: Sendable {
    case push, pull, pub, sub, router, dealer, pair, req, rep

    var rawValue: Int32 {
        switch self {
        case .push: ZMQ_PUSH
        case .pull: ZMQ_PULL
        case .pub: ZMQ_PUB
        case .sub: ZMQ_SUB
        case .router: ZMQ_ROUTER
        case .dealer: ZMQ_DEALER
        case .pair: ZMQ_PAIR
        case .req: ZMQ_REQ
        case .rep: ZMQ_REP
        }
    }
}

/// One libzmq socket with a blocking API.
///
/// A socket is not thread-safe: use it from one thread at a time. It is `@unchecked Sendable`
/// only so that it can be handed to the thread that will own it (`ZMQReceiver`, `ZMQSender`
/// and `ZMQProxy` do exactly that); never use it from two threads.
public final class ZMQSocket: @unchecked Sendable {
    public let type: ZMQSocketType
    public let options: ZMQSocketOptions
    let context: ZMQContext
    private(set) var handle: UnsafeMutableRawPointer?

    init(context: ZMQContext, type: ZMQSocketType, options: ZMQSocketOptions) throws(ZMQError) {
        guard let handle = zmq_socket(context.handle, type.rawValue) else { throw ZMQError("zmq_socket") }
        self.context = context
        self.type = type
        self.options = options
        self.handle = handle
        do {
            try apply(options)
        } catch {
            close()
            throw error
        }
    }

    deinit { close() }

    private func apply(_ o: ZMQSocketOptions) throws(ZMQError) {
        try setOption(ZMQ_SNDHWM, o.sendHighWaterMark, "SNDHWM")
        try setOption(ZMQ_RCVHWM, o.receiveHighWaterMark, "RCVHWM")
        try setOption(ZMQ_LINGER, o.lingerMilliseconds, "LINGER")
        try setOption(ZMQ_SNDTIMEO, o.sendTimeoutMilliseconds, "SNDTIMEO")
        try setOption(ZMQ_RCVTIMEO, o.receiveTimeoutMilliseconds, "RCVTIMEO")
        try setOption(ZMQ_HEARTBEAT_IVL, o.heartbeatIntervalMilliseconds, "HEARTBEAT_IVL")
        try setOption(ZMQ_HEARTBEAT_TIMEOUT, o.heartbeatTimeoutMilliseconds, "HEARTBEAT_TIMEOUT")
        try setOption(ZMQ_HEARTBEAT_TTL, o.heartbeatTTLMilliseconds, "HEARTBEAT_TTL")
        if o.sendBufferBytes > 0 { try setOption(ZMQ_SNDBUF, o.sendBufferBytes, "SNDBUF") }
        if o.receiveBufferBytes > 0 { try setOption(ZMQ_RCVBUF, o.receiveBufferBytes, "RCVBUF") }
        try setOption(ZMQ_TCP_KEEPALIVE, o.tcpKeepalive ? 1 : 0, "TCP_KEEPALIVE")
        try setOption(ZMQ_TCP_KEEPALIVE_IDLE, o.tcpKeepaliveIdleSeconds, "TCP_KEEPALIVE_IDLE")
        try setOption(ZMQ_TCP_KEEPALIVE_INTVL, o.tcpKeepaliveIntervalSeconds, "TCP_KEEPALIVE_INTVL")
        try setOption(ZMQ_TCP_KEEPALIVE_CNT, o.tcpKeepaliveCount, "TCP_KEEPALIVE_CNT")
        var maxSize = o.maxMessageSize
        try setRaw(ZMQ_MAXMSGSIZE, &maxSize, MemoryLayout<Int64>.size, "MAXMSGSIZE")
        if type != .pub && type != .sub && type != .rep && type != .req {
            try setOption(ZMQ_IMMEDIATE, o.immediate ? 1 : 0, "IMMEDIATE")
        }
        if let domain = o.zapDomain {
            try setString(ZMQ_ZAP_DOMAIN, domain, "ZAP_DOMAIN")
            // Without it libzmq admits a CURVE client when no ZAP handler answers (one stopping,
            // or not yet started): every handshake must be the handler's decision.
            try setOption(Self.zapEnforceDomain, 1, "ZAP_ENFORCE_DOMAIN")
        }
        switch o.curve {
        case nil: break
        case .server(let secretKey):
            try setOption(ZMQ_CURVE_SERVER, 1, "CURVE_SERVER")
            try setString(ZMQ_CURVE_SECRETKEY, secretKey, "CURVE_SECRETKEY")
        case .client(let serverPublicKey, let publicKey, let secretKey, _):
            try setString(ZMQ_CURVE_SERVERKEY, serverPublicKey, "CURVE_SERVERKEY")
            try setString(ZMQ_CURVE_PUBLICKEY, publicKey, "CURVE_PUBLICKEY")
            try setString(ZMQ_CURVE_SECRETKEY, secretKey, "CURVE_SECRETKEY")
        }
    }

    /// `ZMQ_ZAP_ENFORCE_DOMAIN` (libzmq 4.3 draft API; Debian's libzmq builds it in).
    static let zapEnforceDomain: Int32 = 93

    func requireHandle() throws(ZMQError) -> UnsafeMutableRawPointer {
        guard let handle else { throw ZMQError.closed }
        return handle
    }

    public func setOption(_ option: Int32, _ value: Int32, _ name: String = "option") throws(ZMQError) {
        var value = value
        try setRaw(option, &value, MemoryLayout<Int32>.size, name)
    }

    public func setString(_ option: Int32, _ value: String, _ name: String = "option") throws(ZMQError) {
        var bytes = Array(value.utf8)
        try setRaw(option, &bytes, bytes.count, name)
    }

    private func setRaw(_ option: Int32, _ value: UnsafeRawPointer, _ size: Int, _ name: String) throws(ZMQError) {
        let handle = try requireHandle()
        if zmq_setsockopt(handle, option, value, size) != 0 { throw ZMQError("zmq_setsockopt(\(name))") }
    }

    public func getInt32(_ option: Int32, _ name: String = "option") throws(ZMQError) -> Int32 {
        let handle = try requireHandle()
        var value: Int32 = 0
        var size = MemoryLayout<Int32>.size
        if zmq_getsockopt(handle, option, &value, &size) != 0 { throw ZMQError("zmq_getsockopt(\(name))") }
        return value
    }

    /// The endpoint last bound or connected, with the real port for `tcp://host:*`.
    public var lastEndpoint: String {
        get throws(ZMQError) {
            let handle = try requireHandle()
            var buffer = [CChar](repeating: 0, count: 1024)
            var size = buffer.count
            if zmq_getsockopt(handle, ZMQ_LAST_ENDPOINT, &buffer, &size) != 0 { throw ZMQError("zmq_getsockopt(LAST_ENDPOINT)") }
            return String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
    }

    /// Binds and returns the real endpoint (so `tcp://127.0.0.1:*` tells its port).
    @discardableResult
    public func bind(_ endpoint: String) throws(ZMQError) -> String {
        let handle = try requireHandle()
        if zmq_bind(handle, endpoint) != 0 { throw ZMQError("zmq_bind(\(endpoint))") }
        return try lastEndpoint
    }

    /// Connects; a CURVE client with a next server key connects a second time expecting that
    /// key (libzmq takes the server key of each connection when it is made). `disconnect`
    /// drops both.
    @discardableResult
    public func connect(_ endpoint: String) throws(ZMQError) -> String {
        let handle = try requireHandle()
        if zmq_connect(handle, endpoint) != 0 { throw ZMQError("zmq_connect(\(endpoint))") }
        let connected = try lastEndpoint
        if case .client(let serverPublicKey, _, _, let next?) = options.curve {
            try setString(ZMQ_CURVE_SERVERKEY, next, "CURVE_SERVERKEY")
            defer { try? setString(ZMQ_CURVE_SERVERKEY, serverPublicKey, "CURVE_SERVERKEY") }
            let second = Self.secondConnection(to: endpoint)
            if zmq_connect(handle, second) != 0 { throw ZMQError("zmq_connect(\(second))") }
        }
        return connected
    }

    /// The same TCP endpoint under another name: libzmq ignores a DEALER's (or SUB's) second
    /// connect to a name it is connected to, so the second connection names a source address
    /// (any interface, any port), which changes the name and nothing else.
    static func secondConnection(to endpoint: String) -> String {
        guard endpoint.hasPrefix("tcp://"), !endpoint.contains(";") else { return endpoint }
        let destination = endpoint.dropFirst(6)
        return "tcp://" + (destination.hasPrefix("[") ? "[::]:0;" : "0.0.0.0:0;") + destination
    }

    /// Whether a send would be taken now. With `immediate` (every stage socket), a PUSH or
    /// DEALER with no completed connection takes nothing, so this also tells whether any peer
    /// is reachable.
    public var canSend: Bool {
        (try? getInt32(ZMQ_EVENTS, "EVENTS")).map { $0 & Int32(ZMQ_POLLOUT) != 0 } ?? false
    }

    public func disconnect(_ endpoint: String) throws(ZMQError) {
        let handle = try requireHandle()
        if zmq_disconnect(handle, endpoint) != 0 { throw ZMQError("zmq_disconnect(\(endpoint))") }
        if case .client(_, _, _, _?) = options.curve, Self.secondConnection(to: endpoint) != endpoint {
            _ = zmq_disconnect(handle, Self.secondConnection(to: endpoint))
        }
    }

    /// Connects to every copy behind `peers`' endpoint (`ZMQPeers`).
    public func connect(_ peers: ZMQPeers) throws(ZMQError) {
        try peers.refresh(self, force: true)
    }

    public func subscribe(_ prefix: [UInt8] = []) throws(ZMQError) {
        let handle = try requireHandle()
        if zmq_setsockopt(handle, ZMQ_SUBSCRIBE, prefix, prefix.count) != 0 { throw ZMQError("zmq_setsockopt(SUBSCRIBE)") }
    }

    /// Sends one frame. Returns false when it would block (`dontWait`, or SNDTIMEO passed).
    @discardableResult
    public func send(_ frame: UnsafeRawBufferPointer, more: Bool = false, dontWait: Bool = false) throws(ZMQError) -> Bool {
        let handle = try requireHandle()
        let flags = (more ? ZMQ_SNDMORE : 0) | (dontWait ? ZMQ_DONTWAIT : 0)
        while true {
            if zmq_send(handle, frame.baseAddress, frame.count, flags) >= 0 { return true }
            let code = zmq_errno()
            if code == EINTR { continue }
            if code == EAGAIN { return false }
            throw ZMQError("zmq_send", errno: code)
        }
    }

    @discardableResult
    public func send(_ frame: [UInt8], more: Bool = false, dontWait: Bool = false) throws(ZMQError) -> Bool {
        let result = frame.withUnsafeBytes { buffer in
            Result { () throws(ZMQError) -> Bool in try send(buffer, more: more, dontWait: dontWait) }
        }
        return try result.get()
    }

    /// Sends every frame of a message. Only the first frame may report "would block": libzmq
    /// queues the rest of a multipart message atomically once the first frame is accepted.
    @discardableResult
    public func send(_ message: ZMQMessage, dontWait: Bool = false) throws(ZMQError) -> Bool {
        let last = message.frames.count - 1
        guard last >= 0 else { return try send([UInt8](), dontWait: dontWait) }
        for (index, frame) in message.frames.enumerated() {
            let sent = try send(frame, more: index < last, dontWait: index == 0 && dontWait)
            if !sent {
                guard index == 0 else { throw ZMQError("zmq_send", errno: EAGAIN, message: "multipart message cut short by a send timeout") }
                return false
            }
        }
        return true
    }

    /// Receives one whole message (all frames) through `zmq_msg_t`, so any size arrives intact.
    /// Returns nil when it would block (`dontWait`, or RCVTIMEO passed).
    public func receive(dontWait: Bool = false) throws(ZMQError) -> ZMQMessage? {
        let handle = try requireHandle()
        var frames: [[UInt8]] = []
        // Only a CURVE server's peers were authenticated, so only there does User-Id mean anything.
        let readsUserId = if case .server = options.curve { true } else { false }
        var userId: String?
        var message = zmq_msg_t()
        zmq_msg_init(&message)
        defer { zmq_msg_close(&message) }
        while true {
            let flags = frames.isEmpty && dontWait ? ZMQ_DONTWAIT : 0
            let received = zmq_msg_recv(&message, handle, flags)
            if received < 0 {
                let code = zmq_errno()
                if code == EINTR { continue }
                if code == EAGAIN && frames.isEmpty { return nil }
                throw ZMQError("zmq_msg_recv", errno: code)
            }
            let size = zmq_msg_size(&message)
            if size == 0 {
                frames.append([])
            } else {
                let data = UnsafeRawBufferPointer(start: zmq_msg_data(&message), count: size)
                frames.append(Array(data))
            }
            // A ROUTER's identity frame is made locally and carries no metadata: ask every frame.
            if readsUserId, userId == nil, let value = zmq_msg_gets(&message, "User-Id") { userId = String(cString: value) }
            if zmq_msg_more(&message) == 0 { return ZMQMessage(frames: frames, userId: userId) }
        }
    }

    /// Closes the socket; queued outbound messages get up to LINGER to be delivered.
    public func close() {
        guard let handle else { return }
        zmq_close(handle)
        self.handle = nil
    }

    public var isClosed: Bool { handle == nil }
}

/// One ZeroMQ message: one or more frames.
public struct ZMQMessage: Sendable, Equatable {
    public var frames: [[UInt8]]
    /// The User-Id the ZAP handler gave the sending peer (received on a CURVE server socket
    /// with a `ZMQCurveAuthenticator`); nil otherwise. Never sent.
    public var userId: String?

    public init(frames: [[UInt8]], userId: String? = nil) {
        self.frames = frames
        self.userId = userId
    }
    public init(_ frame: [UInt8]) { frames = [frame] }
    public init(_ text: String) { frames = [Array(text.utf8)] }

    /// The first (usually only) frame.
    public var body: [UInt8] { frames.first ?? [] }
    public var byteCount: Int { frames.reduce(0) { $0 + $1.count } }
}

extension ZMQCurveKeyPair {
    /// A fresh key pair from libzmq (needs libsodium, which Debian's libzmq has).
    public static func generate() throws(ZMQError) -> ZMQCurveKeyPair {
        var publicKey = [CChar](repeating: 0, count: 41)
        var secretKey = [CChar](repeating: 0, count: 41)
        if zmq_curve_keypair(&publicKey, &secretKey) != 0 { throw ZMQError("zmq_curve_keypair") }
        func text(_ chars: [CChar]) -> String {
            String(decoding: chars.prefix(40).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
        return ZMQCurveKeyPair(publicKey: text(publicKey), secretKey: text(secretKey))
    }
}

extension ZMQCurveKeyPair {
    /// The public key that belongs to a Z85 secret key; nil for text that is not one.
    public static func publicKey(ofSecretKey secretKey: String) -> String? {
        guard secretKey.utf8.count == 40 else { return nil }
        var publicKey = [CChar](repeating: 0, count: 41)
        guard zmq_curve_public(&publicKey, secretKey) == 0 else { return nil }
        return String(decoding: publicKey.prefix(40).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

extension ZMQSocket {
    /// The libzmq socket pointer, for benchmarks that compare against raw libzmq calls.
    public func rawHandle() throws(ZMQError) -> UnsafeMutableRawPointer { try requireHandle() }
}

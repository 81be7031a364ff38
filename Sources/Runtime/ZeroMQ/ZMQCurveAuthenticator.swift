import CZeroMQ

/// A ZAP handler (RFC 27) for one context's CURVE server sockets: it admits only listed client
/// public keys, and only to the ZAP domains their User-Id is allowed on.
///
/// Without it a CURVE server accepts any client that knows the server's public key. libzmq asks
/// the REP socket bound at `inproc://zeromq.zap.01` in the server socket's context about each
/// handshake; this serves that socket on a dedicated thread. Start it before the server sockets
/// bind, and `stop()` it before the context terminates (terminate waits for its socket).
public final class ZMQCurveAuthenticator: Sendable {
    public struct Policy: Sendable, Equatable {
        /// Client public key (Z85, 40 characters) → the User-Id its messages carry.
        public var users: [String: String]
        /// ZAP domain → the User-Ids that may connect to server sockets of that domain. A domain
        /// not listed (or a socket with no domain) admits nobody.
        public var domains: [String: Set<String>]

        public init(users: [String: String], domains: [String: Set<String>]) {
            self.users = users
            self.domains = domains
        }

        /// The User-Id to admit with, or nil to refuse.
        public func admit(publicKey: String, domain: String) -> String? {
            guard let user = users[publicKey], domains[domain]?.contains(user) == true else { return nil }
            return user
        }
    }

    /// Per RFC 27: the endpoint every libzmq context consults.
    public static let endpoint = "inproc://zeromq.zap.01"

    private let stopping = Locked(false)
    private let finished = Locked(false)
    private let refusals = Locked(0)

    public init(context: ZMQContext, policy: Policy) throws(ZMQError) {
        var options = ZMQSocketOptions()
        options.lingerMilliseconds = 0
        // A short receive timeout so the thread notices `stop()`.
        options.receiveTimeoutMilliseconds = 50
        let socket = try context.socket(.rep, options: options)
        do {
            try socket.bind(Self.endpoint)
        } catch {
            socket.close()
            throw error
        }
        let (stopping, finished, refusals) = (self.stopping, self.finished, self.refusals)
        startThread(name: "zmq-zap") {
            while !stopping.withLock({ $0 }) {
                let received: ZMQMessage?
                do {
                    received = try socket.receive()
                } catch {
                    break  // the context is ending (receive retries EINTR itself)
                }
                guard let request = received else { continue }  // the receive timeout passed
                let reply = Self.reply(to: request, policy: policy)
                if reply.frames[2] != Array("200".utf8) { refusals.withLock { $0 += 1 } }
                do {
                    try socket.send(reply)
                } catch {
                    break
                }
            }
            socket.close()
            finished.withLock { $0 = true }
            finished.broadcast()
        }
    }

    /// Handshakes refused so far (a wrong or unlisted key, or a key on a domain not its own).
    public var refusedCount: Int { refusals.withLock { $0 } }

    /// Stops serving and waits (briefly, on this thread) until the handler's socket is closed.
    /// Handshakes after this fail: libzmq refuses when no handler answers.
    public func stop() {
        stopping.withLock { $0 = true }
        finished.wait(until: { $0 }, timeoutNanoseconds: 5_000_000_000) { _ in }
    }

    /// The reply to one ZAP request: version, request id, status code, status text, user id,
    /// metadata.
    package static func reply(to request: ZMQMessage, policy: Policy) -> ZMQMessage {
        let frames = request.frames
        func answer(_ code: String, _ text: String, user: String = "") -> ZMQMessage {
            ZMQMessage(frames: [Array("1.0".utf8), frames.count > 1 ? frames[1] : [], Array(code.utf8), Array(text.utf8), Array(user.utf8), []])
        }
        // version, request id, domain, address, identity, mechanism, credentials...
        guard frames.count >= 6, frames[0] == Array("1.0".utf8) else { return answer("500", "bad ZAP request") }
        guard frames[5] == Array("CURVE".utf8), frames.count == 7, frames[6].count == 32 else {
            return answer("400", "CURVE only")
        }
        let domain = String(decoding: frames[2], as: UTF8.self)
        guard let key = z85(frames[6]), let user = policy.admit(publicKey: key, domain: domain) else {
            return answer("400", "key not allowed")
        }
        return answer("200", "OK", user: user)
    }

    static func z85(_ key: [UInt8]) -> String? {
        var text = [CChar](repeating: 0, count: 41)
        guard zmq_z85_encode(&text, key, key.count) != nil else { return nil }
        return String(decoding: text.prefix(40).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

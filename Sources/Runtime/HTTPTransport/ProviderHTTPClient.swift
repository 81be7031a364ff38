import NIOCore
import NIOPosix
import NIOSSL
import PaypipeCore
import Synchronization

/// Sends provider requests exactly as the signer built them, over HTTP/1.1 keep-alive
/// connections kept per origin, with connect and request timeouts from the config's timers.
///
/// A small client that writes and reads HTTP/1.1 itself (`HTTP1Wire.swift`) rather than a
/// general-purpose one: one request per connection at a time, no redirects, no decompression,
/// no proxies. That is all a provider
/// call needs, and a general client's per-request cost would be paid on every request the
/// submitter and the poller send. How many requests run at once is
/// bounded by the callers (the submitter's and poller's `--concurrency`), so every caller gets
/// a connection: an idle one of its origin or a new one.
package final class ProviderHTTPClient: Sendable {
    let connectTimeout: TimeAmount
    let requestTimeout: TimeAmount
    /// Idle connections kept per origin; more are closed when returned.
    let maxIdlePerOrigin: Int
    let tlsConfiguration: TLSConfiguration
    /// Made on the first HTTPS request: loading the system's trust roots takes a while, and a
    /// client that only talks plain HTTP (the sandbox, tests) never needs them.
    private let tls = Mutex<Result<NIOSSLContext, TransportFailure>?>(nil)
    let group: any EventLoopGroup
    private let pool = Mutex(Pool())

    /// Idle keep-alive connections by origin.
    private struct Pool {
        var idle: [Origin: [Idle]] = [:]
        var isShutDown = false
    }

    private struct Idle {
        var channel: any Channel
        var since: NIODeadline
    }

    /// `tlsConfiguration`: the system's trust roots unless a test gives its own.
    package init(
        connectTimeoutMilliseconds: Int64, requestTimeoutMilliseconds: Int64, maxIdleConnectionsPerHost: Int = 512,
        tlsConfiguration: TLSConfiguration = .makeClientConfiguration()
    ) {
        connectTimeout = .milliseconds(connectTimeoutMilliseconds)
        requestTimeout = .milliseconds(requestTimeoutMilliseconds)
        maxIdlePerOrigin = max(1, maxIdleConnectionsPerHost)
        group = MultiThreadedEventLoopGroup.singleton
        self.tlsConfiguration = tlsConfiguration
    }

    private func tlsContext() -> Result<NIOSSLContext, TransportFailure> {
        tls.withLock { made in
            if let made { return made }
            let result = Result { try NIOSSLContext(configuration: tlsConfiguration) }
                .mapError { TransportFailure.notSent("TLS is not available: \($0)") }
            made = result
            return result
        }
    }

    package func execute(_ spec: HTTPRequestSpec) async -> Result<HTTPResponseSpec, TransportFailure> {
        await withCheckedContinuation { answered in
            execute(spec) { answered.resume(returning: $0) }
        }
    }

    /// The same, calling `completion` once with the result, on the connection's event loop
    /// unless the request fails before it has one. For a caller that handles answers on the
    /// event loop: the poller, whose per-request hops into Swift concurrency would wake a
    /// thread per poll.
    package func execute(_ spec: HTTPRequestSpec, completion: @escaping @Sendable (Result<HTTPResponseSpec, TransportFailure>) -> Void) {
        guard let target = Target(url: spec.url) else { return completion(.failure(.notSent("unsupported URL"))) }
        let request: HTTP1Request
        do throws(HTTP1Request.Invalid) {
            request = try HTTP1Request(spec, target: target)
        } catch {
            return completion(.failure(.notSent(error.description)))
        }
        switch connection(to: target.origin) {
        case .failure(let failure): completion(.failure(failure))
        case .success(.idle(let channel)): send(request, to: target, on: channel, completion: completion)
        case .success(.connecting(let connected)):
            connected.whenComplete { result in
                switch result {
                case .success(let channel): self.send(request, to: target, on: channel, completion: completion)
                case .failure(let error): completion(.failure(Self.classifyConnectFailure(error)))
                }
            }
        }
    }

    /// Runs `body` on an event loop once `delay` has passed (a retry's backoff).
    package func schedule(afterMilliseconds delay: Int64, _ body: @escaping @Sendable () -> Void) {
        group.next().scheduleTask(in: .milliseconds(delay), body)
    }

    private func send(
        _ request: HTTP1Request, to target: Target, on channel: any Channel,
        completion: @escaping @Sendable (Result<HTTPResponseSpec, TransportFailure>) -> Void
    ) {
        // From another thread (a stage's own), each of the write and the two callbacks below
        // would be a task of its own handed to the event loop: hop once and do all three there.
        guard channel.eventLoop.inEventLoop else {
            return channel.eventLoop.execute { self.send(request, to: target, on: channel, completion: completion) }
        }
        let promise = channel.eventLoop.makePromise(of: ExchangeHandler.Answer.self)
        // A connection closed under us never reaches the handler: its failed write answers.
        channel.writeAndFlush(ExchangeHandler.Request(http: request, timeout: requestTimeout, answer: promise))
            .whenFailure { promise.fail($0) }
        promise.futureResult.whenComplete { result in
            switch result {
            case .success(let answer):
                if answer.keepAlive { self.release(channel, to: target.origin) } else { channel.close(promise: nil) }
                completion(.success(answer.response))
            case .failure(let error):
                channel.close(promise: nil)
                // Written or not, the request may have reached the provider: resolve, never resend.
                completion(.failure(.mayHaveBeenSent(String(String(describing: error).prefix(120)))))
            }
        }
    }

    private enum Connection {
        case idle(any Channel)
        case connecting(EventLoopFuture<any Channel>)
    }

    /// An idle connection of `origin` that is still open, or a new one. Only a failure to
    /// connect is certain not to have sent anything.
    private func connection(to origin: Origin) -> Result<Connection, TransportFailure> {
        let now = NIODeadline.now()
        let (reused, stale, isShutDown) = pool.withLock { pool -> ((any Channel)?, [any Channel], Bool) in
            if pool.isShutDown { return (nil, [], true) }
            var stale: [any Channel] = []
            // Popped in place: a copy of the origin's list per request would be O(idle).
            while let last = pool.idle[origin]?.popLast() {
                // Servers close idle keep-alive connections (nginx after 75 s by default);
                // one that sat longer than ours is not worth a failed request.
                if last.channel.isActive, now - last.since < Self.idleTimeout { return (last.channel, stale, false) }
                stale.append(last.channel)
            }
            return (nil, stale, false)
        }
        for channel in stale { channel.close(promise: nil) }
        if isShutDown { return .failure(.notSent("the HTTP client is shut down")) }
        if let reused { return .success(.idle(reused)) }
        let tls: NIOSSLContext?
        switch origin.tls ? tlsContext().map(Optional.some) : .success(nil) {
        case .success(let context): tls = context
        case .failure(let failure): return .failure(failure)
        }
        let bootstrap = ClientBootstrap(group: group)
            .connectTimeout(connectTimeout)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let handlers = channel.pipeline.syncOperations
                    if let tls { try handlers.addHandler(try NIOSSLClientHandler(context: tls, serverHostname: origin.serverName)) }
                    try handlers.addHandler(ExchangeHandler())
                }
            }
        return .success(.connecting(bootstrap.connect(host: origin.host, port: origin.port)))
    }

    private func release(_ channel: any Channel, to origin: Origin) {
        let kept = pool.withLock { pool -> Bool in
            guard !pool.isShutDown, channel.isActive, pool.idle[origin, default: []].count < maxIdlePerOrigin else { return false }
            pool.idle[origin, default: []].append(Idle(channel: channel, since: .now()))
            return true
        }
        if !kept { channel.close(promise: nil) }
    }

    /// Idle connections older than this are closed instead of reused.
    static let idleTimeout = TimeAmount.seconds(60)

    /// A connection that could not be made sent nothing: the request is written only once
    /// `connect` succeeded (a TLS handshake failing after it counts as "may have been sent").
    static func classifyConnectFailure(_ error: any Error) -> TransportFailure {
        let causes: [any Error] = (error as? NIOConnectionError).map { $0.connectionErrors.map(\.error) } ?? [error]
        for cause in causes {
            if let channelError = cause as? ChannelError, case .connectTimeout = channelError { return .notSent("connect timeout") }
            if let ioError = cause as? IOError, ioError.errnoCode == 111 /* ECONNREFUSED */ { return .notSent("connection refused") }
        }
        return .notSent("could not connect: \(String(String(describing: error).prefix(100)))")
    }

    package func shutdown() async {
        let channels = pool.withLock { pool -> [any Channel] in
            pool.isShutDown = true
            defer { pool.idle = [:] }
            return pool.idle.values.flatMap { $0.map(\.channel) }
        }
        for channel in channels { try? await channel.close() }
    }
}

extension ProviderHTTPClient: ProviderHTTPTransport {}

/// Scheme, host and port: what a connection can be reused for.
struct Origin: Hashable, Sendable {
    var tls: Bool
    var host: String
    var port: Int

    /// The TLS server name: a host name, never an IP literal (RFC 6066 §3).
    var serverName: String? {
        host.contains(":") || host.allSatisfy({ $0.isNumber || $0 == "." }) ? nil : host
    }
}

/// A request URL taken apart: `http(s)://host[:port][/path][?query]`, IPv6 hosts in brackets.
/// Anything else (user info, other schemes, a fragment) is refused before anything is sent.
package struct Target: Equatable {
    var origin: Origin
    /// Path and query, as sent in the request line.
    var path: String
    var hostHeader: String

    private static let https = Array("https://".utf8), http = Array("http://".utf8)

    /// Scanned as UTF-8 bytes: every delimiter is ASCII, and walking Characters would
    /// break graphemes on every URL (one per request).
    package init?(url: String) {
        let bytes = Array(url.utf8)
        let tls: Bool, start: Int
        if bytes.starts(with: Self.https) {
            (tls, start) = (true, Self.https.count)
        } else if bytes.starts(with: Self.http) {
            (tls, start) = (false, Self.http.count)
        } else {
            return nil
        }
        let slash = UInt8(ascii: "/"), question = UInt8(ascii: "?"), colon = UInt8(ascii: ":")
        let authorityEnd = bytes[start...].firstIndex(where: { $0 == slash || $0 == question }) ?? bytes.endIndex
        let authority = bytes[start..<authorityEnd]
        let pathBytes = bytes[authorityEnd...]
        guard !authority.isEmpty, !authority.contains(UInt8(ascii: "@")),
            !pathBytes.contains(UInt8(ascii: "#")), !pathBytes.contains(UInt8(ascii: " "))
        else { return nil }
        var path = String(decoding: pathBytes, as: UTF8.self)
        if path.isEmpty { path = "/" } else if pathBytes.first == question { path = "/" + path }
        var host: ArraySlice<UInt8>, portText: ArraySlice<UInt8>?
        if authority.first == UInt8(ascii: "[") {
            guard let close = authority.firstIndex(of: UInt8(ascii: "]")) else { return nil }
            host = authority[(authority.startIndex + 1)..<close]
            let after = authority[(close + 1)...]
            if !after.isEmpty {
                guard after.first == colon else { return nil }
                portText = after.dropFirst()
            }
        } else if let lastColon = authority.lastIndex(of: colon) {
            host = authority[..<lastColon]
            portText = authority[(lastColon + 1)...]
        } else {
            host = authority
        }
        let defaultPort = tls ? 443 : 80
        var port = defaultPort
        if let portText {
            guard let parsed = Int(String(decoding: portText, as: UTF8.self)), (1...65535).contains(parsed) else { return nil }
            port = parsed
        }
        guard !host.isEmpty else { return nil }
        let hostText = String(decoding: host, as: UTF8.self)
        origin = Origin(tls: tls, host: hostText, port: port)
        self.path = path
        let bracketed = authority.first == UInt8(ascii: "[") ? "[" + hostText + "]" : hostText
        hostHeader = port == defaultPort ? bracketed : bracketed + ":" + String(port)
    }
}

/// One connection's request/response exchange: the request written, the response read up to a
/// limit, and the answer given once, whatever ends it first (the response, the request
/// timeout, a closed connection or an error).
final class ExchangeHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = Request
    typealias OutboundOut = ByteBuffer

    struct Request: Sendable {
        var http: HTTP1Request
        var timeout: TimeAmount
        var answer: EventLoopPromise<Answer>
    }

    struct Answer: Sendable {
        var response: HTTPResponseSpec
        var keepAlive: Bool
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// Responses larger than this are refused (and the connection closed).
    static let maxBodyBytes = 4 << 20

    private var answer: EventLoopPromise<Answer>?
    private var parser = HTTP1ResponseParser(maxBodyBytes: ExchangeHandler.maxBodyBytes)
    private var requestKeepsAlive = true
    /// When the request in flight times out.
    private var deadline: NIODeadline?
    /// One timer per connection, not per request: no task is scheduled and
    /// cancelled for every request. When it fires early (a later request's deadline
    /// is further out), it sets itself again for that deadline.
    private var timer: (task: Scheduled<Void>, at: NIODeadline)?

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let request = unwrapOutboundIn(data)
        guard answer == nil else {
            request.answer.fail(Failure(description: "connection busy"))
            return
        }
        answer = request.answer
        requestKeepsAlive = request.http.keepAlive
        let deadline = NIODeadline.now() + request.timeout
        self.deadline = deadline
        // A timer set for no later than this deadline fires first, and then sets itself again.
        let timerFiresInTime = timer.map { $0.at <= deadline } ?? false
        if !timerFiresInTime {
            timer?.task.cancel()
            setTimer(for: deadline, context: context)
        }
        context.writeAndFlush(wrapOutboundOut(request.http.bytes), promise: promise)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard answer != nil else {
            // Bytes nobody asked for: the next answer read here could be this one's.
            context.close(promise: nil)
            return
        }
        var bytes = unwrapInboundIn(data)
        do throws(HTTP1ResponseParser.Failure) {
            guard let response = try parser.parse(&bytes) else { return }
            // Anything after the response is not an answer to a request of ours.
            let keepAlive = requestKeepsAlive && response.keepAlive && bytes.readableBytes == 0
            finish(.success(Answer(response: response.spec, keepAlive: keepAlive)), context: context)
        } catch {
            finish(.failure(Failure(description: error.description)), context: context)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        if answer != nil {
            do throws(HTTP1ResponseParser.Failure) {
                if let response = try parser.parseEnd() {
                    finish(.success(Answer(response: response.spec, keepAlive: false)), context: context)
                }
            } catch {
                finish(.failure(Failure(description: error.description)), context: context)
            }
        }
        timer?.task.cancel()
        timer = nil
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        finish(.failure(error), context: context)
        context.close(promise: nil)
    }

    private func setTimer(for deadline: NIODeadline, context: ChannelHandlerContext) {
        let bound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
        let task = context.eventLoop.scheduleTask(deadline: deadline) {
            bound.value.handler.timerFired(context: bound.value.context)
        }
        timer = (task, deadline)
    }

    private func timerFired(context: ChannelHandlerContext) {
        timer = nil
        guard let deadline else { return }
        if deadline <= .now() {
            finish(.failure(Failure(description: "request timeout")), context: context)
        } else {
            setTimer(for: deadline, context: context)
        }
    }

    private func finish(_ result: Result<Answer, any Error>, context: ChannelHandlerContext) {
        guard let answer else { return }
        self.answer = nil
        deadline = nil
        switch result {
        case .success(let value): answer.succeed(value)
        case .failure(let error):
            answer.fail(error)
            context.close(promise: nil)
        }
    }
}

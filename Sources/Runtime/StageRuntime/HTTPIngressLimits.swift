import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTPTypes
import NIOHTTPTypesHTTP1

/// What a server facing the internet (the callback validator) allows each connection, so that
/// clients that connect and then send slowly, or never, cannot hold its connections: at most
/// `maxConnections` open at once (more wait in the listen backlog), each closed after
/// `idleTimeout` without a request, and each request received whole within `requestTimeout`
/// of its first byte, headers and body together.
package struct HTTPIngressLimits: Sendable {
    package var maxConnections = 2048
    package var idleTimeout: TimeAmount = .seconds(30)
    package var requestTimeout: TimeAmount = .seconds(20)

    package init() {}

    var server: HTTPServerBuilder {
        let limits = self
        return HTTPServerBuilder { responder in
            DeadlinedHTTP1Channel(base: HTTP1Channel(responder: responder, configuration: .init(idleTimeout: limits.idleTimeout)), limits: limits)
        }
    }
}

/// `HTTP1Channel` with the request deadline of `HTTPIngressLimits` around it: a handler before
/// the HTTP decoder starts the clock at a request's first byte, one after it stops the clock
/// at the request's end; a request not whole by then closes its connection.
struct DeadlinedHTTP1Channel: ServerChildChannel {
    typealias Value = HTTP1Channel.Value
    let base: HTTP1Channel
    let limits: HTTPIngressLimits

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        base.setup(channel: channel, logger: logger).flatMapThrowing { value in
            let deadline = RequestDeadline(timeout: limits.requestTimeout)
            let pipeline = channel.pipeline.syncOperations
            try pipeline.addHandler(RequestDeadline.FirstByte(deadline), position: .first)
            try pipeline.addHandler(RequestDeadline.RequestEnd(deadline), position: .after(try pipeline.handler(type: HTTP1ToHTTPServerCodec.self)))
            return value
        }
    }

    func handle(value: Value, logger: Logger) async {
        await base.handle(value: value, logger: logger)
    }
}

/// One connection's request clock; only its channel's event loop touches it.
final class RequestDeadline: @unchecked Sendable {
    let timeout: TimeAmount
    var pending: Scheduled<Void>?

    init(timeout: TimeAmount) { self.timeout = timeout }

    final class FirstByte: ChannelInboundHandler, RemovableChannelHandler {
        typealias InboundIn = ByteBuffer
        let deadline: RequestDeadline
        init(_ deadline: RequestDeadline) { self.deadline = deadline }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            if deadline.pending == nil {
                let channel = context.channel
                deadline.pending = context.eventLoop.scheduleTask(in: deadline.timeout) { channel.close(promise: nil) }
            }
            context.fireChannelRead(data)
        }

        func channelInactive(context: ChannelHandlerContext) {
            deadline.pending?.cancel()
            deadline.pending = nil
            context.fireChannelInactive()
        }
    }

    final class RequestEnd: ChannelInboundHandler, RemovableChannelHandler {
        typealias InboundIn = HTTPRequestPart
        let deadline: RequestDeadline
        init(_ deadline: RequestDeadline) { self.deadline = deadline }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            if case .end = unwrapInboundIn(data) {
                deadline.pending?.cancel()
                deadline.pending = nil
            }
            context.fireChannelRead(data)
        }
    }
}

import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import PaypipeCore
import ZeroMQ

/// `paypipe-callbacks`: the HTTP ingress of PROTOCOL.md §3. Stateless: orders are read from,
/// and verdicts handed to, the ledger; any number of copies can run behind a load balancer.
public final class CallbacksService: Sendable {
    let config: PaypipeConfig
    public let logger: Logger
    public let metrics = StageMetrics()

    public init(config: PaypipeConfig, logger: Logger) {
        self.config = config
        self.logger = logger
    }

    /// Serves until `stop()`; `onListening` gets the bound port (the address may say port 0).
    public func run(onListening: @escaping @Sendable (Int) -> Void = { _ in }) async throws {
        let context = try ZMQContext()
        let ledger = try LedgerClient(context: context, endpoint: config.endpoints.ledgerRPC)
        let validator = await CallbackValidator(config: config, directory: ledger)
        let logger = self.logger, metrics = self.metrics
        logger.info("callbacks ready", metadata: ["address": "\(config.endpoints.callbacks)", "ledgerRPC": "\(config.endpoints.ledgerRPC)"])

        @Sendable func answer(_ route: String, _ result: CallbackAnswer) -> Response {
            metrics.counter("paypipe_callbacks_total", [("route", route), ("result", result.result)], help: "Callbacks received, by route and result (a rejection code for 4xx)")
                .increment()
            if result.isRejection {
                logger.warning("callback refused", metadata: ["route": "\(route)", "status": "\(result.status)", "code": "\(result.result)", "reason": "\(result.message.prefix(160))"])
            }
            return Response(
                status: HTTPResponse.Status(code: result.status), headers: [.contentType: "application/json"],
                body: ResponseBody(byteBuffer: ByteBuffer(string: result.body + "\n")))
        }
        @Sendable func body(_ request: Request) async -> [UInt8]? {
            guard let buffer = try? await request.body.collect(upTo: 64 * 1024) else { return nil }
            return Array(buffer.readableBytesView)
        }
        let tooLarge = CallbackAnswer.rejected(413, "TOO_LARGE", "the body is larger than 64 KiB")
        let xVerify = HTTPField.Name("X-VERIFY")!

        do {
            try await metrics.serve(address: config.endpoints.callbacks, logger: logger, routes: { router in
                router.post("/callbacks/phonepe") { request, _ -> Response in
                    guard let bytes = await body(request) else { return answer("phonepe", tooLarge) }
                    return answer("phonepe", await validator.phonePe(body: bytes, xVerify: request.headers[xVerify]))
                }
                router.post("/callbacks/nets") { request, _ -> Response in
                    guard let bytes = await body(request) else { return answer("nets", tooLarge) }
                    let headers = request.headers[values: .authorization].map { HTTPHeader("Authorization", $0) }
                    return answer("nets", await validator.nets(headers: headers, body: bytes))
                }
                router.post("/callbacks/trustpayments/notification") { request, _ -> Response in
                    guard let bytes = await body(request) else { return answer("trustpayments_notification", tooLarge) }
                    return answer("trustpayments_notification", await validator.trustPaymentsNotification(body: bytes))
                }
                router.post("/callbacks/trustpayments/jwt") { request, _ -> Response in
                    guard let bytes = await body(request) else { return answer("trustpayments_jwt", tooLarge) }
                    return answer("trustpayments_jwt", await validator.trustPaymentsJWT(body: bytes))
                }
                router.post("/callbacks/viva") { request, _ -> Response in
                    guard let bytes = await body(request) else { return answer("viva", tooLarge) }
                    return answer("viva", await validator.viva(body: bytes))
                }
            }, onListening: { port in
                logger.info("callbacks listening", metadata: ["port": "\(port)"])
                onListening(port)
            })
        } catch {
            await ledger.close()
            context.terminate()
            throw error
        }
        await ledger.close()
        context.terminate()
        logger.info("callbacks stopped")
    }

    /// Stops taking callbacks; requests in progress are answered first.
    public func stop() async { await metrics.stop() }
}

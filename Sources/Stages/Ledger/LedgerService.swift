import Hummingbird
import Logging
import NIOCore
import PaypipeCore
import Prometheus
import ServiceLifecycle
import StageRuntime
import StageWire
import Synchronization
import ZeroMQ

/// `paypipe-ledger`: binds every stable address of the pipeline, records and deduplicates
/// orders, forwards outcomes upstream, redelivers stalled orders and runs the streamer between
/// signers and submitters.
package final class LedgerService: MeasuredStage {
    package struct BoundEndpoints: Sendable, Equatable {
        package var intake, outcomes, signQueue, signedIn, signedOut, results, ledgerRPC, pollQueue, outcomesReplay: String
    }

    /// What one of the core's turns asks for, with the counters as that turn left them, so that
    /// performing it needs no second turn of the actor (which would wait behind the next
    /// transaction, fsync included, before the effects went out).
    struct Turn: Sendable {
        var effects: [LedgerCore.Effect]
        var counters: LedgerCore.Counters?
        /// A request's reply, sent once the effects are performed.
        var reply: LedgerReply?
        init(_ effects: [LedgerCore.Effect], _ counters: LedgerCore.Counters?, reply: LedgerReply? = nil) {
            self.effects = effects
            self.counters = counters
            self.reply = reply
        }
    }

    actor Core {
        var core: LedgerCore
        nonisolated let decoder: LedgerCore.FrameDecoder
        init(core: LedgerCore) {
            self.core = core
            decoder = core.decoder
        }
        func commit(_ work: [LedgerCore.Work]) throws -> [Turn] {
            let done = try core.commit(work, now: milliseconds())
            let counters = core.counters
            return done.map { Turn($0.effects, counters, reply: $0.reply) }
        }
        func redeliver() throws -> Turn { Turn(try core.redeliver(now: milliseconds()), core.counters) }
        func resumeLeases() throws { try core.resumeLeases(now: milliseconds()) }
        var counters: LedgerCore.Counters { core.counters }
        func replay(_ request: OutcomeReplay.Request) throws -> (outcomes: [(seq: Int64, text: String)], more: Bool) {
            try core.store.outcomes(after: request.since, limit: request.limit)
        }
        func reviewOutcomes(limit: Int) throws -> [String] { try core.store.reviewOutcomes(limit: limit) }
        /// One tick of retention: at most `limit` rows of each kind, in one transaction.
        func applyRetention(_ retention: PaypipeConfig.Retention, limit: Int) throws {
            let now = milliseconds()
            let store = core.store
            try store.transaction {
                _ = try store.pruneOutcomes(recordedBefore: now - LedgerService.retentionMilliseconds(days: retention.outcomesDays), limit: limit)
                _ = try store.compactOrders(endedBefore: now - LedgerService.retentionMilliseconds(days: retention.ordersDays), limit: limit)
                _ = try store.forgetOrders(endedBefore: now - LedgerService.retentionMilliseconds(days: retention.orderKeysDays), limit: limit)
            }
        }
        func counts() throws -> [OrderState: Int] { try core.store.counts() }
    }

    let config: PaypipeConfig
    let registry: ConnectorRegistry
    let storePath: String
    let logger: Logger
    let redeliverAfterMilliseconds: Int64
    let onReady: @Sendable (BoundEndpoints) -> Void
    package let metrics = StageMetrics()
    /// The running ledger's core, for the operators' `GET /review`.
    private let running = Mutex<Core?>(nil)

    /// `onReady` is called once every socket is bound.
    package init(
        config: PaypipeConfig, registry: ConnectorRegistry, storePath: String, redeliverAfterMilliseconds: Int64 = 60_000, logger: Logger,
        onReady: @escaping @Sendable (BoundEndpoints) -> Void = { _ in }
    ) {
        self.config = config
        self.registry = registry
        self.storePath = storePath
        self.redeliverAfterMilliseconds = redeliverAfterMilliseconds
        self.logger = logger
        self.onReady = onReady
    }

    package func run() async throws {
        let store = try LedgerStore(path: storePath)
        let core = Core(core: LedgerCore(
            store: store, registry: registry, timers: config.timers, redeliverAfterMilliseconds: redeliverAfterMilliseconds))
        try await core.resumeLeases()
        running.withLock { $0 = core }
        defer { running.withLock { $0 = nil } }
        let links = try StageLinks(config: config, role: .ledger)
        let context = try ZMQContext()
        let authenticator = try links.authenticator(context: context)
        let e = config.endpoints

        var intakeOptions = stageOptions()
        intakeOptions.maxMessageSize = 1 << 20  // frames over 64 KiB are still read, counted and dropped
        let intakeSocket = try context.socket(.pull, options: intakeOptions)
        let outcomesSocket = try context.socket(.push, options: stageOptions(highWaterMark: 100_000))
        let signSocket = try context.socket(.push, options: links.server(workQueueOptions(), .signQueue))
        let resultsSocket = try context.socket(.pull, options: links.server(stageOptions(), .results))
        let signedInSocket = try context.socket(.pull, options: links.server(stageOptions(highWaterMark: 256), .signedIn))
        let signedOutSocket = try context.socket(.push, options: links.server(workQueueOptions(), .signedOut))
        let rpcSocket = try context.socket(.router, options: links.server(stageOptions(), .ledgerRPC))
        let pollSocket = try context.socket(.push, options: links.server(stageOptions(highWaterMark: 10_000), .pollQueue))
        // A ROUTER drops what exceeds a peer's HWM, so the HWM holds several whole answers.
        let replaySocket = try context.socket(.router, options: stageOptions(highWaterMark: Int32(8 * (OutcomeReplay.maxLimit + 1))))
        let bound = BoundEndpoints(
            intake: try intakeSocket.bind(e.intake), outcomes: try outcomesSocket.bind(e.outcomes),
            signQueue: try signSocket.bind(e.signQueue), signedIn: try signedInSocket.bind(e.signedIn),
            signedOut: try signedOutSocket.bind(e.signedOut), results: try resultsSocket.bind(e.results),
            ledgerRPC: try rpcSocket.bind(e.ledgerRPC), pollQueue: try pollSocket.bind(e.pollQueue),
            outcomesReplay: try replaySocket.bind(e.outcomesReplay))
        let rpc = try ZMQDuplex(socket: rpcSocket)
        let replay = try ZMQDuplex(socket: replaySocket)
        let polls = try ZMQSender(socket: pollSocket)

        let proxy = try ZMQProxy(context: context, frontend: signedInSocket, backend: signedOutSocket)
        // Every order taken in is already durable, so the ledger buffers only enough to keep the
        // signers and its intake transactions (256 frames each) busy: with the defaults (4,096
        // frames each way, 1,000 signed requests in the proxy) it held about 7 MiB more at W1's
        // peak, and no more throughput. Only intake and redelivery wait on a full dispatch queue;
        // results, which free the signers and submitters downstream, never do.
        var intakeConfiguration = ZMQReceiver.Configuration()
        intakeConfiguration.bufferCapacity = 1024
        let intake = try ZMQReceiver(socket: intakeSocket, configuration: intakeConfiguration)
        let results = try ZMQReceiver(socket: resultsSocket)
        var outcomesConfiguration = ZMQSender.Configuration()
        outcomesConfiguration.queueCapacity = Self.outcomesFastPathCapacity + 256
        let outcomes = try ZMQSender(socket: outcomesSocket, configuration: outcomesConfiguration)
        var dispatchConfiguration = ZMQSender.Configuration()
        dispatchConfiguration.queueCapacity = 1024
        let dispatch = try ZMQSender(socket: signSocket, configuration: dispatchConfiguration)
        onReady(bound)
        logger.info("ledger ready", metadata: ["intake": "\(bound.intake)", "outcomes": "\(bound.outcomes)", "outcomesReplay": "\(bound.outcomesReplay)", "curve": "\(links.isSecured)"])

        let logger = self.logger
        let exported = LedgerMetrics(metrics)
        let fastPathSkipped = metrics.counter(
            "paypipe_outcomes_fast_path_skipped_total", help: "Outcomes not pushed live because no consumer kept up (they wait in the replay log)")
        @Sendable func perform(_ turn: Turn) async throws {
            if let counters = turn.counters { exported.update(counters) }
            for effect in turn.effects {
                switch effect {
                case .dispatch(let frame): try await dispatch.send(frame)
                case .emit(let frame):
                    // The live PUSH is only the fast path: every outcome is already in the log, so
                    // with no consumer keeping up it is skipped rather than stalling intake,
                    // results and RPCs; upstream replays the gap by seq.
                    if outcomes.queuedCount < Self.outcomesFastPathCapacity {
                        try await outcomes.send(frame)
                    } else {
                        fastPathSkipped.increment()
                    }
                case .poll(let frame):
                    // With no poller connected the receipt waits in the store: a (re)starting
                    // poller asks for every pending receipt, and lost ones are swept up later.
                    if polls.queuedCount < 4096 { try await polls.send(frame) }
                case .drop(let rejection):
                    logger.warning("dropped an intake frame", metadata: ["code": "\(rejection.code)", "reason": "\(rejection.message.prefix(120))"])
                }
            }
        }
        let metrics = self.metrics
        // A batch read from a socket stays in memory while its transaction is retried.
        let retrying = StoreRetry(metrics: metrics, logger: logger) {
            intake.stop()
            results.stop()
            rpc.stop()
            replay.stop()
        }
        // Graceful shutdown stops taking orders, outcomes and requests; what was received is
        // still recorded and forwarded.
        let committer = GroupCommitter(core: core, retrying: retrying)
        try await withGracefulShutdownHandler {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await committer.run() }
            group.addTask {
                // The writer stops once no reader can give it more work.
                defer { committer.finish() }
                try await withThrowingTaskGroup(of: Void.self) { readers in
                    readers.addTask {
                        while let batch = try await intake.nextBatch() {
                            let items = core.decoder.intake(batch.map(\.body))
                            for turn in try await committer.commit([.intake(items)]) { try await perform(turn) }
                        }
                    }
                    readers.addTask {
                        while let batch = try await results.nextBatch() {
                            let items = core.decoder.results(batch.map(\.body))
                            for turn in try await committer.commit([.results(items)]) { try await perform(turn) }
                        }
                    }
                    readers.addTask {
                        while let batch = try await rpc.nextBatch() {
                            // [client identity, request id, request]; a malformed or unauthorized
                            // request is answered without the store.
                            var requests: [(message: ZMQMessage, parsed: Result<LedgerRequest, any Error>)] = []
                            for message in batch where message.frames.count == 3 {
                                requests.append((message, Result {
                                    let request = try LedgerRequest.parse(message.frames[2])
                                    try links.authorize(request, from: message)
                                    return request
                                }))
                            }
                            let work = requests.compactMap { try? $0.parsed.get() }.map(LedgerCore.Work.request)
                            var turns = (work.isEmpty ? [] : try await committer.commit(work)).makeIterator()
                            for (message, parsed) in requests {
                                let turn: Turn
                                switch parsed {
                                case .success: turn = turns.next() ?? Turn([], nil, reply: .failure("the ledger store failed"))
                                case .failure(let error): turn = Turn([], nil, reply: .failure("\(error)"))
                                }
                                try await perform(turn)
                                rpc.send(ZMQMessage(frames: [message.frames[0], message.frames[1], (turn.reply ?? .failure("no reply")).json.bytes]))
                            }
                        }
                    }
                    try await readers.waitForAll()
                }
            }
            group.addTask {
                while let batch = try await replay.nextBatch() {
                    for message in batch {
                        for reply in await Self.answer(replayRequest: message.frames, core: core, logger: logger) { replay.send(reply) }
                    }
                }
            }
            let retention = config.retention
            group.addTask {
                let open = metrics.gauge("paypipe_orders_open", help: "Accepted orders with no outcome yet, or an unknown one (the work queue depth)")
                let pending = metrics.gauge("paypipe_orders_pending", help: "Orders waiting on the customer or an asynchronous provider step")
                let review = metrics.gauge("paypipe_orders_review", help: "Orders that could not be resolved and wait for an operator (NEEDS_REVIEW)")
                for await _ in ticks(every: .milliseconds(500)).cancelOnGracefulShutdown() {
                    try await perform(try await retrying.run("redelivery") { try await core.redeliver() })
                    try await retrying.run("retention") { try await core.applyRetention(retention, limit: 1000) }
                    if let counts = try? await core.counts() {
                        open.set(Double(counts[.open, default: 0] + counts[.unknown, default: 0]))
                        pending.set(Double(counts[.pending, default: 0]))
                        review.set(Double(counts[.review, default: 0]))
                    }
                }
            }
            try await group.waitForAll()
        }
        } onGracefulShutdown: {
            intake.stop()
            results.stop()
            rpc.stop()
            replay.stop()
        }
        let counters = await core.counters
        logger.info("ledger stopping", metadata: ["ordersIn": "\(counters.ordersIn)", "duplicates": "\(counters.duplicates)"])
        _ = await dispatch.finish()
        _ = await polls.finish(drainTimeoutMilliseconds: 500)
        _ = await outcomes.finish()
        await rpc.waitUntilClosed()
        await replay.waitUntilClosed()
        proxy.stop()
        authenticator?.stop()
        context.terminate()
    }
}

extension LedgerService {
    /// Orders in review listed at most, per `GET /review` (`?limit=` asks for fewer).
    package static let reviewListLimit = 1000

    /// The outcomes of orders in review (`unknown` NEEDS_REVIEW), one JSON line each; nil while
    /// the ledger is not running.
    package func reviewOutcomes(limit: Int) async throws -> [String]? {
        guard let core = running.withLock({ $0 }) else { return nil }
        return try await core.reviewOutcomes(limit: min(max(limit, 1), Self.reviewListLimit))
    }

    /// The ledger's `/metrics` and `/healthz` server with `GET /review` beside them.
    package func metricsServer(address: String) throws(EndpointError) -> some Service {
        let logger = self.logger
        return try metrics.server(
            address: address, logger: logger,
            routes: { router in
                router.get("/review") { request, _ -> Response in
                    let limit = request.uri.queryParameters.get("limit", as: Int.self) ?? Self.reviewListLimit
                    do {
                        guard let lines = try await self.reviewOutcomes(limit: limit) else {
                            return Response(status: .serviceUnavailable, body: .init(byteBuffer: ByteBuffer(string: "the ledger is not running\n")))
                        }
                        return Response(
                            status: .ok, headers: [.contentType: "application/x-ndjson"],
                            body: .init(byteBuffer: ByteBuffer(string: lines.map { $0 + "\n" }.joined())))
                    } catch {
                        logger.error("listing review orders failed", metadata: ["error": "\(error)"])
                        return Response(status: .internalServerError, body: .init(byteBuffer: ByteBuffer(string: "the ledger store failed\n")))
                    }
                }
            },
            onListening: { port in logger.info("ledger metrics", metadata: ["port": "\(port)"]) })
    }

    /// Outcomes queued for the live PUSH before further ones skip it (they are in the log).
    static let outcomesFastPathCapacity = 4096

    /// A retention period in milliseconds (saturating: a huge value keeps everything).
    static func retentionMilliseconds(days: Int64) -> Int64 {
        let (product, overflow) = days.multipliedReportingOverflow(by: 86_400_000)
        return overflow ? .max / 2 : product
    }

    /// The messages answering one replay request. A DEALER's request, `[identity, request]`, gets
    /// one message per outcome and then the trailer. A REQ socket takes exactly one message per
    /// request, so a request with an empty delimiter, `[identity, "", request]`, gets one
    /// multipart message: the delimiter, then one frame per outcome, then the trailer frame.
    static func answer(replayRequest frames: [[UInt8]], core: Core, logger: Logger) async -> [ZMQMessage] {
        let identity: [UInt8], body: [UInt8], envelope: [[UInt8]]?
        switch frames.count {
        case 2: (identity, body, envelope) = (frames[0], frames[1], nil)
        case 3 where frames[1].isEmpty: (identity, body, envelope) = (frames[0], frames[2], [frames[0], []])
        default: return []
        }
        var replies: [[UInt8]]
        do {
            let request = try OutcomeReplay.Request.parse(body)
            let found = try await core.replay(request)
            replies = found.outcomes.map { Array($0.text.utf8) }
            replies.append(OutcomeReplay.Trailer(next: found.outcomes.last?.seq ?? request.since, more: found.more).bytes)
        } catch let error as EnvelopeError {
            replies = [OutcomeReplay.errorReply(error.description)]
        } catch {
            logger.error("outcome replay failed", metadata: ["error": "\(error)"])
            replies = [OutcomeReplay.errorReply("the ledger store failed")]
        }
        if let envelope { return [ZMQMessage(frames: envelope + replies)] }
        return replies.map { ZMQMessage(frames: [identity, $0]) }
    }
}

/// The ledger's counters exported to Prometheus (deltas since the last update).
package final class LedgerMetrics: Sendable {
    let metrics: StageMetrics
    let previous = Mutex(LedgerCore.Counters())
    let ordersIn, duplicates, redelivered, dispatchCapReached: Counter

    package init(_ metrics: StageMetrics) {
        self.metrics = metrics
        ordersIn = metrics.counter("paypipe_orders_in_total", help: "Intake frames received")
        duplicates = metrics.counter("paypipe_orders_duplicate_total", help: "Orders whose (merchant, orderId) was already known")
        redelivered = metrics.counter("paypipe_orders_redelivered_total", help: "Stalled orders dispatched again")
        dispatchCapReached = metrics.counter(
            "paypipe_orders_dispatch_cap_total", help: "Orders sent to review (unknown NEEDS_REVIEW) after timers.maxDispatches dispatches")
    }

    /// Turns are performed concurrently, so snapshots may arrive out of order: each counter only
    /// grows in the core, and what was exported is kept per counter as the highest seen.
    package func update(_ now: LedgerCore.Counters) {
        let before = previous.withLock { seen in
            defer {
                seen.ordersIn = max(seen.ordersIn, now.ordersIn)
                seen.duplicates = max(seen.duplicates, now.duplicates)
                seen.redelivered = max(seen.redelivered, now.redelivered)
                seen.dispatchCapReached = max(seen.dispatchCapReached, now.dispatchCapReached)
                seen.dropped.merge(now.dropped, uniquingKeysWith: max)
                seen.outcomesOut.merge(now.outcomesOut, uniquingKeysWith: max)
            }
            return seen
        }
        if now.ordersIn > before.ordersIn { ordersIn.increment(by: Int64(now.ordersIn - before.ordersIn)) }
        if now.duplicates > before.duplicates { duplicates.increment(by: Int64(now.duplicates - before.duplicates)) }
        if now.redelivered > before.redelivered { redelivered.increment(by: Int64(now.redelivered - before.redelivered)) }
        if now.dispatchCapReached > before.dispatchCapReached {
            dispatchCapReached.increment(by: Int64(now.dispatchCapReached - before.dispatchCapReached))
        }
        for (reason, count) in now.dropped where count > before.dropped[reason, default: 0] {
            metrics.counter("paypipe_frames_dropped_total", [("reason", reason)], help: "Intake frames dropped unparsed, by reason")
                .increment(by: Int64(count - before.dropped[reason, default: 0]))
        }
        for (status, count) in now.outcomesOut where count > before.outcomesOut[status, default: 0] {
            metrics.counter("paypipe_outcomes_out_total", [("status", status)], help: "Outcomes sent upstream, by status")
                .increment(by: Int64(count - before.outcomesOut[status, default: 0]))
        }
    }
}

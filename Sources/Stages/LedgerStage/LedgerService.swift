import Hummingbird
import Logging
import NIOCore
import NIOPosix
import PaypipeCore
import Prometheus
import ServiceLifecycle
import StageRuntime
import StageWire
import StreamerStage
import Synchronization
import ZeroMQ

/// `paypipe-ledger`: binds the ledger's stable addresses, records and deduplicates orders,
/// forwards outcomes upstream, redelivers stalled orders and, unless a fleet runs
/// `paypipe-streamer` copies, runs the streamer between signers and submitters. Any number of
/// ledgers can run over one PostgreSQL store.
package final class LedgerService: MeasuredStage {
    /// The ledger's core behind a lock: its loop's thread commits through it (operators' and
    /// upstream's reads go through `Reads` instead). Its time is `steadyMilliseconds()`: leases,
    /// redelivery and the times it stores never step with the wall clock.
    final class Core: Sendable {
        private let locked: Mutex<LedgerCore>
        let decoder: LedgerCore.FrameDecoder
        let revealer: OutcomeRevealer?

        /// `schedules.clockOffsetFile` (tests and demos only).
        let clockOffsetFile: String?

        init(core: sending LedgerCore, clockOffsetFile: String? = nil) {
            decoder = core.decoder
            revealer = core.revealer
            self.clockOffsetFile = clockOffsetFile
            locked = Mutex(core)
        }

        /// Read before each commit too, not only each tick: a commit can move a schedule on
        /// (a resumed mandate), and must do so by the clock the provider's sandbox keeps.
        private var clockOffset: Int64? {
            clockOffsetFile.flatMap(readWholeFile).flatMap { Int64(String(decoding: $0, as: UTF8.self).trimmingWhitespace) }
        }

        func commit(_ work: [LedgerCore.Work]) throws -> [LedgerCore.Done] {
            let offset = clockOffset
            return try locked.withLock { core in
                if let offset { core.scheduleClockOffset = offset }
                return try core.commit(work, now: steadyMilliseconds())
            }
        }
        func redeliver() throws -> [LedgerCore.Effect] {
            let offset = clockOffset
            return try locked.withLock { core in
                if let offset { core.scheduleClockOffset = offset }
                return try core.redeliver(now: steadyMilliseconds())
            }
        }
        func resumeLeases() throws { try locked.withLock { core in try core.resumeLeases(now: steadyMilliseconds()) } }
        func recordAlive() throws { try locked.withLock { core in try core.recordAlive(now: steadyMilliseconds()) } }
        var counters: LedgerCore.Counters { locked.withLock { $0.counters } }
        /// The seqs the last commit logged (`LedgerStore.lastCommittedSeqs`).
        var committedSeqs: ClosedRange<Int64>? { locked.withLock { $0.store.lastCommittedSeqs } }
        /// Whether other ledgers log into the same store.
        var isShared: Bool { locked.withLock { $0.store.isShared } }
        func lastLoggedSeq() throws -> Int64 { try locked.withLock { core in try core.store.lastLoggedSeq() } }
        func logged(after seq: Int64, limit: Int) throws -> [(seq: Int64, text: String)] {
            try locked.withLock { core in try core.store.outcomes(after: seq, limit: limit).outcomes }
        }
        /// One tick of retention: at most `limit` rows of each kind, in one transaction.
        func applyRetention(_ retention: PaypipeConfig.Retention, limit: Int) throws {
            try locked.withLock { core in
                let now = steadyMilliseconds()
                let store = core.store
                try store.transaction {
                    _ = try store.pruneOutcomes(recordedBefore: now - LedgerService.retentionMilliseconds(days: retention.outcomesDays), limit: limit)
                    _ = try store.compactOrders(endedBefore: now - LedgerService.retentionMilliseconds(days: retention.ordersDays), limit: limit)
                    _ = try store.forgetOrders(endedBefore: now - LedgerService.retentionMilliseconds(days: retention.orderKeysDays), limit: limit)
                }
            }
        }
        func counts() throws -> [OrderState: Int] { try locked.withLock { core in try core.store.counts() } }
        func oldestInFlight() throws -> (open: [String: Int64], pending: [String: Int64]) {
            try locked.withLock { core in try core.store.oldestInFlight() }
        }
        /// How long the oldest order in review has waited there (milliseconds); 0 when none does.
        func reviewWait() throws -> Int64 {
            try locked.withLock { core in try core.store.oldestInReview().map { max(0, steadyMilliseconds() - $0) } ?? 0 }
        }
        /// How long past its time the earliest due schedule step waits to be made into an order
        /// (milliseconds on the schedules' clock); 0 when none is due.
        func scheduleLag() throws -> Int64 {
            try locked.withLock { core in
                guard let due = try core.store.earliestDueStep() else { return 0 }
                return max(0, core.scheduleTime(steadyMilliseconds()) - due)
            }
        }
        func administer(_ request: AdminRequest, operatorKey: String?) throws -> (reply: JSONValue, effects: [LedgerCore.Effect]) {
            try locked.withLock { core in try core.administer(request, operatorKey: operatorKey, now: steadyMilliseconds()) }
        }
    }

    let config: PaypipeConfig
    let registry: ConnectorRegistry
    let store: StoreSettings
    let logger: Logger
    let redeliverAfterMilliseconds: Int64
    let onReady: @Sendable (LedgerAddresses) -> Void
    /// Whether this ledger runs the streamer between signers and submitters itself (a
    /// single-host pipeline) rather than leaving it to `paypipe-streamer` copies (a fleet).
    let runsStreamer: Bool
    package let metrics = StageMetrics()
    /// The running ledger's reads, for the operators' `GET /review`.
    private let running = Mutex<Reads?>(nil)

    /// `onReady` is called once every socket is bound.
    package init(
        config: PaypipeConfig, registry: ConnectorRegistry, store: StoreSettings, redeliverAfterMilliseconds: Int64 = 60_000,
        runsStreamer: Bool = true, logger: Logger, onReady: @escaping @Sendable (LedgerAddresses) -> Void = { _ in }
    ) {
        self.runsStreamer = runsStreamer
        self.config = config
        self.registry = registry
        self.store = store
        self.redeliverAfterMilliseconds = redeliverAfterMilliseconds
        self.logger = logger
        self.onReady = onReady
        // Its probes answer from the start; a rollout must not count this ledger until it can
        // take orders, which `run` tells once the store is open and its sockets are bound.
        metrics.setNotReady(Self.storeNotOpen)
    }

    static let storeNotOpen = "the ledger store is not open yet"

    package func run() async throws {
        guard let store = try await openStore() else { return }
        let currentEpoch = store.currentEpoch
        let core = Core(
            core: LedgerCore(
                store: store, registry: registry, timers: config.timers, redeliverAfterMilliseconds: redeliverAfterMilliseconds,
                eventMerchants: Set(config.merchants.filter(\.value.subscriptionEvents).keys), schedules: config.schedules,
                dunning: config.merchants.mapValues(\.dunning)),
            clockOffsetFile: config.schedules.clockOffsetFile)
        try core.resumeLeases()
        let reads = Reads(reader: try StoreReader(self.store, logger: logger), revealer: core.revealer, epoch: currentEpoch)
        running.withLock { $0 = reads }
        defer { running.withLock { $0 = nil } }
        let links = try StageLinks(config: config, role: .ledger)
        let context = try ZMQContext()
        let authenticator = try links.authenticator(context: context)
        let e = config.endpoints

        var intakeOptions = stageOptions(highWaterMark: Int32(config.intake.receiveQueueFrames))
        // libzmq closes a connection that brings a frame over this, and what upstream queued
        // behind it on that connection is lost with it: frames over 64 KiB are instead read and
        // refused, up to a size no upstream sends by mistake. Every frame in the receive queue
        // may be this large, which is what its length is derived from (`PaypipeConfig.Intake`).
        intakeOptions.maxMessageSize = config.intake.maxFrameBytes
        let intakeSocket = try context.socket(.pull, options: links.upstreamServer(intakeOptions, .intake))
        let outcomesSocket = try context.socket(.push, options: links.upstreamServer(stageOptions(highWaterMark: 100_000), .outcomes))
        let signSocket = try context.socket(.push, options: links.server(workQueueOptions(), .signQueue))
        let resultsSocket = try context.socket(.pull, options: links.server(stageOptions(), .results))
        let rpcSocket = try context.socket(.router, options: links.server(stageOptions(), .ledgerRPC))
        let pollSocket = try context.socket(.push, options: links.server(stageOptions(highWaterMark: 10_000), .pollQueue))
        // A ROUTER drops what exceeds a peer's HWM, so the HWM holds several whole answers.
        let replaySocket = try context.socket(
            .router, options: links.upstreamServer(stageOptions(highWaterMark: Int32(8 * (OutcomeReplay.maxLimit + 1))), .outcomesReplay))
        let adminSocket = try context.socket(.router, options: links.adminServer(stageOptions()))
        // Operators' changes reach the loop from the reads' thread, which owns the admin socket.
        let operatorChanges = "inproc://ledger-operator-changes-\(UInt64.random(in: 0...UInt64.max))"
        let changesIn = try context.socket(.pair, options: stageOptions())
        try changesIn.bind(operatorChanges)
        let changesOut = try context.socket(.pair, options: stageOptions())
        try changesOut.connect(operatorChanges)
        let streamer =
            runsStreamer ? try Streamer(context: context, links: links, signedIn: e.signedIn, signedOut: e.signedOut) : nil
        let bound = LedgerAddresses(
            intake: try intakeSocket.bind(e.intake), outcomes: try outcomesSocket.bind(e.outcomes),
            signQueue: try signSocket.bind(e.signQueue), signedIn: streamer?.signedIn ?? "none",
            signedOut: streamer?.signedOut ?? "none", results: try resultsSocket.bind(e.results),
            ledgerRPC: try rpcSocket.bind(e.ledgerRPC), pollQueue: try pollSocket.bind(e.pollQueue),
            outcomesReplay: try replaySocket.bind(e.outcomesReplay), admin: try adminSocket.bind(e.admin))
        let loop = LedgerLoop(
            sockets: .init(
                intake: intakeSocket, results: resultsSocket, rpc: rpcSocket, admin: changesIn,
                dispatch: signSocket, outcomes: outcomesSocket, polls: pollSocket),
            core: core, links: links,
            retrying: StoreRetry(policy: .init(self.store, windowMilliseconds: config.storeRetryWindowMs), metrics: metrics, logger: logger),
            retention: config.retention,
            metrics: metrics, logger: logger)
        let readLoop = LedgerReadLoop(
            sockets: .init(replay: replaySocket, admin: adminSocket, writes: changesOut), reads: reads, links: links, logger: logger)
        metrics.setNotReady(nil)
        onReady(bound)
        logger.info(
            "ledger ready",
            metadata: [
                "intake": "\(bound.intake)", "outcomes": "\(bound.outcomes)", "outcomesReplay": "\(bound.outcomesReplay)",
                "curve": "\(links.isSecured)", "upstreamCurve": "\(links.isUpstreamSecured)",
            ])

        defer {
            streamer?.stop()
            authenticator?.stop()
            context.terminate()
        }
        // Graceful shutdown stops taking orders, outcomes and requests; what was read is still
        // recorded and forwarded.
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                do {
                    try await readLoop.run()
                } catch {
                    loop.stop()
                    throw error
                }
            }
            defer { readLoop.stop() }
            try await loop.run()
        }
        let counters = core.counters
        logger.info("ledger stopping", metadata: ["ordersIn": "\(counters.ordersIn)", "duplicates": "\(counters.duplicates)"])
    }
}

extension LedgerService {
    /// How often a ledger waiting for `paypipe-ledger migrate` reads the store's schema version,
    /// and how often it logs that it still waits.
    static let schemaPollInterval: Duration = .seconds(1)
    static let schemaWaitLogInterval: Duration = .seconds(60)

    /// `store.migrations` job: waits, not ready, for as long as it takes the store to reach this
    /// release's schema, which only `paypipe-ledger migrate` brings it to. No bound: a rollout
    /// keeps the old ledgers while this one waits, and its log and `/readyz` say why. False when
    /// the ledger is stopped meanwhile. A newer schema than this release knows is refused, and a
    /// store that cannot be reached fails as on opening.
    /// The store, opened at its schema; nil when the ledger is stopped first. A database server
    /// that is down, failing over, or busy with another ledger's migration is tried again for
    /// `store.retryWindowMs`, as it is once the ledger runs, so that ledgers starting during a
    /// failover wait for the new primary rather than all exit; past the window the ledger exits
    /// 75 for a restart. A SQLite file that cannot be opened is no better a moment later.
    func openStore() async throws -> LedgerStore? {
        let policy = StoreRetry.Policy(store, windowMilliseconds: config.storeRetryWindowMs)
        let clock = ContinuousClock()
        let started = clock.now
        var failures = 0
        while true {
            do {
                let migrates = config.storeMigrations.runner == .onStart
                if !migrates {
                    guard try await waitForSchema() else { return nil }
                }
                return try LedgerStore(store, opening: migrates ? .migrating : .atSchema, logger: logger)
            } catch let error where store.isDatabaseServer && !(error is StoreSchemaTooNew) {
                failures += 1
                let elapsed = clock.now - started
                guard let pause = policy.pause(afterFailure: failures, elapsed: elapsed, jitter: Double.random(in: 0..<1)) else {
                    throw LedgerStoreFailure(operation: "opening the store", attempts: failures, failingFor: elapsed, reason: "\(error)")
                }
                metrics.setNotReady("\(Self.storeNotOpen): \(error); retrying")
                logger.warning(
                    "the ledger store could not be opened; retrying",
                    metadata: ["attempt": "\(failures)", "failingFor": "\(elapsed)", "error": "\(error)"])
                do {
                    try await cancelWhenGracefulShutdown { try await Task.sleep(for: pause) }
                } catch is CancellationError {
                    return nil
                }
            }
        }
    }

    func waitForSchema() async throws -> Bool {
        let clock = ContinuousClock()
        var loggedAt: ContinuousClock.Instant?
        while true {
            let version = try LedgerStore.schemaVersion(of: store, logger: logger)
            guard version < LedgerStore.schemaVersion else { return true }
            let reason =
                "the store's schema is version \(version) and this ledger needs \(LedgerStore.schemaVersion): waiting for `paypipe-ledger migrate` (store.migrations is job)"
            metrics.setNotReady(reason)
            if loggedAt.map({ clock.now - $0 >= Self.schemaWaitLogInterval }) ?? true {
                logger.notice("waiting for the store's migration", metadata: ["reason": "\(reason)", "store": "\(store.summary)"])
                loggedAt = clock.now
            }
            do {
                try await cancelWhenGracefulShutdown { try await Task.sleep(for: Self.schemaPollInterval) }
            } catch is CancellationError {
                return false
            }
        }
    }

    /// Orders in review listed at most, per `GET /review` (`?limit=` asks for fewer).
    package static let reviewListLimit = 1000

    /// The outcomes of orders in review (`unknown` NEEDS_REVIEW), one JSON line each; nil while
    /// the ledger is not running.
    package func reviewOutcomes(limit: Int) async throws -> [String]? {
        guard let reads = running.withLock({ $0 }) else { return nil }
        let limit = min(max(limit, 1), Self.reviewListLimit)
        // The read blocks its thread: one of NIO's pool for blocking work, not the server's.
        return try await NIOThreadPool.singleton.runIfActive { try reads.reviewOutcomes(limit: limit) }
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

    /// A retention period in milliseconds (saturating: a huge value keeps everything).
    static func retentionMilliseconds(days: Int64) -> Int64 {
        let (product, overflow) = days.multipliedReportingOverflow(by: 86_400_000)
        return overflow ? .max / 2 : product
    }

    /// The messages answering one replay request. A DEALER's request, `[identity, request]`, gets
    /// one message per outcome and then the trailer. A REQ socket takes exactly one message per
    /// request, so a request with an empty delimiter, `[identity, "", request]`, gets one
    /// multipart message: the delimiter, then one frame per outcome, then the trailer frame.
    /// `sender`: the outcomes a client limited to some merchants gets are only theirs; `next`
    /// still moves past the others.
    static func answer(
        replayRequest frames: [[UInt8]], reads: Reads, sender: StageLinks.UpstreamSender = .anyMerchant, logger: Logger
    ) -> [ZMQMessage] {
        let identity: [UInt8], body: [UInt8], envelope: [[UInt8]]?
        switch frames.count {
        case 2: (identity, body, envelope) = (frames[0], frames[1], nil)
        case 3 where frames[1].isEmpty: (identity, body, envelope) = (frames[0], frames[2], [frames[0], []])
        default: return []
        }
        var replies: [[UInt8]]
        do {
            if let query = try OutcomeReplay.SubscriptionQuery.parse(body) {
                guard sender.allows(query.merchant),
                    let record = try reads.subscription(merchant: query.merchant, provider: query.provider, reference: query.reference)
                else { throw EnvelopeError("no such subscription") }
                replies = [record.bytes]
                if let envelope { return [ZMQMessage(frames: envelope + replies)] }
                return replies.map { ZMQMessage(frames: [identity, $0]) }
            }
            if let query = try OutcomeReplay.SchedulesQuery.parse(body) {
                guard sender == .anyMerchant || query.merchant.map(sender.allows) == true else {
                    throw EnvelopeError("this client must name one of its merchants")
                }
                let found = try reads.schedules(query)
                replies = [JSONValue.object(["schedules": .array(found)]).bytes]
                if let envelope { return [ZMQMessage(frames: envelope + replies)] }
                return replies.map { ZMQMessage(frames: [identity, $0]) }
            }
            let request = try OutcomeReplay.Request.parse(body)
            let (answer, epoch) = try reads.replay(request)
            guard let found = answer else { throw Diverged(reply: OutcomeReplay.divergedReply(request, epoch: epoch)) }
            replies = found.outcomes.compactMap { outcome in
                let bytes = Array(outcome.text.utf8)
                // Outcomes and subscription events both name their merchant.
                guard sender == .anyMerchant || (try? JSONValue.parse(bytes))?["merchant"]?.stringValue.map(sender.allows) == true else {
                    return nil
                }
                return reads.revealer?.reveal(bytes) ?? bytes
            }
            replies.append(OutcomeReplay.Trailer(next: found.outcomes.last?.seq ?? request.since, more: found.more, epoch: epoch).bytes)
        } catch let diverged as Diverged {
            replies = [diverged.reply]
        } catch let error as EnvelopeError {
            replies = [OutcomeReplay.errorReply(error.description)]
        } catch {
            logger.error("outcome replay failed", metadata: ["error": "\(error)"])
            replies = [OutcomeReplay.errorReply("the ledger store failed")]
        }
        if let envelope { return [ZMQMessage(frames: envelope + replies)] }
        return replies.map { ZMQMessage(frames: [identity, $0]) }
    }

    private struct Diverged: Error {
        let reply: [UInt8]
    }
}

/// The ledger's counters exported to Prometheus (deltas since the last update).
package final class LedgerMetrics: Sendable {
    let metrics: StageMetrics
    let previous = Mutex(LedgerCore.Counters())
    let ordersIn, duplicates, redelivered, dispatchCapReached, resultsRefused, corrections: Counter
    static let resultsRefusedName = "paypipe_results_refused_total"
    static let resultsRefusedHelp = "Stage outcomes not recorded because their sender may not give them (forged, stale, or another role's)"

    package init(_ metrics: StageMetrics) {
        self.metrics = metrics
        ordersIn = metrics.counter("paypipe_orders_in_total", help: "Intake frames received")
        duplicates = metrics.counter("paypipe_orders_duplicate_total", help: "Orders whose (merchant, orderId) was already known")
        redelivered = metrics.counter("paypipe_orders_redelivered_total", help: "Stalled orders dispatched again")
        dispatchCapReached = metrics.counter(
            "paypipe_orders_dispatch_cap_total", help: "Orders sent to review (unknown NEEDS_REVIEW) after timers.maxDispatches dispatches")
        resultsRefused = metrics.counter(Self.resultsRefusedName, help: Self.resultsRefusedHelp)
        corrections = metrics.counter(
            "paypipe_orders_corrected_total",
            help: "Terminal outcomes that said no money was taken, superseded by a genuine callback (listed for review)")
    }

    /// Each counter only grows in the core, and what was exported is kept per counter as the
    /// highest seen, so a snapshot older than one already exported adds nothing.
    package func update(_ now: LedgerCore.Counters) {
        let before = previous.withLock { seen in
            defer {
                seen.ordersIn = max(seen.ordersIn, now.ordersIn)
                seen.duplicates = max(seen.duplicates, now.duplicates)
                seen.redelivered = max(seen.redelivered, now.redelivered)
                seen.dispatchCapReached = max(seen.dispatchCapReached, now.dispatchCapReached)
                seen.resultsRefused = max(seen.resultsRefused, now.resultsRefused)
                seen.corrections = max(seen.corrections, now.corrections)
                seen.dropped.merge(now.dropped, uniquingKeysWith: max)
                seen.outcomesOut.merge(now.outcomesOut, uniquingKeysWith: max)
                seen.resolvedByOperators.merge(now.resolvedByOperators, uniquingKeysWith: max)
                seen.subscriptionEvents.merge(now.subscriptionEvents, uniquingKeysWith: max)
                seen.subscriptionEventDuplicates = max(seen.subscriptionEventDuplicates, now.subscriptionEventDuplicates)
                seen.scheduledOrders = max(seen.scheduledOrders, now.scheduledOrders)
            }
            return seen
        }
        if now.ordersIn > before.ordersIn { ordersIn.increment(by: Int64(now.ordersIn - before.ordersIn)) }
        if now.duplicates > before.duplicates { duplicates.increment(by: Int64(now.duplicates - before.duplicates)) }
        if now.redelivered > before.redelivered { redelivered.increment(by: Int64(now.redelivered - before.redelivered)) }
        if now.dispatchCapReached > before.dispatchCapReached {
            dispatchCapReached.increment(by: Int64(now.dispatchCapReached - before.dispatchCapReached))
        }
        if now.resultsRefused > before.resultsRefused { resultsRefused.increment(by: Int64(now.resultsRefused - before.resultsRefused)) }
        if now.corrections > before.corrections { corrections.increment(by: Int64(now.corrections - before.corrections)) }
        for (reason, count) in now.dropped where count > before.dropped[reason, default: 0] {
            metrics.counter("paypipe_frames_dropped_total", [("reason", reason)], help: "Intake frames dropped unparsed, by reason")
                .increment(by: Int64(count - before.dropped[reason, default: 0]))
        }
        for (labels, count) in now.outcomesOut where count > before.outcomesOut[labels, default: 0] {
            metrics.counter(
                "paypipe_outcomes_out_total", labels.pairs,
                help: "Outcomes sent upstream, by status, provider and operation"
            )
            .increment(by: Int64(count - before.outcomesOut[labels, default: 0]))
        }
        for (status, count) in now.resolvedByOperators where count > before.resolvedByOperators[status, default: 0] {
            metrics.counter("paypipe_orders_resolved_total", [("status", status)], help: "Orders in review resolved by an operator, by status")
                .increment(by: Int64(count - before.resolvedByOperators[status, default: 0]))
        }
        for (type, count) in now.subscriptionEvents where count > before.subscriptionEvents[type, default: 0] {
            metrics.counter("paypipe_subscription_events_total", [("type", type)], help: "Subscription events recorded, by type")
                .increment(by: Int64(count - before.subscriptionEvents[type, default: 0]))
        }
        if now.subscriptionEventDuplicates > before.subscriptionEventDuplicates {
            metrics.counter("paypipe_subscription_events_duplicate_total", help: "Subscription events reported again (a provider's redelivery)")
                .increment(by: Int64(now.subscriptionEventDuplicates - before.subscriptionEventDuplicates))
        }
        if now.scheduledOrders > before.scheduledOrders {
            metrics.counter("paypipe_scheduled_orders_total", help: "Orders the charge schedules made (a step of an attempt at a cycle)")
                .increment(by: Int64(now.scheduledOrders - before.scheduledOrders))
        }
    }
}

extension String {
    fileprivate var trimmingWhitespace: String {
        String(drop { $0 == " " || $0 == "\n" }.reversed().drop { $0 == " " || $0 == "\n" }.reversed())
    }
}

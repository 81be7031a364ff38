import Logging
import PaypipeCore
import Prometheus
import StageRuntime
import StageWire
import Synchronization
import Tracing
import ZeroMQ

/// The ledger's writing thread. Each pass polls the sockets that bring work (intake, results, the
/// ledger RPC and operators' changes), commits everything it read in one transaction (a group
/// commit: one fsync for all of it), and sends what that transaction asks for itself. A send
/// that libzmq will not take yet waits in its socket's outbox, so the thread never blocks on a
/// peer.
///
/// One thread rather than a thread per socket with tasks and an actor around the store: every
/// hand-off between threads is a wake-up, and at a low rate those wake-ups would be most of an
/// order's latency.
final class LedgerLoop: Sendable {
    struct Sockets: Sendable {
        /// `admin`: operators' changes, from the reads' thread (`LedgerReadLoop`), which answers
        /// reads itself.
        let intake, results, rpc, admin: ZMQSocket
        let dispatch, outcomes, polls: ZMQSocket
    }

    struct Limits: Sendable {
        /// Messages read from one socket in one pass, so one busy socket cannot starve the rest.
        var batchSize = 256
        /// Bytes read from one socket in one pass: large frames end a pass's reading before
        /// `batchSize` does, so what a pass holds stays within the intake's memory budget.
        var batchBytes = Int(PaypipeConfig.Intake.passBytes)
        /// Every order taken in is already durable, so the ledger holds only enough for the
        /// signers: with this many dispatches waiting, intake and redelivery wait. Results, which
        /// free the signers and submitters downstream, never do.
        var dispatchBacklog = 1024
        /// The live PUSH of outcomes is only the fast path: every outcome is already in the log,
        /// so with no consumer keeping up the rest skip it rather than stalling the ledger, and
        /// upstream replays the gap by seq.
        var outcomesBacklog = 4096
        /// With no poller connected a receipt waits in the store: a (re)starting poller asks for
        /// every pending one, and lost ones are swept up later.
        var pollsBacklog = 4096
        /// Redelivery, retention and the gauges.
        var tickMilliseconds: Int64 = 500
        /// The longest a pass waits, so that `stop()` is seen soon.
        var idleMilliseconds: Int64 = 50
        /// How long a stopping ledger waits for peers to take what its outboxes hold.
        var drainMilliseconds: Int64 = 5000
        var pollsDrainMilliseconds: Int64 = 500
    }

    let sockets: Sockets
    let core: LedgerService.Core
    let links: StageLinks
    let retrying: StoreRetry
    let retention: PaypipeConfig.Retention
    let limits: Limits
    let metrics: StageMetrics
    let logger: Logger
    /// Other ledgers log into the same store: the live push follows the log's order across them.
    let shared: Bool
    private let exported: LedgerMetrics
    private let fastPathSkipped: Counter
    /// Result frames from a CURVE peer without a role (counted with the refused outcomes' metric).
    private let refusedResults: Counter
    private let stopping = StopFlag()
    /// Transactions that took in work read from the sockets (not the ticks').
    let transactionsCommitted = Atomic<Int>(0)

    /// Takes ownership of `sockets`: from now on only the loop's thread touches them, and it
    /// closes them when it ends.
    init(
        sockets: Sockets, core: LedgerService.Core, links: StageLinks, retrying: StoreRetry, retention: PaypipeConfig.Retention,
        limits: Limits = Limits(), metrics: StageMetrics, logger: Logger
    ) {
        self.sockets = sockets
        self.core = core
        self.links = links
        self.retrying = retrying
        self.retention = retention
        self.limits = limits
        self.metrics = metrics
        self.logger = logger
        shared = core.isShared
        exported = LedgerMetrics(metrics)
        fastPathSkipped = metrics.counter(
            "paypipe_outcomes_fast_path_skipped_total", help: "Outcomes not pushed live because no consumer kept up (they wait in the replay log)")
        refusedResults = metrics.counter(LedgerMetrics.resultsRefusedName, help: LedgerMetrics.resultsRefusedHelp)
    }

    /// Stops reading: what was read is still committed, and what waits is still sent.
    func stop() { stopping.stop() }

    /// Runs the loop on a thread of its own until `stop()`, graceful shutdown or cancellation,
    /// or until the store fails for good (`LedgerStoreFailure`) or a socket does.
    func run() async throws {
        try await runStageLoop(name: "ledger-loop", stopping: stopping) { try self.serve() }
    }

    /// What the loop's thread alone touches between passes.
    private struct Outboxes {
        var dispatch, outcomes, polls, rpc, admin: ZMQOutbox
        /// The highest seq pushed live (or skipped): the live push follows the log's order.
        var published: Int64 = 0
        /// Since when outcomes have waited for the live push's consumer (in the outbox, or
        /// skipped behind it); nil while libzmq has taken every one.
        var pushWaitingSince: Int64?
        /// While tracing: when this pass's poll returned, where its spans start.
        var passStarted: DefaultTracerClock.Instant?
    }

    private func serve() throws {
        var out = Outboxes(
            dispatch: ZMQOutbox(socket: sockets.dispatch, drainMilliseconds: limits.drainMilliseconds),
            outcomes: ZMQOutbox(socket: sockets.outcomes, drainMilliseconds: limits.drainMilliseconds),
            polls: ZMQOutbox(socket: sockets.polls, drainMilliseconds: limits.pollsDrainMilliseconds),
            rpc: ZMQOutbox(socket: sockets.rpc), admin: ZMQOutbox(socket: sockets.admin))
        defer {
            for socket in [
                sockets.intake, sockets.results, sockets.rpc, sockets.admin, sockets.dispatch, sockets.outcomes, sockets.polls,
            ] {
                socket.close()
            }
        }
        let gauges = Gauges(metrics)
        out.published = try retrying.run("reading the outcome log") { try core.lastLoggedSeq() }
        var nextTick = steadyMilliseconds() + limits.tickMilliseconds
        var nextTail = steadyMilliseconds()
        var busy = false
        while !stopping.isStopped {
            let takesOrders = out.dispatch.count < limits.dispatchBacklog
            let ready = try ZMQPoll.wait(
                [
                    (sockets.intake, takesOrders ? .readable : []), (sockets.results, .readable),
                    (sockets.rpc, out.rpc.pollEvents.union(.readable)),
                    (sockets.dispatch, out.dispatch.pollEvents), (sockets.outcomes, out.outcomes.pollEvents),
                    (sockets.polls, out.polls.pollEvents), (sockets.admin, out.admin.pollEvents.union(.readable)),
                ],
                timeoutMilliseconds: Int(max(0, min(nextTick - steadyMilliseconds(), limits.idleMilliseconds))), busy: busy)
            if StageTracing.isEnabled { out.passStarted = DefaultTracerClock.now }
            let intake = ready[0].contains(.readable) ? try read(sockets.intake) : []
            let results = ready[1].contains(.readable) ? try read(sockets.results) : []
            let requests = ready[2].contains(.readable) ? try read(sockets.rpc) : []
            let operators = ready[6].contains(.readable) ? try read(sockets.admin) : []
            busy = !(intake.isEmpty && results.isEmpty && requests.isEmpty && operators.isEmpty)
            try takeWork(intake: intake, results: results, requests: requests, &out)
            for message in operators { try administer(message, &out) }
            if shared, steadyMilliseconds() >= nextTail {
                // What other ledgers logged goes out here too, in seq order.
                if let last = try? core.lastLoggedSeq() { try catchUp(to: last, &out) }
                nextTail = steadyMilliseconds() + limits.idleMilliseconds
            }
            try flush(&out)
            if steadyMilliseconds() >= nextTick {
                try tick(&out, gauges)
                nextTick = steadyMilliseconds() + limits.tickMilliseconds
            }
        }
        try drainOnStop([out.dispatch, out.outcomes, out.polls, out.rpc, out.admin], logger: logger)
    }

    private func read(_ socket: ZMQSocket) throws(ZMQError) -> [ZMQMessage] {
        var batch: [ZMQMessage] = []
        var bytes = 0
        while batch.count < limits.batchSize, bytes < limits.batchBytes, let message = try socket.receive(dontWait: true) {
            batch.append(message)
            bytes += message.frames.reduce(0) { $0 + $1.count }
        }
        return batch
    }

    /// Commits one pass's work in one transaction, then performs its effects in the order read
    /// and answers each request once its effects are out.
    private func takeWork(intake: [ZMQMessage], results: [ZMQMessage], requests: [ZMQMessage], _ out: inout Outboxes) throws {
        var work: [LedgerCore.Work] = []
        if !intake.isEmpty { work.append(.intake(core.decoder.intake(intake.map { ($0.body, links.upstreamSender(of: $0)) }))) }
        if !results.isEmpty { work.append(.results(core.decoder.results(results.compactMap(resultFrame)))) }
        // [client identity, request id, request]; a malformed or unauthorized request is
        // answered without the store.
        var parsedRequests: [(message: ZMQMessage, parsed: Result<LedgerRequest, any Error>)] = []
        for message in requests where message.frames.count == 3 {
            let parsed = Result { () throws -> LedgerRequest in
                let request = try LedgerRequest.parse(message.frames[2])
                try links.authorize(request, from: message)
                return request
            }
            if case .success(let request) = parsed { work.append(.request(request)) }
            parsedRequests.append((message, parsed))
        }
        guard !work.isEmpty || !parsedRequests.isEmpty else { return }
        let recording = StageTracing.isEnabled ? LedgerTracing.recording(results, since: out.passStarted) : []
        defer { LedgerTracing.recorded(recording) }
        var done: ArraySlice<LedgerCore.Done> = []
        var logged: ClosedRange<Int64>?
        if !work.isEmpty {
            done = try retrying.run("a store transaction") { try core.commit(work) }[...]
            logged = core.committedSeqs
            transactionsCommitted.add(1, ordering: .relaxed)
            exported.update(core.counters)
        }
        defer { if let logged { out.published = max(out.published, logged.upperBound) } }
        if let logged { try catchUp(to: logged.lowerBound - 1, &out) }
        if !intake.isEmpty { try perform(done.removeFirst().effects, &out) }
        if !results.isEmpty { try perform(done.removeFirst().effects, &out) }
        for (message, parsed) in parsedRequests {
            let reply: LedgerReply
            switch parsed {
            case .success:
                let answered = done.removeFirst()
                try perform(answered.effects, &out)
                reply = answered.reply ?? .failure("no reply")
            case .failure(let error): reply = .failure("\(error)")
            }
            try out.rpc.send(ZMQMessage(frames: [message.frames[0], message.frames[1], reply.json.bytes]))
        }
    }

    /// A result frame with the role its sender's CURVE key proved; without CURVE, no role. With
    /// CURVE a frame whose sender has no role (which the ZAP handler should never admit) is not
    /// read at all.
    private func resultFrame(_ message: ZMQMessage) -> (frame: [UInt8], role: CurveConfig.Role?)? {
        guard links.isSecured else { return (message.body, nil) }
        guard let role = message.userId.flatMap(CurveConfig.Role.init(rawValue:)) else {
            refusedResults.increment()
            return nil
        }
        return (message.body, role)
    }

    private func perform(_ effects: [LedgerCore.Effect], _ out: inout Outboxes) throws {
        for effect in effects {
            TransitionLog.log(effect, to: logger)
            switch effect {
            case .dispatch(let frame):
                let traced = StageTracing.isEnabled ? LedgerTracing.dispatching(frame, poll: false, since: out.passStarted) : frame
                try out.dispatch.send(ZMQMessage(traced))
            case .emit(let frame):
                if shared, let seq = Self.loggedSeq(of: frame) {
                    if seq > out.published + 1 {
                        // Other ledgers' outcomes below it go first, and so does it, from the log.
                        try catchUp(to: seq, &out)
                        if out.published >= seq { continue }
                    }
                    out.published = max(out.published, seq)
                }
                try pushLive(frame, &out)
            case .poll(let frame):
                if out.polls.count < limits.pollsBacklog {
                    let traced = StageTracing.isEnabled ? LedgerTracing.dispatching(frame, poll: true, since: out.passStarted) : frame
                    try out.polls.send(ZMQMessage(traced))
                }
            case .drop(let rejection):
                logger.warning("dropped an intake frame", metadata: ["code": "\(rejection.code)", "reason": "\(rejection.message.prefix(120))"])
            case .refuse(let reason):
                logger.warning("refused a stage's outcome", metadata: ["reason": "\(reason.prefix(300))"])
            }
        }
    }

    /// One outcome to the live PUSH, its withheld secrets put back; skipped (upstream replays
    /// it) while no consumer keeps up.
    private func pushLive(_ bytes: [UInt8], _ out: inout Outboxes) throws(ZMQError) {
        if out.outcomes.count < limits.outcomesBacklog {
            try out.outcomes.send(ZMQMessage(core.revealer?.reveal(bytes) ?? bytes))
        } else {
            fastPathSkipped.increment()
        }
        if out.outcomes.count > 0, out.pushWaitingSince == nil { out.pushWaitingSince = steadyMilliseconds() }
    }

    /// Pushes live what the log holds after the last seq pushed, up to `seq`: outcomes other
    /// ledgers logged, which upstream must see before any later seq. A gap too long to read at
    /// once is left to replay, as a consumer that does not keep up is.
    private func catchUp(to seq: Int64, _ out: inout Outboxes) throws {
        var reads = 0
        while out.published < seq, reads < 8 {
            reads += 1
            guard let entries = try? core.logged(after: out.published, limit: 1024), let last = entries.last else { break }
            for entry in entries where entry.seq <= seq { try pushLive(Array(entry.text.utf8), &out) }
            out.published = min(last.seq, seq)
        }
        out.published = max(out.published, seq)
    }

    /// The seq a logged outcome ends with (`LedgerStore.withSeq` appends it last); nil when it
    /// does not end that way.
    static func loggedSeq(of bytes: [UInt8]) -> Int64? {
        var index = bytes.count - 1
        while index >= 0, bytes[index] == UInt8(ascii: " ") || bytes[index] == UInt8(ascii: "\n") { index -= 1 }
        guard index > 0, bytes[index] == UInt8(ascii: "}") else { return nil }
        index -= 1
        var value: Int64 = 0, scale: Int64 = 1, digits = 0
        while index >= 0, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]), digits < 18 {
            value += Int64(bytes[index] - UInt8(ascii: "0")) * scale
            scale *= 10
            digits += 1
            index -= 1
        }
        let key = Array(#""seq":"#.utf8)
        guard digits > 0, index + 1 >= key.count, Array(bytes[(index + 1 - key.count)...index]) == key else { return nil }
        return value
    }

    private func flush(_ out: inout Outboxes) throws(ZMQError) {
        try out.dispatch.flush()
        // What was skipped is left to replay: once the outbox is empty, nothing waits for the push.
        if try out.outcomes.flush() { out.pushWaitingSince = nil }
        try out.polls.flush()
        try out.rpc.flush()
        try out.admin.flush()
    }

    /// The effects of a transaction outside a pass's intake (redelivery, an operator's request):
    /// what other ledgers logged below its outcomes goes out first, and the live push moves past
    /// them. After a read, which commits nothing, `committedSeqs` names seqs already pushed, and
    /// both steps change nothing.
    private func performCommitted(_ effects: [LedgerCore.Effect], _ out: inout Outboxes) throws {
        if let logged = core.committedSeqs { try catchUp(to: logged.lowerBound - 1, &out) }
        try perform(effects, &out)
        if let logged = core.committedSeqs { out.published = max(out.published, logged.upperBound) }
    }

    /// One operator's change, `[identity, request, operator's key name]` (no key name without
    /// CURVE) from the reads' thread, which has checked the sender: answered with one message,
    /// after what it changed is committed and its effects (an outcome upstream, a status check)
    /// are out.
    private func administer(_ message: ZMQMessage, _ out: inout Outboxes) throws {
        guard message.frames.count == 2 || message.frames.count == 3 else { return }
        let operatorKey = message.frames.count == 3 ? String(decoding: message.frames[2], as: UTF8.self) : nil
        let reply: [UInt8]
        do {
            let request = try AdminRequest.parse(message.frames[1])
            let answer = try retrying.run("an operator's request") { try core.administer(request, operatorKey: operatorKey) }
            try performCommitted(answer.effects, &out)
            exported.update(core.counters)
            if request.changesAnOrder {
                logger.notice(
                    "an operator acted on an order",
                    metadata: [
                        "request": "\(String(decoding: message.frames[1].prefix(600), as: UTF8.self))", "operatorKey": "\(operatorKey ?? "-")",
                    ])
            }
            reply = answer.reply.bytes
        } catch let error as EnvelopeError {
            reply = AdminRequest.errorReply(error.description)
        } catch let failure as LedgerStoreFailure {
            throw failure
        } catch {
            logger.error("an operator's request failed", metadata: ["error": "\(error)"])
            reply = AdminRequest.errorReply("the ledger store failed")
        }
        try out.admin.send(ZMQMessage(frames: [message.frames[0], reply]))
    }

    /// Redelivery (unless the signers' queue is full: what it would send stays due in the store),
    /// retention, the moment a restart measures its outage from, and the gauges.
    private func tick(_ out: inout Outboxes, _ gauges: Gauges) throws {
        if out.dispatch.count < limits.dispatchBacklog {
            try performCommitted(try retrying.run("redelivery") { try core.redeliver() }, &out)
            exported.update(core.counters)
        }
        try retrying.run("retention") { try core.applyRetention(retention, limit: 1000) }
        try retrying.run("recording the ledger alive") { try core.recordAlive() }
        if let counts = try? core.counts() { gauges.update(counts) }
        let now = steadyMilliseconds()
        gauges.pushLag.set(Double(out.pushWaitingSince.map { max(0, now - $0) } ?? 0) / 1000)
        if now >= gauges.agesDue, let oldest = try? core.oldestInFlight() {
            gauges.updateAges(oldest, now: now)
            if let wait = try? core.reviewWait() { gauges.oldestReview.set(Double(wait) / 1000) }
            if let lag = try? core.scheduleLag() { gauges.scheduleLag.set(Double(lag) / 1000) }
        }
    }

    private final class Gauges {
        let metrics: StageMetrics
        let open, pending, review: Gauge
        let oldestReview, scheduleLag, pushLag: Gauge
        /// The oldest open and pending order's age are read from the store this often.
        static let agesEveryMilliseconds: Int64 = 5000
        var agesDue: Int64 = 0
        var oldestOpen: [String: Gauge] = [:], oldestPending: [String: Gauge] = [:]

        init(_ metrics: StageMetrics) {
            self.metrics = metrics
            open = metrics.gauge("paypipe_orders_open", help: "Accepted orders with no outcome yet, or an unknown one (the work queue depth)")
            pending = metrics.gauge("paypipe_orders_pending", help: "Orders waiting on the customer or an asynchronous provider step")
            review = metrics.gauge("paypipe_orders_review", help: "Orders that could not be resolved and wait for an operator (NEEDS_REVIEW)")
            oldestReview = metrics.gauge(
                "paypipe_oldest_review_order_age_seconds", help: "Time the oldest order in review has waited for an operator; 0 when none")
            scheduleLag = metrics.gauge(
                "paypipe_schedule_lag_seconds",
                help: "How long past its time the earliest due schedule step waits to be made into an order; 0 when none")
            pushLag = metrics.gauge(
                "paypipe_outcomes_push_lag_seconds",
                help:
                    "How long outcomes have waited for this ledger's live push to hand them to a consumer (none connected, or one not keeping up); 0 when none wait"
            )
        }
        func update(_ counts: [OrderState: Int]) {
            open.set(Double(counts[.open, default: 0] + counts[.unknown, default: 0]))
            pending.set(Double(counts[.pending, default: 0]))
            review.set(Double(counts[.review, default: 0]))
        }

        /// Each provider's oldest open and oldest pending order's age; 0 once it has none.
        func updateAges(_ oldest: (open: [String: Int64], pending: [String: Int64]), now: Int64) {
            agesDue = now + Self.agesEveryMilliseconds
            func set(_ gauges: inout [String: Gauge], _ ages: [String: Int64], _ name: String, _ help: String) {
                for provider in ages.keys where gauges[provider] == nil {
                    gauges[provider] = metrics.gauge(name, [("provider", provider)], help: help)
                }
                for (provider, gauge) in gauges { gauge.set(Double(ages[provider].map { max(0, now - $0) } ?? 0) / 1000) }
            }
            set(
                &oldestOpen, oldest.open, "paypipe_oldest_open_order_age_seconds",
                "Age of the oldest order with no outcome yet (open or unknown), by provider; 0 when none")
            set(
                &oldestPending, oldest.pending, "paypipe_oldest_pending_order_age_seconds",
                "Time the oldest pending order has been pending, by provider; 0 when none")
        }
    }
}

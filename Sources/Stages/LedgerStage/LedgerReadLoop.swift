import Logging
import PaypipeCore
import StageRuntime
import StageWire
import Synchronization
import ZeroMQ

extension LedgerService {
    /// What operators and upstream read from the store, through a connection of its own
    /// (`StoreReader`) behind a lock of its own, never the core's: a read waits on no payment,
    /// and no payment waits on a read.
    final class Reads: Sendable {
        private let reader: Mutex<StoreReader>
        let revealer: OutcomeRevealer?
        private let current: CurrentEpoch

        init(reader: sending StoreReader, revealer: OutcomeRevealer?, epoch: CurrentEpoch) {
            self.reader = Mutex(reader)
            self.revealer = revealer
            current = epoch
        }

        /// The outcomes upstream asked for, or nil when its `epoch` and `since` name what the store
        /// no longer holds; with the store's current epoch.
        func replay(_ request: OutcomeReplay.Request) throws -> (found: (outcomes: [(seq: Int64, text: String)], more: Bool)?, epoch: String) {
            let found = try reader.withLock { store -> (outcomes: [(seq: Int64, text: String)], more: Bool)? in
                try store.read {
                    if let epoch = request.epoch, try !store.replayContinues(epoch: epoch, after: request.since) { return nil }
                    return try store.outcomes(after: request.since, limit: request.limit)
                }
            }
            // Read after the outcomes: an epoch the ledger opened meanwhile began after all of them.
            return (found, current.epoch)
        }

        func subscription(merchant: String, provider: Provider, reference: String) throws -> JSONValue? {
            try reader.withLock { store in try store.read { try store.subscription(merchant: merchant, provider: provider, reference: reference) } }
        }

        func schedules(_ query: OutcomeReplay.SchedulesQuery) throws -> [JSONValue] {
            try reader.withLock { store in
                try store.read { try store.schedules(merchant: query.merchant, provider: query.provider, state: query.state, limit: query.limit) }
                    .map(\.json)
            }
        }

        func reviewOutcomes(limit: Int) throws -> [String] {
            try reader.withLock { store in try store.read { try store.reviewOutcomes(limit: limit) } }
        }

        /// An operator's `show` or `list`, answered as the core answers it.
        func operatorRead(_ request: AdminRequest) throws -> JSONValue {
            try reader.withLock { store in try LedgerCore.answer(reading: request, from: store, now: steadyMilliseconds()) }
        }
    }
}

/// The ledger's second thread: it answers what only reads the store (upstream's replay,
/// subscription and schedule queries, operators' `show` and `list`) through `LedgerService.Reads`,
/// so that none of it waits on the ledger's loop or holds it up. An operator's request that
/// changes an order goes on to the loop, whose answer comes back the same way.
final class LedgerReadLoop: Sendable {
    struct Sockets: Sendable {
        /// Upstream's replay ROUTER and the operators' admin ROUTER.
        let replay, admin: ZMQSocket
        /// A PAIR to the loop's `admin`: `[operator's identity, request, operator's key name]`
        /// (no third frame without CURVE) goes there, `[operator's identity, answer]` comes back.
        let writes: ZMQSocket
    }

    let sockets: Sockets
    let reads: LedgerService.Reads
    let links: StageLinks
    let logger: Logger
    /// Messages read from one socket in one pass.
    let batchSize = 256
    private let stopping = StopFlag()

    /// Takes ownership of `sockets`, as `LedgerLoop` does of its own.
    init(sockets: Sockets, reads: LedgerService.Reads, links: StageLinks, logger: Logger) {
        self.sockets = sockets
        self.reads = reads
        self.links = links
        self.logger = logger
    }

    func stop() { stopping.stop() }

    func run() async throws {
        try await runStageLoop(name: "ledger-reads", stopping: stopping) { try self.serve() }
    }

    private func serve() throws {
        var replay = ZMQOutbox(socket: sockets.replay), admin = ZMQOutbox(socket: sockets.admin)
        var writes = ZMQOutbox(socket: sockets.writes)
        defer { for socket in [sockets.replay, sockets.admin, sockets.writes] { socket.close() } }
        while !stopping.isStopped {
            let ready = try ZMQPoll.wait(
                [
                    (sockets.replay, replay.pollEvents.union(.readable)), (sockets.admin, admin.pollEvents.union(.readable)),
                    (sockets.writes, writes.pollEvents.union(.readable)),
                ], timeoutMilliseconds: 50)
            if ready[0].contains(.readable) {
                for message in try read(sockets.replay) {
                    let sender = links.upstreamSender(of: message)
                    for reply in LedgerService.answer(replayRequest: message.frames, reads: reads, sender: sender, logger: logger) {
                        try replay.send(reply)
                    }
                }
            }
            if ready[1].contains(.readable) {
                for message in try read(sockets.admin) { try take(message, &admin, &writes) }
            }
            if ready[2].contains(.readable) {
                for answer in try read(sockets.writes) { try admin.send(answer) }
            }
            _ = try replay.flush()
            _ = try admin.flush()
            _ = try writes.flush()
        }
        try drainOnStop([replay, admin], logger: logger)
    }

    private func read(_ socket: ZMQSocket) throws(ZMQError) -> [ZMQMessage] {
        var batch: [ZMQMessage] = []
        while batch.count < batchSize, let message = try socket.receive(dontWait: true) { batch.append(message) }
        return batch
    }

    /// One operator's request, `[identity, request]` from a DEALER: a read is answered here, a
    /// change goes on to the loop with the operator's key name. With CURVE only the keys on
    /// `curve.admins` get here (the ZAP handler refuses everyone else during the handshake).
    private func take(_ message: ZMQMessage, _ admin: inout ZMQOutbox, _ writes: inout ZMQOutbox) throws {
        guard message.frames.count == 2 else { return }
        let operatorKey = links.adminName(of: message)
        let reply: [UInt8]
        do {
            guard !links.isSecured || operatorKey != nil else { throw EnvelopeError("forbidden: the sender's key is not on curve.admins") }
            let request = try AdminRequest.parse(message.frames[1])
            if request.changesAnOrder {
                try writes.send(ZMQMessage(frames: message.frames + (operatorKey.map { [Array($0.utf8)] } ?? [])))
                return
            }
            reply = try reads.operatorRead(request).bytes
        } catch let error as EnvelopeError {
            reply = AdminRequest.errorReply(error.description)
        } catch {
            logger.error("an operator's read failed", metadata: ["error": "\(error)"])
            reply = AdminRequest.errorReply("the ledger store failed")
        }
        try admin.send(ZMQMessage(frames: [message.frames[0], reply]))
    }
}

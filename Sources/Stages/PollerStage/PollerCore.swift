import PaypipeCore
import StageRuntime
import StageWire

/// Every pending order this poller holds, on one scheduler: a min-heap of wake-up times (stale
/// heap entries are skipped, not removed), each order's own `PollSchedule` deciding what
/// happens at its times, and its provider's `PendingPolling` saying what a poll is and what
/// its answer means. Nothing here reads a clock or does I/O: the edge passes `now`, sends the
/// polls and emits the outcomes.
package struct PollerCore: Sendable {
    package enum Action: Sendable, Equatable {
        /// Send this poll; `slot` is when the schedule wanted it (for drift).
        case poll(ReceiptID, requestId: Int, request: HTTPRequestSpec, slot: Int64)
        case emit(StageResult)
    }

    /// A provider whose pending orders are polled, with its schedule.
    struct Polled: Sendable {
        var polling: any PendingPolling
        var policy: PollingPolicy
    }

    /// Only what a poll and the final outcome need: the order itself (a Cleeng receipt's data
    /// can be tens of kilobytes) is not kept.
    struct Entry: Sendable {
        var order: PolledOrder
        var target: PollTarget
        var schedule: PollSchedule
        /// The order arrived after its deadline (a poller was down): one poll decides it.
        var lastCheck: Bool
        var wakeAt: Int64?
    }

    /// A row of the table. The generation changes whenever the row is freed, so an answer or a
    /// heap entry for an order that has ended never reaches the row's next order.
    struct Row: Sendable {
        var generation: UInt32 = 0
        var entry: Entry?
    }

    let polled: [Provider: Polled]
    /// Every poll and answer reaches its order by row number, not by hashing its key: that
    /// would be several key lookups per poll.
    var table: [Row] = []
    var freeRows: [Int32] = []
    var rowOfOrder: [OrderKey: Int32] = [:]
    var wakeUps = MinHeap()

    package var count: Int { rowOfOrder.count }
    /// The providers this poller polls.
    package var providers: [Provider] { Array(polled.keys) }
    /// The shortest interval between two polls of one order, of every polled provider.
    package var shortestIntervalMs: Int64? { polled.values.map(\.policy.intervalMs).min() }
    package var nextWakeUp: Int64? { wakeUps.peek?.time }

    /// Polls the pending orders of every connector in `registry` that has `pendingPolling`.
    package init(registry: ConnectorRegistry, timers: PaypipeConfig.Timers) {
        var polled: [Provider: Polled] = [:]
        for connector in registry.connectors {
            guard let polling = connector.pendingPolling else { continue }
            polled[connector.provider] = Polled(polling: polling, policy: polling.pollingPolicy(timers: timers))
        }
        self.polled = polled
    }

    /// A pending order from the ledger. One already held is left alone (a resume or a sweep can
    /// send it twice); one past its deadline gets one last check.
    package mutating func add(_ order: Order, pendingSince: Int64, ticket: DispatchTicket, trace: String? = nil, now: Int64) -> [Action] {
        guard rowOfOrder[order.key] == nil else { return [] }
        let polledOrder = PolledOrder(order, ticket: ticket, trace: trace)
        guard let provider = polled[order.provider] else {
            return [.emit(outcome(polledOrder, .failed(code: .notPolled, message: "\(order.provider.rawValue) orders are not polled")))]
        }
        let target: PollTarget
        do {
            target = try provider.polling.pollTarget(for: order)
        } catch {
            return [.emit(outcome(polledOrder, .failed(code: OutcomeErrorCode(error.code), message: error.message)))]
        }
        let lastCheck = now > provider.policy.deadline(startedAt: pendingSince)
        let entry = Entry(
            order: polledOrder, target: target, schedule: PollSchedule(startedAt: pendingSince, policy: provider.policy), lastCheck: lastCheck)
        let id = insert(entry)
        if lastCheck { return [poll(entry, id, requestId: 1, slot: now)] }
        return step(id, now: now) { $0.tick(at: now) }
    }

    /// Wakes every order whose time has come.
    package mutating func due(now: Int64) -> [Action] {
        var actions: [Action] = []
        while let top = wakeUps.peek, top.time <= now {
            wakeUps.pop()
            let row = Int(top.id.row)
            guard holds(top.id), table[row].entry!.wakeAt == top.time else { continue }
            table[row].entry!.wakeAt = nil
            actions += step(top.id, now: now) { $0.tick(at: now) }
        }
        return actions
    }

    /// The answer to a poll, or its failure.
    package mutating func receive(_ id: ReceiptID, requestId: Int, answer: Result<HTTPResponseSpec, TransportFailure>, now: Int64) -> [Action] {
        guard let entry = self[id], let provider = polled[entry.order.provider] else { return [] }
        let reading: PollAnswer =
            switch answer {
            case .success(let response): provider.polling.readPoll(response, requestId: requestId)
            case .failure(let failure): provider.polling.readPollFailure(failure)
            }
        if entry.lastCheck {
            remove(id)
            let verdict: ProviderVerdict =
                switch reading {
                case .ended(let verdict): verdict
                case .notYet, .unanswered: provider.policy.giveUpVerdict
                }
            return [.emit(outcome(entry.order, verdict))]
        }
        return step(id, now: now) { $0.receive(reading, requestId: requestId, at: now) }
    }

    /// Whether `id`'s order is still in its row (the row was not freed, or reused, since).
    private func holds(_ id: ReceiptID) -> Bool {
        let row = Int(id.row)
        return row < table.count && table[row].generation == id.generation && table[row].entry != nil
    }

    private subscript(id: ReceiptID) -> Entry? {
        holds(id) ? table[Int(id.row)].entry : nil
    }

    private mutating func step(_ id: ReceiptID, now: Int64, _ event: (inout PollSchedule) -> PollSchedule.Action) -> [Action] {
        guard holds(id) else { return [] }
        let row = Int(id.row)
        // In place: a copy of the entry would retain and release each of its strings.
        let slot = table[row].entry!.schedule.nextPollAt
        let action = event(&table[row].entry!.schedule)
        switch action {
        case .sendPoll(let requestId):
            // No wake-up while the poll is out: the edge always reports an answer or a transport
            // failure (its HTTP timeout is at most one interval), and that reschedules the order.
            // One heap entry per order at a time keeps the heap small.
            return [poll(table[row].entry!, id, requestId: requestId, slot: slot)]
        case .wait(let until):
            table[row].entry!.wakeAt = until
            wakeUps.push(time: until, id: id)
            return []
        case .emit(let verdict):
            let order = table[row].entry!.order
            remove(id)
            return [.emit(outcome(order, verdict))]
        case .stop:
            remove(id)
            return []
        }
    }

    private mutating func insert(_ entry: Entry) -> ReceiptID {
        let row: Int32
        if let free = freeRows.popLast() {
            row = free
        } else {
            row = Int32(table.count)
            table.append(Row())
        }
        table[Int(row)].entry = entry
        rowOfOrder[entry.order.key] = row
        return ReceiptID(row: row, generation: table[Int(row)].generation)
    }

    private mutating func remove(_ id: ReceiptID) {
        guard let entry = self[id] else { return }
        let row = Int(id.row)
        rowOfOrder[entry.order.key] = nil
        table[row].entry = nil
        table[row].generation &+= 1
        freeRows.append(id.row)
    }

    private func poll(_ entry: Entry, _ id: ReceiptID, requestId: Int, slot: Int64) -> Action {
        let request = polled[entry.order.provider]!.polling.pollRequest(entry.target, requestId: requestId)
        return .poll(id, requestId: requestId, request: request, slot: slot)
    }

    func outcome(_ order: PolledOrder, _ verdict: ProviderVerdict) -> StageResult {
        StageResult(answering: .poll, ticket: order.ticket, outcome: outcomeOnly(order, verdict), trace: order.trace)
    }

    /// A verdict that is not an ending (a connector's reading should never give one) ends the
    /// order as if the provider never decided.
    func outcomeOnly(_ order: PolledOrder, _ verdict: ProviderVerdict) -> Outcome {
        func make(_ status: Outcome.Status, result: [String: JSONValue]? = nil, error: Outcome.ErrorInfo? = nil) -> Outcome {
            Outcome(
                orderId: order.key.orderId, merchant: order.key.merchant, provider: order.provider.rawValue,
                operation: order.operation.rawValue, status: status, result: result, error: error)
        }
        return switch verdict {
        case .succeeded(let result): make(.succeeded, result: result)
        case .failed(let code, let message): make(.failed, error: .init(code: code, message: message))
        case .pending(let result): make(.pending, result: result)
        case .retry(let reason), .unknown(let reason), .neverSeen(let reason):
            make(.failed, error: .init(code: polled[order.provider]?.policy.giveUpCode ?? .notDecided, message: reason))
        }
    }
}

/// Who a polled order is, and the dispatch the ledger sent it as (named by the outcome).
struct PolledOrder: Sendable {
    var key: OrderKey
    var provider: Provider
    var operation: Operation
    var ticket: DispatchTicket
    /// The ledger's trace for this poll, passed on to the outcome.
    var trace: String?

    init(_ order: Order, ticket: DispatchTicket, trace: String? = nil) {
        key = order.key
        provider = order.provider
        operation = order.operation
        self.ticket = ticket
        self.trace = trace
    }
}

/// Which receipt a poll or a wake-up is for: its row in the core's table and the row's
/// generation at the time.
package struct ReceiptID: Sendable, Hashable {
    let row: Int32
    let generation: UInt32
}

/// A binary min-heap of (time, receipt); plain values, so reordering it retains nothing.
struct MinHeap: Sendable {
    struct Entry: Sendable {
        var time: Int64
        var id: ReceiptID
    }

    private var items: [Entry] = []
    var count: Int { items.count }
    var peek: Entry? { items.first }

    mutating func push(time: Int64, id: ReceiptID) {
        items.append(Entry(time: time, id: id))
        var child = items.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard items[child].time < items[parent].time else { break }
            items.swapAt(child, parent)
            child = parent
        }
    }

    @discardableResult
    mutating func pop() -> Entry? {
        guard !items.isEmpty else { return nil }
        let top = items[0]
        let last = items.removeLast()
        guard !items.isEmpty else { return top }
        items[0] = last
        var parent = 0
        while true {
            let left = 2 * parent + 1, right = left + 1
            var smallest = parent
            if left < items.count, items[left].time < items[smallest].time { smallest = left }
            if right < items.count, items[right].time < items[smallest].time { smallest = right }
            if smallest == parent { break }
            items.swapAt(parent, smallest)
            parent = smallest
        }
        return top
    }
}

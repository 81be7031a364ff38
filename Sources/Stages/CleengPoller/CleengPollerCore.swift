import Cleeng
import PaypipeCore
import StageRuntime
import StageWire

/// Every accepted Cleeng receipt this poller holds, on one scheduler: a min-heap of wake-up
/// times (stale heap entries are skipped, not removed), each receipt's own
/// `CleengReceiptPoller` state machine deciding what happens at its times. Nothing here reads a
/// clock or does I/O: the edge passes `now`, sends the polls and emits the outcomes.
package struct CleengPollerCore: Sendable {
    package enum Action: Sendable, Equatable {
        /// Send getAccessStatus; `slot` is when the schedule wanted it (for drift).
        case poll(ReceiptID, requestId: Int, request: HTTPRequestSpec, slot: Int64)
        case emit(StageResult)
    }

    /// Only what a poll and the final outcome need: a receipt's data (up to 60 KB) is not
    /// kept, so one poller can hold 100,000 receipts.
    struct Receipt: Sendable {
        var order: PolledOrder
        /// The merchant's, looked up once.
        var apiURL: String
        var machine: CleengReceiptPoller
        /// The receipt arrived after its deadline (a poller was down): one poll decides it.
        var lastCheck: Bool
        var wakeAt: Int64?
    }

    /// A row of the receipt table. The generation changes whenever the row is freed, so an
    /// answer or a heap entry for a receipt that has ended never reaches the row's next receipt.
    struct Row: Sendable {
        var generation: UInt32 = 0
        var receipt: Receipt?
    }

    let policy: CleengPollingPolicy
    let apiURLs: [String: String]
    /// Every poll and answer reaches its receipt by row number, not by hashing its order key:
    /// the key lookups, several per poll, were about 6 % of the poller's CPU.
    var table: [Row] = []
    var freeRows: [Int32] = []
    var rowOfOrder: [OrderKey: Int32] = [:]
    var wakeUps = MinHeap()

    package var count: Int { rowOfOrder.count }
    package var nextWakeUp: Int64? { wakeUps.peek?.time }

    package init(policy: CleengPollingPolicy, config: PaypipeConfig) {
        self.policy = policy
        apiURLs = config.merchants.compactMapValues { $0.cleeng?.apiURL }
    }

    /// A receipt from the ledger. A receipt already held is left alone (a resume or a sweep
    /// can send it twice); one past its deadline gets one last check.
    package mutating func add(_ order: Order, acceptedAt: Int64, ticket: DispatchTicket, now: Int64) -> [Action] {
        guard rowOfOrder[order.key] == nil else { return [] }
        let polled = PolledOrder(order, ticket: ticket)
        guard let apiURL = apiURLs[order.merchant], order.operation == .appleReceipt else {
            return [.emit(Self.outcome(polled, .failed(code: "MISSING_CREDENTIALS", message: "merchant \(order.merchant) has no cleeng apiURL")))]
        }
        let lastCheck = now > policy.deadline(acceptedAt: acceptedAt)
        let receipt = Receipt(
            order: polled, apiURL: apiURL, machine: CleengReceiptPoller(acceptedAt: acceptedAt, policy: policy), lastCheck: lastCheck)
        let id = insert(receipt)
        if lastCheck { return [poll(receipt, id, requestId: 1, slot: now)] }
        return step(id, now: now) { $0.tick(at: now) }
    }

    /// Wakes every receipt whose time has come.
    package mutating func due(now: Int64) -> [Action] {
        var actions: [Action] = []
        while let top = wakeUps.peek, top.time <= now {
            wakeUps.pop()
            let row = Int(top.id.row)
            guard holds(top.id), table[row].receipt!.wakeAt == top.time else { continue }
            table[row].receipt!.wakeAt = nil
            actions += step(top.id, now: now) { $0.tick(at: now) }
        }
        return actions
    }

    /// A getAccessStatus answer (or its transport failure as `.transient`).
    package mutating func receive(_ id: ReceiptID, requestId: Int, status: CleengAccessStatus, now: Int64) -> [Action] {
        guard let receipt = self[id] else { return [] }
        if receipt.lastCheck {
            remove(id)
            let verdict: ProviderVerdict =
                switch status {
                case .granted(let grant): .succeeded(grant.result)
                case .fatalError: status.verdict ?? policy.giveUpVerdict
                case .notGranted, .transient: policy.giveUpVerdict
                }
            return [.emit(Self.outcome(receipt.order, verdict))]
        }
        return step(id, now: now) { $0.receive(status, requestId: requestId, at: now) }
    }

    /// Whether `id`'s receipt is still in its row (the row was not freed, or reused, since).
    private func holds(_ id: ReceiptID) -> Bool {
        let row = Int(id.row)
        return row < table.count && table[row].generation == id.generation && table[row].receipt != nil
    }

    private subscript(id: ReceiptID) -> Receipt? {
        holds(id) ? table[Int(id.row)].receipt : nil
    }

    private mutating func step(_ id: ReceiptID, now: Int64, _ event: (inout CleengReceiptPoller) -> CleengReceiptPoller.Action) -> [Action] {
        guard holds(id) else { return [] }
        let row = Int(id.row)
        // In place: a copy of the receipt would retain and release each of its strings.
        let slot = table[row].receipt!.machine.nextPollAt
        let action = event(&table[row].receipt!.machine)
        switch action {
        case .sendPoll(let requestId):
            // No wake-up while the poll is out: the edge always reports an answer or a transport
            // failure (its HTTP timeout is at most one interval), and that reschedules the receipt.
            // One heap entry per receipt at a time keeps 100,000 receipts small.
            return [poll(table[row].receipt!, id, requestId: requestId, slot: slot)]
        case .wait(let until):
            table[row].receipt!.wakeAt = until
            wakeUps.push(time: until, id: id)
            return []
        case .emit(let verdict):
            let order = table[row].receipt!.order
            remove(id)
            return [.emit(Self.outcome(order, verdict))]
        case .stop:
            remove(id)
            return []
        }
    }

    private mutating func insert(_ receipt: Receipt) -> ReceiptID {
        let row: Int32
        if let free = freeRows.popLast() {
            row = free
        } else {
            row = Int32(table.count)
            table.append(Row())
        }
        table[Int(row)].receipt = receipt
        rowOfOrder[receipt.order.key] = row
        return ReceiptID(row: row, generation: table[Int(row)].generation)
    }

    private mutating func remove(_ id: ReceiptID) {
        guard let receipt = self[id] else { return }
        let row = Int(id.row)
        rowOfOrder[receipt.order.key] = nil
        table[row].receipt = nil
        table[row].generation &+= 1
        freeRows.append(id.row)
    }

    private func poll(_ receipt: Receipt, _ id: ReceiptID, requestId: Int, slot: Int64) -> Action {
        let order = receipt.order
        let request = CleengAccessStatusCall.request(
            customerToken: order.customerToken, offerId: order.offerId, ipAddress: order.ipAddress,
            apiURL: receipt.apiURL, requestId: requestId)
        return .poll(id, requestId: requestId, request: request, slot: slot)
    }

    static func outcome(_ order: PolledOrder, _ verdict: ProviderVerdict) -> StageResult {
        StageResult(answering: .poll, ticket: order.ticket, outcome: outcomeOnly(order, verdict))
    }

    static func outcomeOnly(_ order: PolledOrder, _ verdict: ProviderVerdict) -> Outcome {
        func make(_ status: Outcome.Status, result: [String: JSONValue]? = nil, error: Outcome.ErrorInfo? = nil) -> Outcome {
            Outcome(
                orderId: order.key.orderId, merchant: order.key.merchant, provider: Provider.cleeng.rawValue,
                operation: Operation.appleReceipt.rawValue, status: status, result: result, error: error)
        }
        return switch verdict {
        case .succeeded(let result): make(.succeeded, result: result)
        case .failed(let code, let message): make(.failed, error: .init(code: code, message: message))
        case .pending(let result): make(.pending, result: result)
        case .retry(let reason), .unknown(let reason), .neverSeen(let reason): make(.failed, error: .init(code: "ACCESS_NOT_GRANTED", message: reason))
        }
    }
}

/// The parts of an appleReceipt order that polling uses.
struct PolledOrder: Sendable {
    var key: OrderKey
    var customerToken: String
    var offerId: String
    var ipAddress: String?
    /// The dispatch the ledger sent it as, named by the outcome.
    var ticket: DispatchTicket

    init(_ order: Order, ticket: DispatchTicket) {
        self.ticket = ticket
        key = order.key
        customerToken = order.params["customerToken"]?.stringValue ?? ""
        offerId = order.params["offerId"]?.stringValue ?? ""
        ipAddress = order.params["ipAddress"]?.stringValue
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

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
        case poll(OrderKey, requestId: Int, request: HTTPRequestSpec, slot: Int64)
        case emit(Outcome)
    }

    /// Only what a poll and the final outcome need: a receipt's data (up to 60 KB) is not
    /// kept, so one poller can hold 100,000 receipts.
    struct Receipt: Sendable {
        var order: PolledOrder
        var machine: CleengReceiptPoller
        /// The receipt arrived after its deadline (a poller was down): one poll decides it.
        var lastCheck: Bool
        var wakeAt: Int64?
    }

    let policy: CleengPollingPolicy
    let apiURLs: [String: String]
    var receipts: [OrderKey: Receipt] = [:]
    var wakeUps = MinHeap()

    package var count: Int { receipts.count }
    package var nextWakeUp: Int64? { wakeUps.peek?.time }

    package init(policy: CleengPollingPolicy, config: PaypipeConfig) {
        self.policy = policy
        apiURLs = config.merchants.compactMapValues { $0.cleeng?.apiURL }
    }

    /// A receipt from the ledger. A receipt already held is left alone (a resume or a sweep
    /// can send it twice); one past its deadline gets one last check.
    package mutating func add(_ order: Order, acceptedAt: Int64, now: Int64) -> [Action] {
        guard receipts[order.key] == nil else { return [] }
        guard apiURLs[order.merchant] != nil, order.operation == .appleReceipt else {
            return [.emit(Self.outcome(PolledOrder(order), .failed(code: "MISSING_CREDENTIALS", message: "merchant \(order.merchant) has no cleeng apiURL")))]
        }
        let polled = PolledOrder(order)
        var receipt = Receipt(order: polled, machine: CleengReceiptPoller(acceptedAt: acceptedAt, policy: policy), lastCheck: false)
        if now > policy.deadline(acceptedAt: acceptedAt) {
            receipt.lastCheck = true
            receipts[order.key] = receipt
            return [poll(polled, requestId: 1, slot: now)]
        }
        receipts[order.key] = receipt
        return step(order.key, now: now) { $0.tick(at: now) }
    }

    /// Wakes every receipt whose time has come.
    package mutating func due(now: Int64) -> [Action] {
        var actions: [Action] = []
        while let top = wakeUps.peek, top.time <= now {
            wakeUps.pop()
            guard let receipt = receipts[top.key], receipt.wakeAt == top.time else { continue }
            receipts[top.key]?.wakeAt = nil
            actions += step(top.key, now: now) { $0.tick(at: now) }
        }
        return actions
    }

    /// A getAccessStatus answer (or its transport failure as `.transient`).
    package mutating func receive(_ key: OrderKey, requestId: Int, status: CleengAccessStatus, now: Int64) -> [Action] {
        guard let receipt = receipts[key] else { return [] }
        if receipt.lastCheck {
            receipts[key] = nil
            let verdict: ProviderVerdict =
                switch status {
                case .granted(let grant): .succeeded(grant.result)
                case .fatalError: status.verdict ?? policy.giveUpVerdict
                case .notGranted, .transient: policy.giveUpVerdict
                }
            return [.emit(Self.outcome(receipt.order, verdict))]
        }
        return step(key, now: now) { $0.receive(status, requestId: requestId, at: now) }
    }

    private mutating func step(_ key: OrderKey, now: Int64, _ event: (inout CleengReceiptPoller) -> CleengReceiptPoller.Action) -> [Action] {
        guard var receipt = receipts[key] else { return [] }
        let slot = receipt.machine.nextPollAt
        let action = event(&receipt.machine)
        switch action {
        case .sendPoll(let requestId):
            // No wake-up while the poll is out: the edge always reports an answer or a transport
            // failure (its HTTP timeout is at most one interval), and that reschedules the receipt.
            // One heap entry per receipt at a time keeps 100,000 receipts small.
            receipts[key] = receipt
            return [poll(receipt.order, requestId: requestId, slot: slot)]
        case .wait(let until):
            receipts[key] = receipt
            return schedule(key, at: until)
        case .emit(let verdict):
            receipts[key] = nil
            return [.emit(Self.outcome(receipt.order, verdict))]
        case .stop:
            receipts[key] = nil
            return []
        }
    }

    private mutating func schedule(_ key: OrderKey, at time: Int64) -> [Action] {
        receipts[key]?.wakeAt = time
        wakeUps.push(time: time, key: key)
        return []
    }

    private func poll(_ order: PolledOrder, requestId: Int, slot: Int64) -> Action {
        let request = CleengAccessStatusCall.request(
            customerToken: order.customerToken, offerId: order.offerId, ipAddress: order.ipAddress,
            apiURL: apiURLs[order.key.merchant] ?? "", requestId: requestId)
        return .poll(order.key, requestId: requestId, request: request, slot: slot)
    }

    static func outcome(_ order: PolledOrder, _ verdict: ProviderVerdict) -> Outcome {
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

    init(_ order: Order) {
        key = order.key
        customerToken = order.params["customerToken"]?.stringValue ?? ""
        offerId = order.params["offerId"]?.stringValue ?? ""
        ipAddress = order.params["ipAddress"]?.stringValue
    }
}

/// A binary min-heap of (time, key).
struct MinHeap: Sendable {
    struct Entry: Sendable {
        var time: Int64
        var key: OrderKey
    }

    private var items: [Entry] = []
    var count: Int { items.count }
    var peek: Entry? { items.first }

    mutating func push(time: Int64, key: OrderKey) {
        items.append(Entry(time: time, key: key))
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

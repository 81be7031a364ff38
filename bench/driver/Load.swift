import BenchSupport
import Foundation
import Histogram
import Synchronization
import ZeroMQ

/// The contract's outcome statuses, plus anything else.
let statusNames = ["accepted", "pending", "succeeded", "failed", "rejected", "unknown", "other"]

/// The bookkeeping of one batch of orders (a probe, the warm-up or the measured run). Order
/// `seq` has orderId `tag + String(seq)` and uses template `seq % templateCount`.
///
/// The sender thread writes `sendTimes[seq]` before the order goes out; the receiver thread
/// owns everything else until `Load.stopReceiver()` returns.
final class Tally: @unchecked Sendable {
    let tag: [UInt8]
    let count: Int
    let templateCount: Int
    let keepBodies: Bool
    let sendTimes: UnsafeMutablePointer<UInt64>
    let settled: UnsafeMutablePointer<UInt8>

    let sentCount = Atomic<Int>(0)
    let settledCount = Atomic<Int>(0)
    let duplicateCount = Atomic<Int>(0)
    let firstSendNanoseconds = Atomic<UInt64>(0)
    let lastSendNanoseconds = Atomic<UInt64>(0)
    let lastOutcomeNanoseconds = Atomic<UInt64>(0)
    /// When the 10 % and the 90 % mark of first outcomes arrived: the steady middle of a run,
    /// without the intake burst at its start or the last copies draining at its end.
    let steadyMarks: (low: Int, high: Int)
    let lowMarkNanoseconds = Atomic<UInt64>(0)
    let highMarkNanoseconds = Atomic<UInt64>(0)
    /// Signalled once when the last order has its first outcome.
    let complete = DispatchSemaphore(value: 0)

    // Receiver-owned.
    var histogram = Histogram<UInt64>(lowestDiscernibleValue: 1, highestTrackableValue: 3_600_000_000, numberOfSignificantValueDigits: .three)
    var statusCounts = [Int](repeating: 0, count: statusNames.count)
    var duplicateStatusCounts = [Int](repeating: 0, count: statusNames.count)
    var templateStatusCounts: [[Int]]
    /// A few first outcomes whose status was not `expected`, for the report.
    var unexpectedSamples: [String] = []
    /// With `keepBodies`: each order's first outcome (status index, body), readable any time.
    let firsts = Mutex<[Int: (status: Int, body: String)]>([:])
    let expectedStatus: Int?

    init(tag: String, count: Int, templateCount: Int, expectedStatus: String?, keepBodies: Bool = false) {
        self.tag = Array(tag.utf8)
        self.count = count
        self.templateCount = max(1, templateCount)
        self.keepBodies = keepBodies
        self.expectedStatus = expectedStatus.flatMap { statusNames.firstIndex(of: $0) }
        steadyMarks = (max(1, count / 10), max(1, count * 9 / 10))
        sendTimes = .allocate(capacity: max(1, count))
        sendTimes.initialize(repeating: 0, count: max(1, count))
        settled = .allocate(capacity: max(1, count))
        settled.initialize(repeating: 0, count: max(1, count))
        templateStatusCounts = Array(repeating: [Int](repeating: 0, count: statusNames.count), count: max(1, templateCount))
    }

    deinit {
        sendTimes.deallocate()
        settled.deallocate()
    }

    func orderId(_ seq: Int) -> String { String(decoding: tag, as: UTF8.self) + String(seq) }

    /// The orders with no outcome yet (call after the receiver stopped).
    func missing() -> [Int] { (0..<count).filter { settled[$0] == 0 } }

    /// Receiver thread: one outcome for order `seq`.
    func record(seq: Int, status: Int, at now: UInt64, body: UnsafeBufferPointer<UInt8>) {
        if settled[seq] != 0 {
            duplicateStatusCounts[status] += 1
            duplicateCount.add(1, ordering: .relaxed)
            return
        }
        settled[seq] = 1
        let sentAt = sendTimes[seq]
        let micros = sentAt > 0 && now > sentAt ? (now - sentAt) / 1000 : 0
        _ = histogram.record(max(1, micros))
        statusCounts[status] += 1
        templateStatusCounts[seq % templateCount][status] += 1
        if keepBodies {
            let text = String(decoding: body, as: UTF8.self)
            firsts.withLock { $0[seq] = (status, text) }
        }
        if let expectedStatus, status != expectedStatus, unexpectedSamples.count < 5 {
            unexpectedSamples.append(String(decoding: body.prefix(400), as: UTF8.self))
        }
        lastOutcomeNanoseconds.store(now, ordering: .relaxed)
        let settledNow = settledCount.add(1, ordering: .relaxed).newValue
        if settledNow == steadyMarks.low { lowMarkNanoseconds.store(now, ordering: .relaxed) }
        if settledNow == steadyMarks.high { highMarkNanoseconds.store(now, ordering: .relaxed) }
        if settledNow == count { complete.signal() }
    }
}

/// The driver's two sockets: PUSH to the intake (one sender thread at a time) and PULL from
/// the outcomes (one receiver thread for the scenario's lifetime).
final class Load: @unchecked Sendable {
    let context: ZMQContext
    let push: ZMQSocket
    let pull: ZMQSocket
    private let tallies = Mutex<[Tally]>([])
    let foreignCount = Atomic<Int>(0)
    let unreadableCount = Atomic<Int>(0)
    let stopFlag = Atomic<Bool>(false)
    let abortFlag = Atomic<Bool>(false)
    private let receiverDone = DispatchSemaphore(value: 0)
    private var receiverRunning = false
    /// Signalled by each sender thread when it returns; `close` waits for the last one.
    private let senderIdle = DispatchSemaphore(value: 1)

    init(intake: String, outcomes: String) throws {
        context = try ZMQContext()
        var pullOptions = ZMQSocketOptions()
        pullOptions.receiveHighWaterMark = 200_000
        pullOptions.receiveTimeoutMilliseconds = 100
        pull = try context.socket(.pull, options: pullOptions)
        try pull.connect(outcomes)
        var pushOptions = ZMQSocketOptions()
        pushOptions.sendTimeoutMilliseconds = 100
        pushOptions.lingerMilliseconds = 0
        push = try context.socket(.push, options: pushOptions)
        // Every ledger of a comma-separated list: orders are spread over them.
        try push.connect(ZMQPeers(intake))
    }

    func register(_ tally: Tally) { tallies.withLock { $0.append(tally) } }

    func startReceiver() {
        receiverRunning = true
        let thread = Thread { [self] in receive() }
        thread.name = "bench-recv"
        thread.start()
    }

    /// Stops the receiver thread and waits for it (bounded by its 100 ms receive timeout).
    func stopReceiver() {
        guard receiverRunning else { return }
        receiverRunning = false
        stopFlag.store(true, ordering: .relaxed)
        _ = receiverDone.wait(timeout: .now() + 10)
    }

    /// Stops the sender (it checks the abort flag at least every 100 ms) and the receiver, then
    /// closes both sockets from this thread once no other thread uses them.
    func close() {
        stopReceiver()
        abortFlag.store(true, ordering: .relaxed)
        if senderIdle.wait(timeout: .now() + 10) == .timedOut {
            log("the sender thread did not stop within 10 s")
        } else {
            senderIdle.signal()  // libdispatch traps on a semaphore freed below its initial value
        }
        push.close()
        pull.close()
        context.terminate()
    }

    private func receive() {
        defer { receiverDone.signal() }
        var current: [Tally] = []
        let orderIdKey = Array(#""orderId":""#.utf8)
        let statusKey = Array(#""status":""#.utf8)
        let statusBytes = statusNames.map { Array($0.utf8) }
        while !stopFlag.load(ordering: .relaxed) {
            let message: ZMQMessage?
            do { message = try pull.receive() } catch {
                log("outcome socket: \(error)")
                return
            }
            guard let message else { continue }
            let now = monotonicNanoseconds()
            current = tallies.withLock { $0 }
            message.body.withUnsafeBufferPointer { body in
                // Outcomes are compact JSON with sorted keys: the first "orderId" is the top-level
                // one (only "at", "attempts", "error" come before it, and strings inside "error"
                // have their quotes escaped); "status" is the last key but "v", so the last
                // "status" is the top-level one even when "result" holds another.
                guard let idStart = firstIndex(of: orderIdKey, in: body).map({ $0 + orderIdKey.count }),
                    let idEnd = body[idStart...].firstIndex(of: UInt8(ascii: "\"")),
                    let statusStart = lastIndex(of: statusKey, in: body).map({ $0 + statusKey.count }),
                    let statusEnd = body[statusStart...].firstIndex(of: UInt8(ascii: "\""))
                else {
                    unreadableCount.add(1, ordering: .relaxed)
                    return
                }
                let id = UnsafeBufferPointer(rebasing: body[idStart..<idEnd])
                let statusSlice = UnsafeBufferPointer(rebasing: body[statusStart..<statusEnd])
                var status = statusNames.count - 1
                for (index, name) in statusBytes.enumerated() where name.elementsEqual(statusSlice) {
                    status = index
                    break
                }
                for tally in current where id.count > tally.tag.count && tally.tag.elementsEqual(id.prefix(tally.tag.count)) {
                    var seq = 0
                    var valid = true
                    for byte in id[tally.tag.count...] {
                        guard byte >= 48 && byte <= 57 else {
                            valid = false
                            break
                        }
                        seq = seq * 10 + Int(byte - 48)
                        if seq >= tally.count { valid = false }
                    }
                    if valid {
                        tally.record(seq: seq, status: status, at: now, body: body)
                        return
                    }
                }
                foreignCount.add(1, ordering: .relaxed)
            }
        }
    }

    /// Sends the tally's orders on the calling thread: as fast as the pipeline takes them, or
    /// at `rate` orders/s. Returns false when aborted.
    ///
    /// Latency starts at the send time kept here: the moment just before the order is handed
    /// to ZeroMQ (full speed), or the order's scheduled time (fixed rate, so a pipeline that
    /// falls behind is charged for the wait: no coordinated omission).
    func send(_ tally: Tally, templates: [OrderTemplate], rate: Double?) -> Bool {
        var frame: [UInt8] = []
        frame.reserveCapacity(2048)
        var orderId: [UInt8] = []
        orderId.reserveCapacity(64)
        let start = monotonicNanoseconds()
        let interval = rate.map { 1e9 / $0 } ?? 0
        tally.firstSendNanoseconds.store(start, ordering: .relaxed)
        for seq in 0..<tally.count {
            orderId.removeAll(keepingCapacity: true)
            orderId.append(contentsOf: tally.tag)
            appendDecimal(seq, to: &orderId)
            templates[seq % templates.count].frame(orderId: orderId, into: &frame)
            var stamp: UInt64
            if rate != nil {
                stamp = start + UInt64(Double(seq) * interval)
                let now = monotonicNanoseconds()
                if stamp > now + 200_000 {
                    while true {
                        let t = monotonicNanoseconds()
                        if t >= stamp { break }
                        if abortFlag.load(ordering: .relaxed) { return false }
                        var pause = timespec(tv_sec: 0, tv_nsec: Int(min(stamp - t, 100_000_000)))
                        nanosleep(&pause, nil)
                    }
                }
            } else {
                stamp = monotonicNanoseconds()
            }
            if seq == 0 { tally.firstSendNanoseconds.store(stamp, ordering: .relaxed) }
            while true {
                tally.sendTimes[seq] = stamp
                let sent: Bool
                do { sent = try frame.withUnsafeBytes { try push.send($0) } } catch {
                    log("intake socket: \(error)")
                    return false
                }
                if sent { break }
                if abortFlag.load(ordering: .relaxed) { return false }
                if rate == nil { stamp = monotonicNanoseconds() }
            }
            tally.sentCount.add(1, ordering: .relaxed)
        }
        tally.lastSendNanoseconds.store(monotonicNanoseconds(), ordering: .relaxed)
        return true
    }

    /// Runs `send` on its own thread; `done` is signalled when it returns.
    /// One sender at a time: waits for the previous one to return first.
    func startSending(_ tally: Tally, templates: [OrderTemplate], rate: Double?, done: DispatchSemaphore) {
        senderIdle.wait()
        let thread = Thread { [self] in
            _ = send(tally, templates: templates, rate: rate)
            senderIdle.signal()
            done.signal()
        }
        thread.name = "bench-send"
        thread.start()
    }
}

func appendDecimal(_ value: Int, to buffer: inout [UInt8]) {
    if value == 0 {
        buffer.append(48)
        return
    }
    var digits:
        (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) =
            (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    var n = value
    var count = 0
    withUnsafeMutableBytes(of: &digits) { d in
        while n > 0 {
            d[count] = UInt8(48 + n % 10)
            n /= 10
            count += 1
        }
        for i in stride(from: count - 1, through: 0, by: -1) { buffer.append(d[i]) }
    }
}

func firstIndex(of needle: [UInt8], in haystack: UnsafeBufferPointer<UInt8>) -> Int? {
    guard needle.count <= haystack.count, let first = needle.first else { return nil }
    var i = 0
    let last = haystack.count - needle.count
    while i <= last {
        if haystack[i] == first {
            var j = 1
            while j < needle.count && haystack[i + j] == needle[j] { j += 1 }
            if j == needle.count { return i }
        }
        i += 1
    }
    return nil
}

func lastIndex(of needle: [UInt8], in haystack: UnsafeBufferPointer<UInt8>) -> Int? {
    guard needle.count <= haystack.count, let first = needle.first else { return nil }
    var i = haystack.count - needle.count
    while i >= 0 {
        if haystack[i] == first {
            var j = 1
            while j < needle.count && haystack[i + j] == needle[j] { j += 1 }
            if j == needle.count { return i }
        }
        i -= 1
    }
    return nil
}

import Logging
import PaypipeCore
import ZeroMQ

/// Socket options for the internal hops. A small send HWM keeps little work parked in any one
/// stage copy's queue, so a copy that leaves takes little with it (the ledger redelivers what it
/// does take) and a copy that joins late gets work soon.
func stageOptions(highWaterMark: Int32 = 1000) -> ZMQSocketOptions {
    var options = ZMQSocketOptions()
    options.sendHighWaterMark = highWaterMark
    options.receiveHighWaterMark = highWaterMark
    options.maxMessageSize = 4 << 20
    return options
}

func milliseconds() -> Int64 { Timestamp.nowMilliseconds() }

/// A one-shot stop signal that async loops can poll cheaply.
final class StopFlag: Sendable {
    private let stopped = Mutex(false)
    func stop() { stopped.withLock { $0 = true } }
    var isStopped: Bool { stopped.withLock { $0 } }
}

import Synchronization

import Logging
import ServiceLifecycle
import ZeroMQ

/// Runs a stage's loop on a thread of its own (`runOnOwnThread`) until graceful shutdown or
/// cancellation sets `stopping`; the loop then takes no more work, finishes what it holds and
/// returns.
package func runStageLoop(name: String, stopping: StopFlag, _ body: @escaping @Sendable () throws -> Void) async throws {
    try await withGracefulShutdownHandler {
        try await runOnOwnThread(name: name, stopping: stopping) {
            // By now the stage's other busy threads (libzmq's, NIO's) exist too.
            StageProcess.keepThreadsAtStartingNice()
            try body()
        }
    } onGracefulShutdown: {
        stopping.stop()
    }
}

/// For a stopping stage: what its outboxes still hold goes out, each within its drain time, and
/// what no peer took is counted in the log (the ledger redelivers work; upstream replays
/// outcomes by seq).
package func drainOnStop(_ outboxes: [ZMQOutbox], logger: Logger) throws(ZMQError) {
    var outboxes = outboxes
    let abandoned = try ZMQOutbox.drain(&outboxes)
    if abandoned > 0 { logger.warning("stopping with messages no peer took", metadata: ["count": "\(abandoned)"]) }
}

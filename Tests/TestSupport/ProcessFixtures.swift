import Foundation
import HTTPTypes
import Hummingbird
import NetsEasy
import PaypipeCore
import Sandbox
import StageRuntime
import StageWire
import Synchronization
import Testing
import ZeroMQ

package func submitted(_ h: PipelineHarness, _ process: Process) -> Int {
    guard let port = h.metricsPort(of: process), let text = httpGet("http://127.0.0.1:\(port)/metrics") else { return -1 }
    var total = 0
    for line in text.split(separator: "\n") where line.hasPrefix("paypipe_submitter_outcomes_total{") {
        total += Int(Double(line.split(separator: " ").last ?? "0") ?? 0)
    }
    return total
}

package func ledgerMetrics(_ h: PipelineHarness) -> String? {
    guard let port = h.metricsPort(of: h.ledgerProcess) else { return nil }
    return httpGet("http://127.0.0.1:\(port)/metrics")
}

package func phonePeAuthInit(_ id: String, authRequestId: String) -> String {
    #"{"v":1,"orderId":"\#(id)","provider":"phonepe","operation":"authInit","amount":39900,"currency":"INR","params":{"merchantUserId":"U1","subscriptionId":"SUB1","authRequestId":"\#(authRequestId)"}}"#
}

/// Waits (bounded) until `condition` holds; false when `limit` passed first.
package func eventually(within limit: Duration, _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + limit
    while !condition() {
        if ContinuousClock.now >= deadline { return false }
        try? await Task.sleep(for: .milliseconds(50))
    }
    return true
}

/// Waits for `process` to exit; past `limit` it is killed (by PID) and this returns false. It
/// polls instead of `waitUntilExit()`, which would block one of the few threads every test
/// shares, stalling unrelated tests while a child shuts down.
package func waitForExit(_ process: Process, within limit: Duration) async -> Bool {
    let exited = await eventually(within: limit) { !process.isRunning }
    if !exited {
        kill(process.processIdentifier, SIGKILL)
        _ = await eventually(within: .seconds(2)) { !process.isRunning }
    }
    return exited
}

/// Runs a command to its end, at most `limit`, and returns its exit status (nil: it was still
/// running and was killed). Spawned and reaped here with `waitpid`: Foundation's `Process` does
/// not always see the exit of a child spawned from a concurrency thread.
package func runToEnd(_ path: String, _ arguments: [String], within limit: Duration) async -> Int32? {
    guard let pid = spawnCommand(path, arguments) else { return nil }
    var status: Int32 = 0
    let ended = await eventually(within: limit) { waitpid(pid, &status, WNOHANG) == pid }
    guard ended else {
        kill(pid, SIGKILL)
        _ = waitpid(pid, &status, 0)
        return nil
    }
    return exitStatus(status)
}

/// `runToEnd` for a command that bounds its own time, waited for on the calling thread.
package func runToEndBlocking(_ path: String, _ arguments: [String]) -> Int32? {
    guard let pid = spawnCommand(path, arguments) else { return nil }
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    return exitStatus(status)
}

private func spawnCommand(_ path: String, _ arguments: [String]) -> pid_t? {
    let argv = ([path] + arguments).map { strdup($0) } + [nil]
    defer { for pointer in argv { free(pointer) } }
    var pid: pid_t = 0
    return posix_spawn(&pid, path, nil, nil, argv, environ) == 0 ? pid : nil
}

private func exitStatus(_ status: Int32) -> Int32 {
    status & 0x7f == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
}

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

/// Runs a command to its end, at most `limit`, and returns its exit status (nil: it could not
/// start, or was still running and was killed).
package func runToEnd(_ path: String, _ arguments: [String], within limit: Duration) async -> Int32? {
    guard let command = try? ChildCommand([path] + arguments) else { return nil }
    var status: Int32?
    guard
        await eventually(
            within: limit,
            {
                status = command.exitStatus(blocking: false)
                return status != nil
            })
    else {
        kill(command.pid, SIGKILL)
        _ = command.exitStatus(blocking: true)
        return nil
    }
    return status
}

/// `runToEnd` for a command that bounds its own time, waited for on the calling thread.
package func runToEndBlocking(_ path: String, _ arguments: [String]) -> Int32? {
    (try? ChildCommand([path] + arguments))?.exitStatus(blocking: true)
}

/// Runs a command to its end and returns its status and what it wrote. Its output goes to files,
/// not pipes: `FileHandle.readDataToEndOfFile` traps when a signal (another test's child ending)
/// interrupts its read. It waits by polling (`waitForExit`), not in `waitUntilExit()`, which
/// would hold one of the few threads every test shares for the command's whole run.
package func runCapturing(
    _ path: String, _ arguments: [String], environment: [String: String]? = nil, input: [UInt8] = [], within limit: Duration = .seconds(300)
) async throws -> (status: Int32, output: String, errors: String) {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("paypipe-run-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    let inputPath = directory.appendingPathComponent("in").path
    let outputPath = directory.appendingPathComponent("out").path
    let errorsPath = directory.appendingPathComponent("err").path
    try Data(input).write(to: URL(fileURLWithPath: inputPath))
    try Data().write(to: URL(fileURLWithPath: outputPath))
    try Data().write(to: URL(fileURLWithPath: errorsPath))
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    if let environment { process.environment = environment }
    process.standardInput = FileHandle(forReadingAtPath: inputPath)
    process.standardOutput = FileHandle(forWritingAtPath: outputPath)
    process.standardError = FileHandle(forWritingAtPath: errorsPath)
    try process.run()
    guard await waitForExit(process, within: limit) else { throw HarnessError("\(path) ran longer than \(limit) and was killed") }
    return (
        process.terminationStatus, String(decoding: readWholeFile(outputPath) ?? [], as: UTF8.self),
        String(decoding: readWholeFile(errorsPath) ?? [], as: UTF8.self)
    )
}

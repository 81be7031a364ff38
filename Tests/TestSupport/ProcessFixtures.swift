import Foundation
import HTTPTypes
import Hummingbird
import NetsEasy
import PaypipeCore
import Sandbox
import StageRuntime
import StageWire
import Supervision
import Synchronization
import Testing
import ZeroMQ

package func submitted(_ h: PipelineHarness, _ process: ChildProcess) -> Int {
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

/// A Nets subscription made through the pipeline, for charges to draw on: `createSubscription`,
/// then `getSubscription` until the sandbox's customer has completed the hosted page (on the
/// sandbox's own timer).
package func netsSubscription(_ h: PipelineHarness, orderId: String) async throws -> String {
    try await h.send(
        #"{"v":1,"orderId":"\#(orderId)","provider":"nets","operation":"createSubscription","amount":9900,"currency":"SEK","params":{"endDate":"2030-12-31T23:59:59+01:00","interval":30,"reference":"\#(orderId)"}}"#
    )
    let created = try await h.collect { $0.contains { $0.orderId == orderId } }
    guard let paymentId = created.first(where: { $0.orderId == orderId })?.result?["paymentId"]?.stringValue else {
        throw HarnessError("no Nets payment for \(orderId): \(created.map(\.serialized))")
    }
    var fetched: [Outcome] = []
    var attempt = 0
    _ = await eventually(within: .seconds(20)) {
        attempt += 1
        let id = "\(orderId)-get-\(attempt)"
        try? await h.send(#"{"v":1,"orderId":"\#(id)","provider":"nets","operation":"getSubscription","params":{"paymentId":"\#(paymentId)"}}"#)
        fetched = ((try? await h.collect { $0.contains { $0.orderId == id } }) ?? []).filter { $0.orderId == id }
        return fetched.first?.result?["subscriptionId"] != nil
    }
    guard let subscriptionId = fetched.first?.result?["subscriptionId"]?.stringValue else {
        throw HarnessError("no Nets subscription for \(orderId): \(fetched.map(\.serialized))")
    }
    return subscriptionId
}

/// Waits (bounded) until `condition` holds; false when `limit` passed first. The condition may
/// itself ask over the network (a provider's status, a fresh request).
package func eventually(within limit: Duration, _ condition: () async -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + limit
    while await !condition() {
        if ContinuousClock.now >= deadline { return false }
        try? await Task.sleep(for: .milliseconds(50))
    }
    return true
}

/// Waits for `process` to exit; past `limit` it is killed and this returns false.
package func waitForExit(_ process: ChildProcess, within limit: Duration) async -> Bool {
    if await process.waitForExit(within: limit) != nil { return true }
    process.signal(SIGKILL)
    await process.waitForExit(within: .seconds(10))
    return false
}

/// Runs a command to its end, at most `limit`, and returns its exit status (nil: it could not
/// start, or was still running and was killed).
package func runToEnd(_ path: String, _ arguments: [String], within limit: Duration) async -> Int32? {
    guard let command = try? ChildProcess([path] + arguments) else { return nil }
    guard await waitForExit(command, within: limit) else { return nil }
    return command.exitStatus
}

/// `runToEnd` for a command that bounds its own time, waited for on the calling thread.
package func runToEndBlocking(_ path: String, _ arguments: [String]) -> Int32? {
    (try? ChildProcess([path] + arguments))?.waitForExitBlocking()
}

/// Runs a command to its end and returns its status and what it wrote. Its output goes to files,
/// read once it has ended.
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
    let process = try ChildProcess(
        [path] + arguments, environment: environment, stdin: inputPath, stdout: .file(outputPath, append: false),
        stderr: .file(errorsPath, append: false))
    guard await waitForExit(process, within: limit) else { throw HarnessError("\(path) ran longer than \(limit) and was killed") }
    return (
        process.exitStatus ?? -1, String(decoding: readWholeFile(outputPath) ?? [], as: UTF8.self),
        String(decoding: readWholeFile(errorsPath) ?? [], as: UTF8.self)
    )
}

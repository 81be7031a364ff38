// PUSH→PULL over tcp loopback, 200-byte messages, one process per side: msgs/s through
// paypipe's ZeroMQ wrapper (ZMQSender/ZMQReceiver, the path the stages use) and through a raw
// libzmq loop, measured alternately in one run so the two figures are comparable.
//
//   deploy/swift-release run paypipe-zmq-bench [--messages N] [--rounds R]
import CZeroMQ
import Foundation
import Supervision
import ZeroMQ

let arguments = CommandLine.arguments
func option(_ name: String, _ fallback: Int) -> Int {
    guard let i = arguments.firstIndex(of: name), i + 1 < arguments.count, let v = Int(arguments[i + 1]) else { return fallback }
    return v
}
func stringOption(_ name: String) -> String? {
    guard let i = arguments.firstIndex(of: name), i + 1 < arguments.count else { return nil }
    return arguments[i + 1]
}

let messageSize = 200
let messages = option("--messages", 2_000_000)

func seconds() -> Double {
    var t = timespec()
    clock_gettime(CLOCK_MONOTONIC, &t)
    return Double(t.tv_sec) + Double(t.tv_nsec) / 1e9
}

func fail(_ text: String) -> Never {
    FileHandle.standardError.write(Data("paypipe-zmq-bench: \(text)\n".utf8))
    exit(1)
}

/// Receiver side: binds, prints its endpoint, receives `messages`, prints msgs/s.
func runPull(mode: String) async {
    do {
        let context = try ZMQContext()
        var options = ZMQSocketOptions()
        options.receiveHighWaterMark = 10_000
        let pull = try context.socket(.pull, options: options)
        let endpoint = try pull.bind("tcp://127.0.0.1:*")
        FileHandle.standardOutput.write(Data("ENDPOINT \(endpoint)\n".utf8))
        var start = 0.0
        var received = 0
        var bytes = 0
        if mode == "raw" {
            let socket = pull
            var msg = zmq_msg_t()
            zmq_msg_init(&msg)
            let raw = try socket.rawHandle()
            while received < messages {
                let n = zmq_msg_recv(&msg, raw, 0)
                if n < 0 { fail("recv: \(String(cString: zmq_strerror(zmq_errno())))") }
                if received == 0 { start = seconds() }
                bytes += Int(n)
                received += 1
            }
            zmq_msg_close(&msg)
            pull.close()
        } else {
            let receiver = try ZMQReceiver(socket: pull)
            for try await message in receiver {
                if received == 0 { start = seconds() }
                bytes += message.body.count
                received += 1
                if received == messages { break }
            }
            receiver.stop()
            await receiver.waitUntilClosed()
        }
        let elapsed = seconds() - start
        guard bytes == messages * messageSize else { fail("received \(bytes) bytes, expected \(messages * messageSize)") }
        FileHandle.standardOutput.write(Data("RESULT \(Double(received - 1) / elapsed)\n".utf8))
        context.terminate()
    } catch {
        fail("\(error)")
    }
}

func runPush(mode: String, endpoint: String) async {
    do {
        let context = try ZMQContext()
        var options = ZMQSocketOptions()
        options.sendHighWaterMark = 10_000
        let push = try context.socket(.push, options: options)
        try push.connect(endpoint)
        let payload = [UInt8](repeating: 0x42, count: messageSize)
        if mode == "raw" {
            let raw = try push.rawHandle()
            for _ in 0..<messages {
                if zmq_send(raw, payload, payload.count, 0) < 0 { fail("send: \(String(cString: zmq_strerror(zmq_errno())))") }
            }
            push.close()
        } else {
            let sender = try ZMQSender(socket: push)
            let message = ZMQMessage(payload)
            for _ in 0..<messages { try await sender.send(message) }
            let report = await sender.finish(drainTimeoutMilliseconds: 30_000)
            if report.undelivered > 0 { fail("\(report.undelivered) undelivered") }
        }
        context.terminate()
    } catch {
        fail("\(error)")
    }
}

/// Runs one measurement with two child processes and returns the receiver's msgs/s.
func measure(mode: String) throws -> Double {
    let executable = URL(fileURLWithPath: CommandLine.arguments[0])
    let outputPath = FileManager.default.temporaryDirectory.appendingPathComponent("paypipe-zmq-bench-\(getpid())-\(mode)").path
    defer { unlink(outputPath) }
    let pull = try ChildProcess(
        [executable.path, "--role", "pull", "--mode", mode, "--messages", String(messages)],
        stdout: .readyLine(afterReady: .file(outputPath, append: false)), readyMarker: "ENDPOINT ")
    guard case .ready(let line) = pull.waitForLineBlocking(within: .seconds(30)) else { fail("receiver exited early") }
    let endpoint = String(line.dropFirst("ENDPOINT ".count))
    let push = try ChildProcess([executable.path, "--role", "push", "--mode", mode, "--endpoint", endpoint, "--messages", String(messages)])
    guard pull.waitForExitBlocking() == 0, push.waitForExitBlocking() == 0 else { fail("\(mode) run failed") }
    _ = pull.waitForEndOfOutput(within: .seconds(10))
    let text = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
    guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("RESULT ") }),
        let rate = Double(line.dropFirst("RESULT ".count))
    else { fail("no result from \(mode) run") }
    return rate
}

if let role = stringOption("--role") {
    let mode = stringOption("--mode") ?? "wrapper"
    if role == "pull" {
        await runPull(mode: mode)
    } else {
        guard let endpoint = stringOption("--endpoint") else { fail("--endpoint is required") }
        await runPush(mode: mode, endpoint: endpoint)
    }
    exit(0)
}

let rounds = option("--rounds", 3)
print("ZeroMQ PUSH→PULL, tcp loopback, \(messageSize)-byte messages, \(messages) per run, one process per side, \(rounds) rounds alternating")
var raw: [Double] = []
var wrapper: [Double] = []
for round in 1...rounds {
    raw.append(try measure(mode: "raw"))
    wrapper.append(try measure(mode: "wrapper"))
    print(String(format: "round %d: raw libzmq %.0f msgs/s, paypipe wrapper %.0f msgs/s", round, raw.last!, wrapper.last!))
}
let rawMedian = raw.sorted()[raw.count / 2]
let wrapperMedian = wrapper.sorted()[wrapper.count / 2]
print(
    String(
        format: "median: raw libzmq %.0f msgs/s, paypipe wrapper %.0f msgs/s, wrapper/raw = %.2f", rawMedian, wrapperMedian, wrapperMedian / rawMedian
    ))

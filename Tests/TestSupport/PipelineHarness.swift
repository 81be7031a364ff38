import Connectors
import Emulators
import Foundation
import Logging
import PaypipeCore
import PhonePeEmulation
import Sandbox
import StageRuntime
import StageWire
import Supervision
import Synchronization
import ZeroMQ

/// A whole pipeline for end-to-end tests: the real sandbox server on loopback (in-process) and
/// the ledger, signer and submitter as real child processes, all on ephemeral ports. Children
/// are stopped by PID.
package final class PipelineHarness: @unchecked Sendable {
    package let directory: URL
    package let sandbox: SandboxServer
    package let sandboxTask: Task<Void, any Error>
    package let sandboxPort: Int
    package let configPath: String
    package var ledgerEndpoints: [String: String] = [:]
    private var children: [ChildProcess] = []
    package var ledgerProcess: ChildProcess { children[0] }
    private var stderrFiles: [URL] = []
    package let context: ZMQContext
    package let sender: ZMQSender
    package let receiver: ZMQReceiver

    package static func buildDirectory() -> URL {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    }

    /// Where the callback validator listens (chosen before the config is written, because the
    /// sandbox sends PhonePe callbacks and Nets webhooks there).
    package let callbacksPort: Int
    /// Where the callback validator serves /metrics and its probes (endpoints.callbacksMetrics).
    package let callbacksMetricsPort: Int

    /// The ledger's `--redeliver-after-ms`: an unclaimed dispatch this old goes out again.
    package let redeliverAfterMilliseconds: Int64
    /// The ledger's `--store`, the same for every ledger the harness starts.
    package let storeArgument: String

    /// Each role's CURVE keys when the harness was started with `curve: true`.
    package private(set) var curveKeys: [CurveConfig.Role: ZMQCurveKeyPair] = [:]
    /// Each upstream client's keys (`upstream:`), by name.
    package private(set) var upstreamKeys: [String: ZMQCurveKeyPair] = [:]

    /// `timers`: the config's "timers" (e.g. fast Cleeng polling). `connectOutcomes`: false
    /// leaves the live outcomes PUSH without any consumer. `curve`: a `curve` section with fresh
    /// keys (secret keys as `file:` secrets in the harness's directory). `extraMerchants`: merchant
    /// profiles besides the demo's "default". `leavingOut`: optional demo settings to leave out (`nets.webhookURL`).
    /// `providerFront`: given the sandbox's URL, starts
    /// something in front of it and returns the URL the stages should use instead.
    /// `redeliverAfterMilliseconds`: the ledger's `--redeliver-after-ms`. `store`: the ledger's
    /// `--store` (default: the suite's store, `TestStores.ledgerArgument`). `storeRetryWindowMs`:
    /// the config's `store.retryWindowMs` (default: the store's own). `dunning`: a
    /// `merchants.<name>.dunning` section by merchant.
    /// Stands for the sandbox's URL in `extraMerchants` (e.g. `"\(sandboxPlaceholder)/nets"`).
    package static let sandboxPlaceholder = "http://sandbox.invalid"

    package init(
        sandboxConfiguration: SandboxConfiguration = SandboxConfiguration(port: 0).with { $0.phonePe.callbackDelayMilliseconds = 3_600_000 },
        timers: [String: Int64] = [:], connectOutcomes: Bool = true, curve: Bool = false,
        extraMerchants: [String: JSONValue] = [:], leavingOut: Set<String> = [],
        providerFront: ((String) async throws -> String)? = nil, redeliverAfterMilliseconds: Int64 = 60_000,
        upstream: [(name: String, merchants: [String]?)] = [], store: String? = nil, schedules: [String: JSONValue]? = nil,
        admins: [String] = [], ledgerLogFormat: String? = nil, tracing: JSONValue? = nil, storeRetryWindowMs: Int64? = nil,
        dunning: [String: JSONValue] = [:]
    ) async throws {
        self.redeliverAfterMilliseconds = redeliverAfterMilliseconds
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("paypipe-e2e-\(UUID().uuidString)")
        storeArgument = store ?? TestStores.ledgerArgument(directory: directory)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        callbacksPort = try freeLoopbackPort()
        callbacksMetricsPort = try freeLoopbackPort()
        let callbacks = "127.0.0.1:\(callbacksPort)"
        var sandboxConfiguration = sandboxConfiguration
        sandboxConfiguration.port = 0
        // The schedules run on the sandbox's clock.
        let clockOffsetFile = directory.appendingPathComponent("clock-offset").path
        if schedules != nil { sandboxConfiguration.clockOffsetFile = clockOffsetFile }
        let credentials = try PaypipeConfig.parse(Array(DemoConfig.text(sandboxURL: "http://127.0.0.1:9", callbacks: callbacks).utf8))
        var logger = Logger(label: "e2e-sandbox")
        logger.logLevel = .critical
        sandbox = try SandboxServer(configuration: sandboxConfiguration, config: credentials, logger: logger)
        let port = Mutex<Int?>(nil)
        let server = sandbox
        sandboxTask = Task { try await server.run { p in port.withLock { $0 = p } } }
        for _ in 0..<500 where port.withLock({ $0 }) == nil { try await Task.sleep(for: .milliseconds(10)) }
        guard let bound = port.withLock({ $0 }) else { throw HarnessError("sandbox did not start") }
        sandboxPort = bound

        // Every stable address on a random free port below the ephemeral range, not on a fixed
        // one (a leftover process could hold it) nor on one the kernel picks: a restarted ledger
        // binds its ports again, and meanwhile a stage reconnecting to a port in the ephemeral
        // range can be given that very port as its own end (a TCP self-connect), which the
        // ledger then cannot bind.
        var endpoints = ["ledgerMetrics": "127.0.0.1:0", "callbacksMetrics": "127.0.0.1:\(callbacksMetricsPort)"]
        for name in ["intake", "outcomes", "signQueue", "signedIn", "signedOut", "results", "ledgerRPC", "pollQueue", "outcomesReplay", "admin"] {
            endpoints[name] = "tcp://127.0.0.1:\(try freeLoopbackPort())"
        }
        let sandboxURL = try await providerFront?("http://127.0.0.1:\(bound)") ?? "http://127.0.0.1:\(bound)"
        var text = DemoConfig.text(
            sandboxURL: sandboxURL, callbacks: callbacks, endpoints: endpoints, timers: timers, extraMerchants: extraMerchants, leavingOut: leavingOut
        )
        // An extra merchant's provider URL may name the sandbox before its port is known.
        text = text.replacingOccurrences(of: Self.sandboxPlaceholder, with: sandboxURL)
        if curve, case .object(var document) = try JSONValue.parse(Array(text.utf8)) {
            var section: [String: JSONValue] = [:]
            for role in CurveConfig.Role.allCases {
                let pair = try ZMQCurveKeyPair.generate()
                curveKeys[role] = pair
                let secretFile = directory.appendingPathComponent("\(role.rawValue).secret").path
                try (pair.secretKey + "\n").write(toFile: secretFile, atomically: true, encoding: .utf8)
                // A key file others may read is refused.
                try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: secretFile)
                section[role.rawValue] = ["publicKey": .string(pair.publicKey), "secretKey": .string("file:" + secretFile)]
            }
            var clients: [JSONValue] = []
            for client in upstream {
                let pair = try ZMQCurveKeyPair.generate()
                upstreamKeys[client.name] = pair
                var entry: [String: JSONValue] = ["name": .string(client.name), "publicKey": .string(pair.publicKey)]
                if let merchants = client.merchants { entry["merchants"] = .array(merchants.map(JSONValue.string)) }
                clients.append(.object(entry))
            }
            if !clients.isEmpty { section["upstream"] = .array(clients) }
            var operators: [JSONValue] = []
            for name in admins {
                let pair = try ZMQCurveKeyPair.generate()
                try Self.writeKeyPair(pair, at: directory.appendingPathComponent("admin-\(name)").path)
                operators.append(["name": .string(name), "publicKey": .string(pair.publicKey)])
            }
            if !operators.isEmpty { section["admins"] = .array(operators) }
            document["curve"] = .object(section)
            text = JSONValue.object(document).serialized
        }
        if var section = schedules, case .object(var document) = try JSONValue.parse(Array(text.utf8)) {
            section["clockOffsetFile"] = .string(clockOffsetFile)
            document["schedules"] = .object(section)
            text = JSONValue.object(document).serialized
        }
        if !dunning.isEmpty, case .object(var document) = try JSONValue.parse(Array(text.utf8)), case .object(var merchants)? = document["merchants"]
        {
            for (name, section) in dunning {
                guard case .object(var merchant)? = merchants[name] else { throw HarnessError("no merchant \(name) to set dunning on") }
                merchant["dunning"] = section
                merchants[name] = .object(merchant)
            }
            document["merchants"] = .object(merchants)
            text = JSONValue.object(document).serialized
        }
        if let tracing, case .object(var document) = try JSONValue.parse(Array(text.utf8)) {
            document["tracing"] = tracing
            text = JSONValue.object(document).serialized
        }
        if let storeRetryWindowMs, case .object(var document) = try JSONValue.parse(Array(text.utf8)) {
            document["store"] = ["retryWindowMs": .integer(storeRetryWindowMs)]
            text = JSONValue.object(document).serialized
        }
        configPath = directory.appendingPathComponent("config.json").path
        try text.write(toFile: configPath, atomically: true, encoding: .utf8)

        context = try ZMQContext()
        // The wait for the ledger's ready line blocks its thread, and on PostgreSQL a ledger
        // starting beside others' waits its turn to migrate the store: off the cooperative
        // threads, which the in-process sandbox and every other test of the process share.
        let ledgerArguments =
            PipelineHarness.ledgerArguments(configPath: configPath, store: storeArgument, redeliverAfterMilliseconds: redeliverAfterMilliseconds)
            + (ledgerLogFormat.map { ["--log-format", $0] } ?? [])
        let (ledger, ready) = try await Self.spawnOffCooperativeThreads(
            "paypipe-ledger", ledgerArguments, in: directory, index: 0, waitForLine: LedgerAddresses.readyMarker)
        children.append(ledger.0)
        stderrFiles.append(ledger.1)
        ledgerEndpoints = LedgerAddresses.printed(in: ready ?? "")
        // With upstream CURVE the harness is the first listed client.
        let keys = upstreamKeys
        let firstClient = upstream.first.flatMap { keys[$0.name] }
        let upstreamOptions = Self.upstreamClientOptions(firstClient, ledger: curveKeys[.ledger])
        let pull = try context.socket(.pull, options: upstreamOptions)
        if connectOutcomes { try pull.connect(ledgerEndpoints["outcomes"]!) }
        let push = try context.socket(.push, options: upstreamOptions)
        try push.connect(ledgerEndpoints["intake"]!)
        receiver = try ZMQReceiver(socket: pull)
        sender = try ZMQSender(socket: push)
    }

    /// Where an operator's key pair (`admins:`) is, as `paypipe keys generate --admin` writes it:
    /// `<path>.public` and `<path>.secret`.
    package func adminKeyPath(_ name: String) -> String { directory.appendingPathComponent("admin-\(name)").path }

    /// Writes `pair` as `<path>.public` and `<path>.secret` (mode 0600).
    package static func writeKeyPair(_ pair: ZMQCurveKeyPair, at path: String) throws {
        try (pair.publicKey + "\n").write(toFile: path + ".public", atomically: true, encoding: .utf8)
        try (pair.secretKey + "\n").write(toFile: path + ".secret", atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path + ".secret")
    }

    /// Socket options of an upstream client holding `pair` (nil: plaintext).
    package func upstreamClientOptions(_ pair: ZMQCurveKeyPair?) -> ZMQSocketOptions { Self.upstreamClientOptions(pair, ledger: curveKeys[.ledger]) }

    package static func upstreamClientOptions(_ pair: ZMQCurveKeyPair?, ledger: ZMQCurveKeyPair?) -> ZMQSocketOptions {
        var options = ZMQSocketOptions()
        if let pair, let ledger {
            options.curve = .client(serverPublicKey: ledger.publicKey, publicKey: pair.publicKey, secretKey: pair.secretKey)
        }
        return options
    }

    package static func ledgerArguments(configPath: String, store: String, redeliverAfterMilliseconds: Int64) -> [String] {
        [
            "--config", configPath, "--store", store,
            "--redeliver-after-ms", String(redeliverAfterMilliseconds),
        ]
    }

    /// Starts a new ledger on the same store and the same addresses (after the old one was
    /// killed), so every connected peer reconnects to it.
    package func restartLedger() async throws {
        let e = ledgerEndpoints
        let pinned = [
            "--intake", e["intake"]!, "--outcomes", e["outcomes"]!, "--outcomes-replay", e["outcomesReplay"]!,
            "--sign-queue", e["signQueue"]!, "--signed-in", e["signedIn"]!, "--signed-out", e["signedOut"]!,
            "--results", e["results"]!, "--ledger-rpc", e["ledgerRPC"]!, "--poll-queue", e["pollQueue"]!, "--admin", e["admin"]!,
        ]
        let ((process, errorFile), _) = try await Self.spawnOffCooperativeThreads(
            "paypipe-ledger",
            PipelineHarness.ledgerArguments(configPath: configPath, store: storeArgument, redeliverAfterMilliseconds: redeliverAfterMilliseconds)
                + pinned, in: directory, index: children.count, waitForLine: "paypipe-ledger ready")
        children[0] = process
        stderrFiles[0] = errorFile
    }

    /// `nice`: started through `nice -n`, as `paypipe up --worker-nice` starts it.
    @discardableResult
    package func startSigner(nice: Int = 0) throws -> ChildProcess {
        try spawn(
            "paypipe-signer",
            [
                "--config", configPath, "--sign-queue", ledgerEndpoints["signQueue"]!, "--signed-in", ledgerEndpoints["signedIn"]!, "--results",
                ledgerEndpoints["results"]!,
            ],
            waitForLine: nil, nice: nice
        ).0
    }

    @discardableResult
    package func startSubmitter(concurrency: Int = 64, backlog: Int? = nil, nice: Int = 0) throws -> ChildProcess {
        let backlogArguments = backlog.map { ["--backlog", String($0)] } ?? []
        return try spawn(
            "paypipe-submitter",
            [
                "--config", configPath, "--concurrency", String(concurrency), "--signed-out", ledgerEndpoints["signedOut"]!, "--results",
                ledgerEndpoints["results"]!,
                "--ledger-rpc", ledgerEndpoints["ledgerRPC"]!,
            ] + backlogArguments,
            waitForLine: nil, nice: nice
        ).0
    }

    @discardableResult
    package func startCallbacks() throws -> ChildProcess {
        try spawn(
            "paypipe-callbacks", ["--config", configPath, "--ledger-rpc", ledgerEndpoints["ledgerRPC"]!], waitForLine: "paypipe-callbacks listening"
        ).0
    }

    @discardableResult
    package func startPoller() throws -> ChildProcess {
        try spawn(
            "paypipe-cleeng-poller",
            [
                "--config", configPath, "--poll-queue", ledgerEndpoints["pollQueue"]!, "--results", ledgerEndpoints["results"]!, "--ledger-rpc",
                ledgerEndpoints["ledgerRPC"]!,
            ], waitForLine: nil
        ).0
    }

    /// POSTs to the callback validator; (status, body).
    package func postCallback(_ path: String, headers: [(String, String)] = [], body: [UInt8]) async -> (Int, String)? {
        let port = callbacksPort
        // The callback validator may ask the in-process sandbox before it answers.
        return await offCooperativeThreads { httpPost(port: port, path: path, headers: headers, body: body) }
    }

    /// `spawn` of a child whose start waits on the store (another ledger): its wait for the
    /// ready line on a thread of its own.
    package func spawnOffCooperativeThreads(
        _ name: String, _ arguments: [String], waitForLine marker: String?
    ) async throws -> (ChildProcess, String?) {
        let ((process, errorFile), line) = try await Self.spawnOffCooperativeThreads(
            name, arguments, in: directory, index: children.count, waitForLine: marker)
        children.append(process)
        stderrFiles.append(errorFile)
        return (process, line)
    }

    package func spawn(_ name: String, _ arguments: [String], waitForLine marker: String?, nice: Int = 0) throws -> (ChildProcess, String?) {
        let ((process, errorFile), line) = try PipelineHarness.spawn(
            name, arguments, in: directory, index: children.count, waitForLine: marker, nice: nice)
        children.append(process)
        stderrFiles.append(errorFile)
        return (process, line)
    }

    /// `spawn`, its wait for the ready line on a thread of its own.
    package static func spawnOffCooperativeThreads(
        _ name: String, _ arguments: [String], in directory: URL, index: Int, waitForLine marker: String?
    ) async throws -> ((ChildProcess, URL), String?) {
        try await offCooperativeThreads {
            Result { try spawn(name, arguments, in: directory, index: index, waitForLine: marker) }
        }.get()
    }

    package static func spawn(
        _ name: String, _ arguments: [String], in directory: URL, index: Int, waitForLine marker: String?, nice: Int = 0
    ) throws -> ((ChildProcess, URL), String?) {
        let executable = PipelineHarness.buildDirectory().appendingPathComponent(name)
        guard FileManager.default.isExecutableFile(atPath: executable.path) else {
            throw HarnessError("\(executable.path) is missing: run `swift build` before `swift test`")
        }
        let errorFile = directory.appendingPathComponent("\(name)-\(index).stderr")
        var environment = ProcessInfo.processInfo.environment
        environment["PAYPIPE_LOG_LEVEL"] = "info"
        let process = try ChildProcess(
            [executable.path] + arguments, environment: environment, stdout: marker == nil ? .discard : .readyLine(),
            stderr: .file(errorFile.path, append: false), nice: nice, readyMarker: marker)
        guard marker != nil else { return ((process, errorFile), nil) }
        switch process.waitForLineBlocking(within: .seconds(20)) {
        case .ready(let line):
            return ((process, errorFile), line)
        case .ended, .timedOut:
            // A child that closed its output is usually exiting: its status is the clue.
            process.waitForExitBlocking(within: .seconds(1))
            let status = process.exitStatus.map { " (exited \($0))" } ?? ""
            process.signal(SIGKILL)
            let log = (try? String(contentsOf: errorFile, encoding: .utf8)) ?? ""
            throw HarnessError("\(name) did not print \(marker ?? "")\(status): \(process.printed) \(log)")
        }
    }

    package func stderr(of index: Int) -> String {
        (try? String(contentsOf: stderrFiles[index], encoding: .utf8)) ?? ""
    }

    /// The index of a child process, for `stderr(of:)`.
    package func index(of process: ChildProcess) -> Int? { children.firstIndex { $0 === process } }

    /// The port a stage logged for its /metrics server.
    package func metricsPort(of process: ChildProcess) -> Int? {
        guard let index = children.firstIndex(where: { $0 === process }) else { return nil }
        let text = stderr(of: index)
        guard let range = text.range(of: #"port=(\d+) \[\w+\] [\w-]+ metrics"#, options: .regularExpression) else { return nil }
        return Int(text[range].dropFirst(5).prefix(while: \.isNumber))
    }

    package func send(_ json: String) async throws { try await sender.send(Array(json.utf8)) }
    package func send(bytes: [UInt8]) async throws { try await sender.send(bytes) }

    /// Collects outcomes until `done` says so or `timeout` passes.
    package func collect(timeout: Duration = .seconds(30), until done: ([Outcome]) -> Bool) async throws -> [Outcome] {
        var outcomes: [Outcome] = []
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        while !done(outcomes), clock.now < deadline {
            let batch = try await self.receiver.nextBatch(timeoutMilliseconds: 200)
            for message in batch ?? [] {
                if let outcome = try? Outcome.parse(message.body) { outcomes.append(outcome) }
            }
        }
        return outcomes
    }

    /// Collects every message the live PUSH sends (outcomes and subscription events, as JSON)
    /// until `done` says so or `timeout` passes.
    package func collectMessages(timeout: Duration = .seconds(30), until done: ([JSONValue]) -> Bool) async throws -> [JSONValue] {
        var messages: [JSONValue] = []
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        while !done(messages), clock.now < deadline {
            let batch = try await self.receiver.nextBatch(timeoutMilliseconds: 200)
            for message in batch ?? [] {
                if let value = try? JSONValue.parse(message.body) { messages.append(value) }
            }
        }
        return messages
    }

    /// POSTs a JSON body to the sandbox (its clock and subscription actions), off Swift's
    /// cooperative threads: the in-process sandbox answers on them, and the call blocks.
    package func sandboxPost(_ path: String, _ body: JSONValue) async -> (Int, String)? {
        let port = sandboxPort
        let bytes = body.bytes
        // Moving the clock waits for every callback it makes, which providers retry.
        return await offCooperativeThreads {
            httpExchange(
                port: port, method: "POST", path: path, headers: [("Content-Type", "application/json")], body: bytes, receiveTimeoutSeconds: 300)
        }
    }

    /// GETs a sandbox path (its ledger), off Swift's cooperative threads as `sandboxPost` does.
    package func sandboxGet(_ path: String, receiveTimeoutSeconds: Int = 60) async -> (Int, String)? {
        let port = sandboxPort
        return await offCooperativeThreads { httpExchange(port: port, method: "GET", path: path, receiveTimeoutSeconds: receiveTimeoutSeconds) }
    }

    /// Runs `body`, then stops every process the harness started, whether `body` threw or not:
    /// a test that fails part-way leaves no stage running.
    package func stopping(after body: (PipelineHarness) async throws -> Void) async throws {
        let result: Result<Void, any Error>
        do {
            try await body(self)
            result = .success(())
        } catch {
            result = .failure(error)
        }
        await shutdown()
        try result.get()
    }

    package func shutdown() async {
        await ChildProcess.stop(children.reversed(), grace: .seconds(10))
        receiver.stop()
        _ = await sender.finish(drainTimeoutMilliseconds: 500)
        await receiver.waitUntilClosed()
        context.terminate()
        await sandbox.shutdown()
        _ = try? await sandboxTask.value
        try? FileManager.default.removeItem(at: directory)
    }
}

package struct HarnessError: Error, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}

/// A loopback port nothing listens on right now, for an address that must be known before the
/// process that binds it starts. It is taken below the kernel's ephemeral range, because a port
/// the kernel handed out could be handed out again, e.g. to a ZeroMQ `tcp://127.0.0.1:*` bind in
/// between. No port is handed out twice in one test process, so harnesses starting side by side
/// never pick the same one before either binds it.
package func freeLoopbackPort() throws -> Int {
    let range =
        (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8))?
        .split(whereSeparator: \.isWhitespace).compactMap { Int($0) } ?? []
    let ephemeralStart = range.first ?? 32768
    let candidates = 10_000..<max(10_001, min(ephemeralStart, 65_536))
    for _ in 0..<200 {
        let port = Int.random(in: candidates)
        guard handedOutPorts.withLock({ $0.insert(port).inserted }) else { continue }
        if try loopbackPortIsFree(port) { return port }
    }
    throw HarnessError("no free loopback port below \(ephemeralStart) after 200 tries")
}

private let handedOutPorts = Mutex<Set<Int>>([])

private func loopbackPortIsFree(_ port: Int) throws -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw HarnessError("socket failed") }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
    }
}

/// Runs blocking work (a socket read, a process wait) on a thread of its own: on a task it would
/// hold one of the few threads every test of the process shares, and tests waiting for their
/// own timers would wait for it.
package func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in Thread.detachNewThread { continuation.resume(returning: body()) } }
}

/// One HTTP/1.1 exchange on a fresh loopback connection (`Connection: close`): (status, body).
/// Reads up to Content-Length, since a server may keep the connection open anyway.
/// `receiveTimeoutSeconds`: how long to wait for the answer (a callback may wait for the ledger).
package func httpExchange(
    port: Int, method: String, path: String, headers: [(String, String)] = [], body: [UInt8] = [], receiveTimeoutSeconds: Int = 10
) -> (Int, String)? {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard connected == 0 else { return nil }
    var timeout = timeval(tv_sec: receiveTimeoutSeconds, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: \(body.count)\r\n"
    for (name, value) in headers { head += "\(name): \(value)\r\n" }
    let request = Array((head + "\r\n").utf8) + body
    var sent = 0
    while sent < request.count {
        let n = request[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
        guard n > 0 else { return nil }
        sent += n
    }
    var response: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    func complete() -> Bool {
        let text = String(decoding: response, as: UTF8.self)
        guard let end = text.range(of: "\r\n\r\n") else { return false }
        let head = text[..<end.lowerBound].lowercased()
        guard let line = head.split(separator: "\r\n").first(where: { $0.hasPrefix("content-length:") }),
            let length = Int(line.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces))
        else { return false }
        return text[end.upperBound...].utf8.count >= length
    }
    while !complete() {
        let n = recv(fd, &buffer, buffer.count, 0)
        if n <= 0 { break }
        response += buffer[0..<n]
    }
    let text = String(decoding: response, as: UTF8.self)
    guard let statusLine = text.split(separator: "\r\n").first, let code = statusLine.split(separator: " ").dropFirst().first.flatMap({ Int($0) }),
        let split = text.range(of: "\r\n\r\n")
    else { return nil }
    return (code, String(text[split.upperBound...]))
}

/// Runs blocking socket work on a thread of its own. On one of Swift's cooperative threads (as
/// many as the machine has cores) it would hold that thread until answered, and the in-process
/// sandbox, which the answer may wait on directly or through a stage that asks it, answers on
/// those same threads: two such calls at once stalled every test in the process.
package func offCooperativeThreads<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        Thread.detachNewThread { continuation.resume(returning: work()) }
    }
}

package func httpPost(port: Int, path: String, headers: [(String, String)], body: [UInt8]) -> (Int, String)? {
    httpExchange(port: port, method: "POST", path: path, headers: headers, body: body)
}

/// GET on a loopback URL, returning the body.
package func httpGet(_ url: String) -> String? {
    guard let parsed = URL(string: url), let port = parsed.port, parsed.host == "127.0.0.1" else { return nil }
    return httpExchange(port: port, method: "GET", path: parsed.path)?.1
}

import Connectors
import Emulators
import Foundation
import Logging
import PaypipeCore
import Sandbox
import StageRuntime
import Supervision
import Synchronization
import TestSupport
import Testing
import ZeroMQ

@testable import NetsEasyEmulation
@testable import PhonePeEmulation

/// Hosts on this machine: one network namespace each, on one bridge, each with its own address
/// and a hosts file that names every ledger and streamer copy, as a headless service's DNS does.
/// Needs root and iproute2; every namespace, link and file is removed by `tearDown`.
final class NamespaceHosts: @unchecked Sendable {
    let tag: String
    let subnet: String
    let count: Int
    let directory: URL
    private(set) var children: [Int: [ChildProcess]] = [:]

    static var available: Bool {
        getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/sbin/ip")
            && ProcessInfo.processInfo.environment["PAYPIPE_SKIP_NETNS"] == nil
    }

    init(count: Int, directory: URL) throws {
        self.count = count
        self.directory = directory
        let random = UInt32.random(in: 0...0xffff)
        tag = "pp" + String(random, radix: 16)
        subnet = "10.\(200 + Int(random % 50)).\(Int(random / 50) % 250)"
        try ip(["link", "add", bridge, "type", "bridge"])
        try ip(["addr", "add", "\(subnet).1/24", "dev", bridge])
        try ip(["link", "set", bridge, "up"])
        for host in 1...count {
            try ip(["netns", "add", name(host)])
            try ip(["link", "add", link(host), "type", "veth", "peer", "name", link(host) + "p"])
            try ip(["link", "set", link(host) + "p", "netns", name(host)])
            try ip(["-n", name(host), "link", "set", link(host) + "p", "name", "eth0"])
            try ip(["-n", name(host), "addr", "add", address(host) + "/24", "dev", "eth0"])
            try ip(["-n", name(host), "link", "set", "eth0", "up"])
            try ip(["-n", name(host), "link", "set", "lo", "up"])
            try ip(["link", "set", link(host), "master", bridge])
            try ip(["link", "set", link(host), "up"])
            try FileManager.default.createDirectory(atPath: "/etc/netns/\(name(host))", withIntermediateDirectories: true)
        }
    }

    var bridge: String { tag + "br" }
    var bridgeAddress: String { subnet + ".1" }
    func name(_ host: Int) -> String { "\(tag)-h\(host)" }
    func link(_ host: Int) -> String { "\(tag)h\(host)" }
    func address(_ host: Int) -> String { "\(subnet).\(10 + host)" }

    private func ip(_ arguments: [String]) throws {
        guard runToEndBlocking("/usr/sbin/ip", arguments) == 0 else { throw HarnessError("ip \(arguments.joined(separator: " ")) failed") }
    }

    /// Every host's hosts file: each name stands for the addresses of the hosts listed for it.
    /// Written in place, since `ip netns exec` bind-mounts the file itself into each process.
    func writeHosts(_ names: [String: [Int]]) throws {
        var text = "127.0.0.1 localhost\n"
        for (name, hosts) in names.sorted(by: { $0.key < $1.key }) {
            for host in hosts { text += "\(address(host)) \(name)\n" }
        }
        for host in 1...count {
            let path = "/etc/netns/\(name(host))/hosts"
            if let handle = FileHandle(forWritingAtPath: path) {
                try handle.truncate(atOffset: 0)
                try handle.write(contentsOf: Data(text.utf8))
                try handle.close()
            } else {
                try text.write(toFile: path, atomically: false, encoding: .utf8)
            }
        }
    }

    /// Starts `executable` on `host`; its output goes to a file named after it, which `waitFor`
    /// reads.
    @discardableResult
    func spawn(_ host: Int, _ executable: String, _ arguments: [String], label: String) throws -> ChildProcess {
        let output = log(label)
        let command = try ChildProcess(
            ["/usr/sbin/ip", "netns", "exec", name(host), executable] + arguments, stdout: .file(output), stderr: .standardOutput)
        children[host, default: []].append(command)
        return command
    }

    func log(_ label: String) -> String { directory.appendingPathComponent("\(label).log").path }

    /// Waits until `label`'s output holds `marker`; its line.
    func waitFor(_ label: String, _ marker: String, within limit: Duration = .seconds(30)) async throws -> String {
        var line: String?
        _ = await eventually(within: limit) {
            let text = (try? String(contentsOfFile: log(label), encoding: .utf8)) ?? ""
            line = text.split(separator: "\n").last(where: { $0.contains(marker) }).map(String.init)
            return line != nil
        }
        guard let line else {
            throw HarnessError("\(label) did not print \(marker): \((try? String(contentsOfFile: log(label), encoding: .utf8))?.suffix(600) ?? "")")
        }
        return line
    }

    /// Kills every process this test started on `host` with -9 and takes its link down: the host
    /// is gone, its peers' connections to it hang rather than close.
    func lose(_ host: Int) throws {
        for child in children[host] ?? [] {
            child.signal(SIGKILL)
            child.waitForExitBlocking()
        }
        children[host] = []
        try ip(["link", "set", link(host), "down"])
    }

    func tearDown() {
        for (_, commands) in children {
            for child in commands {
                child.signal(SIGKILL)
                child.waitForExitBlocking()
            }
        }
        children = [:]
        for host in 1...count {
            // Deleting one end of a pair deletes the other, in the namespace too.
            _ = runToEndBlocking("/usr/sbin/ip", ["link", "del", link(host)])
            _ = runToEndBlocking("/usr/sbin/ip", ["netns", "del", name(host)])
            try? FileManager.default.removeItem(atPath: "/etc/netns/\(name(host))")
        }
        _ = runToEndBlocking("/usr/sbin/ip", ["link", "del", bridge])
    }
}

/// A lost host, proven with real processes in network namespaces: two ledgers on hosts 1 and 2,
/// a PostgreSQL primary on host 4 with its synchronous standby on host 5, signers, submitters,
/// streamers, callbacks and a poller spread over hosts 1 to 3. While orders flow, host 1 is lost
/// (every process killed with -9, its link down), then the primary is killed and the standby
/// promoted 20 s later, as long as a failover manager takes to decide. Every order ends once,
/// with one effect at the provider, the outcome log replays without a gap, and the surviving
/// ledger rides through the failover without a restart (`store.retryWindowMs`). It runs with the PostgreSQL suites (it starts servers of its own), or when sized
/// from the environment. Size from
/// PAYPIPE_HOSTLOSS_ORDERS and PAYPIPE_HOSTLOSS_RATE (bench/fleet/host-loss);
/// PAYPIPE_HOSTLOSS_KEEP keeps its directory (every process's output).
@Suite(
    "Losing a host of a fleet", .serialized,
    .enabled(
        if: NamespaceHosts.available
            && (TestStores.postgres != nil || ProcessInfo.processInfo.environment["PAYPIPE_HOSTLOSS_ORDERS"] != nil)))
struct HostLossTests {
    /// How long the primary is gone before its standby is promoted: well past the few seconds a
    /// ledger once retried, within the default `store.retryWindowMs`.
    static let promotionDelay = Duration.seconds(20)

    @Test func aLostLedgerHostAndAFailedOverPrimaryLoseNothing() async throws {
        let environment = ProcessInfo.processInfo.environment
        let total = environment["PAYPIPE_HOSTLOSS_ORDERS"].flatMap(Int.init) ?? 300
        let rate = environment["PAYPIPE_HOSTLOSS_RATE"].flatMap(Int.init) ?? 60
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("paypipe-hostloss-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let hosts = try NamespaceHosts(count: 5, directory: directory)
        defer {
            // The servers go first, while their links are up: a primary whose standby's link is
            // gone waits for its walsender and outlives the test.
            for server in ["pg-standby", "pg-primary"] {
                _ = runToEndBlocking(PostgresServer.haScript, ["stop", directory.appendingPathComponent(server).path])
            }
            hosts.tearDown()
            if environment["PAYPIPE_HOSTLOSS_KEEP"] == nil { try? FileManager.default.removeItem(at: directory) }
        }
        try await run(hosts, directory: directory, total: total, rate: rate)
    }

    func run(_ hosts: NamespaceHosts, directory: URL, total: Int, rate: Int) async throws {
        let (primary, standby) = (directory.appendingPathComponent("pg-primary").path, directory.appendingPathComponent("pg-standby").path)
        func postgres(_ host: Int, _ arguments: [String]) async throws {
            let status = await runToEndEnvironment(
                PostgresServer.haScript, arguments, environment: ["NETNS": hosts.name(host)], within: .seconds(120))
            try #require(status == 0, "postgres-ha \(arguments.joined(separator: " ")) failed")
        }
        try await postgres(4, ["primary", primary, hosts.address(4)])
        try await postgres(5, ["standby", standby, hosts.address(5), hosts.address(4)])

        // The provider: the sandbox behind a front that counts effects, on the bridge.
        let callbacksHost = 3
        let callbacks = "\(hosts.address(callbacksHost)):8080"
        let credentials = try PaypipeConfig.parse(Array(DemoConfig.text(sandboxURL: "http://127.0.0.1:9", callbacks: callbacks).utf8))
        var logger = Logger(label: "hostloss-sandbox")
        logger.logLevel = .critical
        let sandbox = try SandboxServer(
            configuration: SandboxConfiguration(host: hosts.bridgeAddress, port: 0, outboundAttempts: 1).with {
                $0.phonePe.callbackDelayMilliseconds = 300
                $0.nets.completeCheckoutAfterMilliseconds = 50
            },
            config: credentials, logger: logger)
        let sandboxPort = Mutex<Int?>(nil)
        let sandboxTask = Task { try await sandbox.run { p in sandboxPort.withLock { $0 = p } } }
        defer { sandboxTask.cancel() }
        #expect(await eventually(within: .seconds(10)) { sandboxPort.withLock { $0 } != nil })
        let counting = EffectCountingFront(target: "http://\(hosts.bridgeAddress):\(sandboxPort.withLock { $0 } ?? 0)")
        let (frontURL, frontTask) = try await counting.start(host: hosts.bridgeAddress)
        defer { frontTask.cancel() }

        // One config for every process, as a fleet's ConfigMap: names, not addresses.
        let store = "postgres://paypipe@\(hosts.address(4)):5432,\(hosts.address(5)):5432/paypipe?target_session_attrs=read-write"
        let endpoints = [
            "intake": "tcp://0.0.0.0:5550", "outcomes": "tcp://0.0.0.0:5559", "outcomesReplay": "tcp://0.0.0.0:5558",
            "signQueue": "tcp://ledger:5551", "signedIn": "tcp://streamer:5552", "signedOut": "tcp://streamer:5553",
            "results": "tcp://ledger:5554", "ledgerRPC": "tcp://ledger:5555", "pollQueue": "tcp://ledger:5556", "ledgerMetrics": "0.0.0.0:9090",
        ]
        let configPath = directory.appendingPathComponent("config.json").path
        try DemoConfig.text(
            sandboxURL: frontURL, callbacks: callbacks, endpoints: endpoints,
            timers: ["phonepeCallbackWaitMs": 3000, "httpRequestTimeoutMs": 2000, "leaseMs": 4000]
        ).write(toFile: configPath, atomically: true, encoding: .utf8)
        try hosts.writeHosts(["ledger": [1, 2], "streamer": [1, 2]])

        let build = PipelineHarness.buildDirectory().path
        let ledgerArguments = [
            "--config", configPath, "--store", store, "--no-streamer", "--redeliver-after-ms", "4000",
            "--sign-queue", "tcp://0.0.0.0:5551", "--results", "tcp://0.0.0.0:5554", "--ledger-rpc", "tcp://0.0.0.0:5555",
            "--poll-queue", "tcp://0.0.0.0:5556",
        ]
        var ledgers: [Int: ChildProcess] = [:]
        for host in [1, 2] {
            ledgers[host] = try hosts.spawn(host, build + "/paypipe-ledger", ledgerArguments, label: "ledger-\(host)")
            _ = try await hosts.waitFor("ledger-\(host)", LedgerAddresses.readyMarker)
        }
        for host in [1, 2] {
            try hosts.spawn(
                host, build + "/paypipe-streamer",
                ["--config", configPath, "--signed-in", "tcp://0.0.0.0:5552", "--signed-out", "tcp://0.0.0.0:5553"], label: "streamer-\(host)")
        }
        for host in [1, 2, 3] {
            try hosts.spawn(host, build + "/paypipe-signer", ["--config", configPath], label: "signer-\(host)")
            try hosts.spawn(host, build + "/paypipe-submitter", ["--config", configPath, "--concurrency", "64"], label: "submitter-\(host)")
        }
        try hosts.spawn(callbacksHost, build + "/paypipe-callbacks", ["--config", configPath, "--listen", "0.0.0.0:8080"], label: "callbacks")
        try hosts.spawn(callbacksHost, build + "/paypipe-cleeng-poller", ["--config", configPath], label: "poller")
        _ = try await hosts.waitFor("callbacks", "paypipe-callbacks listening")

        // Upstream, from outside every host: a PUSH to each ledger, live outcomes from ledger 2,
        // replay from ledger 2.
        let context = try ZMQContext()
        defer { context.terminate() }
        func socket(_ type: ZMQSocketType, _ address: String) throws -> ZMQSocket {
            var options = ZMQSocketOptions()
            options.lingerMilliseconds = 0
            let socket = try context.socket(type, options: options)
            try socket.connect(address)
            return socket
        }
        let toLedger = [
            1: try ZMQSender(socket: try socket(.push, "tcp://\(hosts.address(1)):5550")),
            2: try ZMQSender(socket: try socket(.push, "tcp://\(hosts.address(2)):5550")),
        ]
        let live = try ZMQReceiver(socket: try socket(.pull, "tcp://\(hosts.address(2)):5559"))
        defer { live.stop() }

        func send(_ host: Int, _ json: String) async throws { try await toLedger[host]!.send(Array(json.utf8)) }
        // The links close on every way out, before the context is terminated: a sender still
        // open would keep zmq_ctx_term, and with it a thread of the test's pool, waiting forever.
        func closeLinks() async {
            live.stop()
            for sender in toLedger.values { _ = await sender.finish(drainTimeoutMilliseconds: 100) }
        }
        func exercise() async throws {
            let upstream = ChaosTests.Upstream()
            var liveSeqs: [Int64] = []
            var liveBytes: [Int64: [UInt8]] = [:]
            func drain(waiting milliseconds: Int64) async throws {
                for message in try await live.nextBatch(timeoutMilliseconds: milliseconds) ?? [] {
                    if let seq = seq(of: message.body), liveBytes[seq] == nil {
                        liveSeqs.append(seq)
                        liveBytes[seq] = message.body
                    }
                    upstream.take(message.body, now: ContinuousClock.now)
                }
            }

            // The Nets subscription the charges draw on.
            let clock = ContinuousClock()
            try await send(
                2,
                #"{"v":1,"orderId":"chaos-sub","provider":"nets","operation":"createSubscription","amount":9900,"currency":"SEK","params":{"endDate":"2030-12-31T23:59:59+01:00","interval":30,"reference":"chaos-sub"}}"#
            )
            var paymentId: String?, subscriptionId: String?
            let setupDeadline = clock.now + .seconds(60)
            var asked = false
            while subscriptionId == nil, clock.now < setupDeadline {
                for message in try await live.nextBatch(timeoutMilliseconds: 200) ?? [] {
                    guard let outcome = try? Outcome.parse(message.body) else { continue }
                    if outcome.orderId == "chaos-sub" { paymentId = outcome.result?["paymentId"]?.stringValue }
                    if outcome.orderId == "chaos-sub-get" { subscriptionId = outcome.result?["subscriptionId"]?.stringValue }
                }
                if let paymentId, !asked {
                    try await Task.sleep(for: .milliseconds(300))
                    try await send(
                        2,
                        #"{"v":1,"orderId":"chaos-sub-get","provider":"nets","operation":"getSubscription","params":{"paymentId":"\#(paymentId)"}}"#)
                    asked = true
                }
            }
            let subscription = try #require(subscriptionId, "the Nets subscription was not made: \(hosts.directory.path)")

            let started = clock.now
            let sendWindow = Duration.milliseconds(1000 * total / rate)
            let deadline = started + sendWindow + .seconds(180)
            var sent = 0
            var firstSent: [Int: ContinuousClock.Instant] = [:], lastSent: [Int: ContinuousClock.Instant] = [:]
            var hostLost = false, primaryLost = false, promoted = false
            var lossAt = started, primaryLostAt = started, failoverAt = started
            while clock.now < deadline, upstream.ended.count < total {
                let now = clock.now
                let due = min(total, Int(Double(rate) * ChaosTests.seconds(now - started)) + 1)
                while sent < due {
                    try await send(!hostLost && sent % 2 == 0 ? 1 : 2, ChaosTests.order(sent, subscriptionId: subscription))
                    (firstSent[sent], lastSent[sent]) = (now, now)
                    sent += 1
                }
                if !hostLost, now - started >= sendWindow / 3 {
                    // Host 1 is gone: its ledger, streamer, signer and submitter, and its link; the
                    // names stop listing it, as DNS does once a pod is gone.
                    try hosts.lose(1)
                    try hosts.writeHosts(["ledger": [2], "streamer": [2]])
                    hostLost = true
                    lossAt = clock.now
                }
                if hostLost, !primaryLost, now - started >= sendWindow * 2 / 3 {
                    try await postgres(4, ["kill", primary])
                    primaryLost = true
                    primaryLostAt = clock.now
                }
                // Promoted once a failover manager would have given up on the primary; meanwhile
                // the loop goes on taking outcomes and resending.
                if primaryLost, !promoted, now - primaryLostAt >= Self.promotionDelay {
                    try await postgres(5, ["promote", standby])
                    promoted = true
                    failoverAt = clock.now
                }
                for (i, at) in lastSent where now - at > .seconds(8) && upstream.ended["chaos-\(i)"] == nil {
                    try await send(2, ChaosTests.order(i, subscriptionId: subscription))
                    lastSent[i] = now
                }
                lastSent = lastSent.filter { upstream.ended["chaos-\($0.key)"] == nil }
                try await drain(waiting: 50)
            }

            // The whole log, replayed from the surviving ledger.
            let log = try await replayWholeLog(context: context, endpoint: "tcp://\(hosts.address(2)):5558")
            for entry in log { upstream.take(entry.bytes, now: clock.now) }
            for sender in toLedger.values { _ = await sender.finish(drainTimeoutMilliseconds: 100) }

            let ids = (0..<total).map { "chaos-\($0)" }
            let unended = ids.filter { upstream.ended[$0] == nil }
            let differing = ids.filter { Set(upstream.ended[$0] ?? []).count > 1 }
            let wrong = ids.filter { id in upstream.ended[id]?.first.flatMap { try? Outcome.parse($0) }?.status == .failed }
            let arrivals = counting.arrivals.withLock { $0 }
            let repeatedEffects = arrivals.filter { !$0.key.hasPrefix("nets:") && $0.value > 1 }
            let netsEffectsTwice = arrivals.keys.filter { $0.hasPrefix("nets:") && sandbox.ledger.effects($0) > 1 }
            let gaps = zip(log, log.dropFirst()).filter { $1.seq != $0.seq + 1 }.count + (log.first.map { $0.seq == 1 ? 0 : 1 } ?? 1)
            let lastEnd = upstream.endedAt.values.max() ?? clock.now
            let longestWait =
                firstSent.compactMap { i, at in upstream.endedAt["chaos-\(i)"].map { $0 - at } }.max() ?? .zero
            let exitedLedgers = ledgers.filter { $0.key != 1 && $0.value.exitStatus != nil }.map { "\($0.key): \($0.value.exitStatus!)" }
            print(
                """
                hostloss: orders=\(total) rate=\(rate) unended=\(unended.count) differing=\(differing.count) wrong=\(wrong.count) \
                effectsTwice=\(repeatedEffects.count) netsEffectsTwice=\(netsEffectsTwice.count) log=\(log.count) gaps=\(gaps) \
                live=\(liveSeqs.count) exitedLedgers=\(exitedLedgers.count) hostLossToPrimaryLoss=\(primaryLostAt - lossAt) \
                primaryLossToPromotion=\(failoverAt - primaryLostAt) failoverToLastEnd=\(lastEnd > failoverAt ? lastEnd - failoverAt : .zero) \
                longestWait=\(longestWait) total=\(clock.now - started)
                """)
            await counting.http.shutdown()
            #expect(hostLost && primaryLost && promoted)
            // The surviving ledger waited for the promoted standby: still the process started.
            #expect(exitedLedgers.isEmpty, "ledgers that exited: \(exitedLedgers) (\(hosts.directory.path))")
            #expect(unended.isEmpty, "orders without an end: \(unended.prefix(10)) (\(hosts.directory.path))")
            #expect(differing.isEmpty, "orders whose copies differ: \(differing.prefix(10))")
            #expect(wrong.isEmpty, "orders ended failed: \(wrong.prefix(10))")
            #expect(repeatedEffects.isEmpty, "effects requested twice: \(repeatedEffects.prefix(10))")
            #expect(netsEffectsTwice.isEmpty)
            #expect(gaps == 0, "the replayed log has gaps")
            #expect(zip(liveSeqs, liveSeqs.dropFirst()).allSatisfy { $0 < $1 }, "the live outcomes went back in seq")
            let byLogSeq = Dictionary(log.map { ($0.seq, $0.bytes) }, uniquingKeysWith: { first, _ in first })
            #expect(liveBytes.allSatisfy { byLogSeq[$0.key] == $0.value }, "a live outcome differs from the log's")
        }
        do {
            try await exercise()
        } catch {
            await closeLinks()
            throw error
        }
        await closeLinks()
    }
}

extension PostgresServer {
    static var haScript: String { script.replacingOccurrences(of: "/.ci/postgres", with: "/.ci/postgres-ha") }
}

/// `runToEnd` with variables added to the environment.
func runToEndEnvironment(_ path: String, _ arguments: [String], environment: [String: String], within limit: Duration) async -> Int32? {
    await runToEnd("/usr/bin/env", environment.map { "\($0.key)=\($0.value)" } + [path] + arguments, within: limit)
}

import ArgumentParser
import Connectors
import Foundation
import PaypipeCore
import StageRuntime
import Synchronization
import UnixSignals
import ZeroMQ

struct Send: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Push JSON-lines orders to the pipeline and print their outcomes as they arrive.",
        discussion: "Waits until every order has a terminal or pending outcome (or --timeout), then prints a summary per status.")

    @Argument(help: "A file of JSON lines, or - for standard input.") var file: String
    @Option(help: "Intake endpoint (default $PAYPIPE_INTAKE or tcp://127.0.0.1:5550).") var intake: String?
    @Option(help: "Outcomes endpoint (default $PAYPIPE_OUTCOMES or tcp://127.0.0.1:5559).") var outcomes: String?
    @Option(help: "Seconds to wait for outcomes after the last order.") var timeout = 30.0
    @Flag(help: "Print only progress and the summary.") var quiet = false
    @Flag(help: "Wait for every order's terminal outcome (succeeded, failed, rejected), not just pending.") var waitTerminal = false
    @Option(help: "With upstream CURVE: the config naming the ledger's key (default $PAYPIPE_CONFIG).") var config: String?
    @Option(help: "With upstream CURVE: this client's key pair, <path>.public and <path>.secret (paypipe keys generate --upstream).")
    var upstreamKey: String?
    @Flag(help: "Send with a config that names real provider hosts, taking outcomes away from the upstream order system.")
    var allowProduction = false

    func run() async throws {
        let environment = ProcessInfo.processInfo.environment
        if !allowProduction, let path = config ?? environment["PAYPIPE_CONFIG"], !path.isEmpty,
            let hosts = ProductionConfig.providerHosts(inConfigAt: path), !hosts.isEmpty
        {
            StageProcess.fail(
                "\(path) names provider hosts that are not the sandbox (\(hosts.sorted().prefix(3).joined(separator: ", "))): paypipe send is for tests and the sandbox. It reads the live outcomes socket, so against a production pipeline it takes outcomes away from the upstream order system. Pass --allow-production to send anyway."
            )
        }
        let intakeEndpoint = intake ?? environment["PAYPIPE_INTAKE"] ?? "tcp://127.0.0.1:5550"
        let outcomesEndpoint = outcomes ?? environment["PAYPIPE_OUTCOMES"] ?? "tcp://127.0.0.1:5559"
        let data: Data
        if file == "-" {
            data = FileHandle.standardInput.readDataToEndOfFile()
        } else {
            guard let contents = FileManager.default.contents(atPath: file) else { StageProcess.fail("cannot read \(file)") }
            data = contents
        }
        let lines = data.split(separator: UInt8(ascii: "\n")).map { Array($0) }.filter { !$0.allSatisfy { $0 == 32 || $0 == 13 || $0 == 9 } }

        // Orders we expect an outcome for: every line that is a JSON object with a string orderId.
        var expected = Set<String>()
        for line in lines {
            if case .object(let o)? = try? JSONValue.parse(line), let id = o["orderId"]?.stringValue {
                expected.insert("\(o["merchant"]?.stringValue ?? "default")/\(id)")
            }
        }

        let options = UpstreamKey.clientOptions(ZMQSocketOptions(), keyPath: upstreamKey, configPath: config)
        let context = try ZMQContext()
        let pull = try context.socket(.pull, options: options)
        try pull.connect(outcomesEndpoint)
        let push = try context.socket(.push, options: options)
        try push.connect(intakeEndpoint)
        let receiver = try ZMQReceiver(socket: pull)
        let sender = try ZMQSender(socket: push)
        try await Task.sleep(for: .milliseconds(200))  // let both connections come up

        let start = Date()
        let total = lines.count
        let quiet = self.quiet
        let timeout = self.timeout
        let expectedKeys = expected
        let waitTerminal = self.waitTerminal
        let collector = Task { () -> [String: Int] in
            var settled = Set<String>()
            var counts: [String: Int] = [:]
            var lastProgress = Date()
            var lastArrival = Date()
            while settled.count < expectedKeys.count {
                let batch = try await receiver.nextBatch(timeoutMilliseconds: 500)
                guard let batch else { break }
                if batch.isEmpty {
                    if Date().timeIntervalSince(lastArrival) > timeout { break }
                    continue
                }
                lastArrival = Date()
                for message in batch {
                    guard let outcome = try? Outcome.parse(message.body) else { continue }
                    if !quiet { StageProcess.printLine(String(decoding: message.body, as: UTF8.self)) }
                    let key = "\(outcome.merchant)/\(outcome.orderId)"
                    let settles = outcome.status.isTerminal || (outcome.status == .pending && !waitTerminal)
                    if settles, expectedKeys.contains(key), settled.insert(key).inserted {
                        counts[outcome.status.rawValue, default: 0] += 1
                    }
                }
                if total >= 1000, Date().timeIntervalSince(lastProgress) >= 1 {
                    lastProgress = Date()
                    FileHandle.standardError.write(Data("progress: \(settled.count)/\(expectedKeys.count) orders settled\n".utf8))
                }
            }
            counts["no outcome", default: 0] += expectedKeys.count - settled.count
            return counts
        }
        let sending = Task {
            var sent = 0
            for line in lines {
                do { try await sender.send(line) } catch { break }
                sent += 1
            }
            return sent
        }
        let counts = try await collector.value
        let elapsed = Date().timeIntervalSince(start)
        receiver.stop()
        // Delivers what is queued; a send still waiting for the pipeline is released and stops.
        let report = await sender.finish(drainTimeoutMilliseconds: 2000)
        let sent = await sending.value
        await receiver.waitUntilClosed()
        context.terminate()

        let settled = counts.filter { $0.key != "no outcome" }.values.reduce(0, +)
        if sent < total || report.undelivered > 0 {
            FileHandle.standardError.write(
                Data(
                    "paypipe send: only \(sent - report.undelivered) of \(total) frame(s) reached \(intakeEndpoint); is the pipeline up (paypipe up)?\n"
                        .utf8))
        }
        print("---")
        print(
            "sent \(total) frame(s), \(expected.count) order(s) with an orderId; \(settled) settled in \(String(format: "%.2f", elapsed)) s (\(String(format: "%.1f", Double(settled) / max(elapsed, 0.001))) orders/s)"
        )
        for (status, n) in counts.sorted(by: { $0.key < $1.key }) where n > 0 { print("  \(status): \(n)") }
        if settled == 0 && expected.count > 0 { throw ExitCode(2) }
        if counts["no outcome", default: 0] > 0 { throw ExitCode(2) }
    }
}

/// Whether a config sends orders to real providers: `paypipe send` refuses one unless told.
enum ProductionConfig {
    /// The hosts of the provider URLs under `merchants` that are neither loopback nor the
    /// sandbox's service name; nil when the file does not read as JSON.
    static func providerHosts(inConfigAt path: String) -> Set<String>? {
        guard let bytes = readWholeFile(path), let merchants = (try? JSONValue.parse(bytes))?["merchants"] else { return nil }
        var hosts = Set<String>()
        func visit(_ value: JSONValue) {
            switch value {
            case .object(let object):
                for (key, member) in object {
                    if providerURLKeys.contains(key), let text = member.stringValue, let host = host(of: text), !isSandbox(host) {
                        hosts.insert(host)
                    }
                    visit(member)
                }
            case .array(let items): items.forEach(visit)
            default: break
            }
        }
        visit(merchants)
        return hosts
    }

    /// The settings that name where a provider's API is (the rest, callback and webhook URLs,
    /// name paypipe's own callback validators).
    static let providerURLKeys: Set<String> = ["baseURL", "apiURL", "receiptURL", "accountsURL"]

    static func host(of url: String) -> String? {
        guard let scheme = url.range(of: "://"), url.hasPrefix("http") else { return nil }
        let rest = url[scheme.upperBound...]
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        if authority.hasPrefix("[") {
            return authority.firstIndex(of: "]").map { String(authority[authority.index(after: authority.startIndex)..<$0]) }
        }
        return String(authority.prefix { $0 != ":" }).lowercased()
    }

    static func isSandbox(_ host: String) -> Bool {
        host == "localhost" || host == "::1" || host.hasPrefix("127.") || host == "sandbox" || host.hasPrefix("paypipe-sandbox")
    }
}

import ArgumentParser
import HTTPTransport
import PaypipeCore
import StageRuntime
import StageWire
import ZeroMQ

#if canImport(Glibc)
import Glibc
#endif

/// `paypipe subscription`: one subscription's state and history (docs/protocol.md,
/// "Subscription events"), asked of the ledger's replay endpoint, as an order system would.
struct SubscriptionCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "subscription",
        abstract: "Print one subscription's state and its events, from the ledger's replay endpoint.",
        discussion: """
            The subscription is named by its provider and the provider's reference of it (Trust Payments: the first \
            AUTH's transactionReference; Nets: subscriptionId; PhonePe: subscriptionId; Cleeng: <offerId>@<orderId>). \
            Prints a table of its events, or with --json the record as the ledger answers it.
            """)

    @Option(help: "The provider: trustpayments, nets, phonepe or cleeng.") var provider: String
    @Option(help: "The provider's reference of the subscription.") var reference: String
    @Option(help: "The merchant.") var merchant = "default"
    @Flag(help: "Print the record as JSON.") var json = false
    @OptionGroup var connection: ReplayConnection

    init() {}

    func run() async throws {
        let query = OutcomeReplay.SubscriptionQuery(merchant: merchant, provider: Provider(provider), reference: reference)
        let answer = try await connection.ask { try await $0.subscription(query) }
        guard let record = answer else { StageProcess.fail("no \(provider) subscription \(reference) of merchant \(merchant)") }
        StageProcess.writeAll(Array((json ? record.serialized : Self.table(record)).utf8) + [UInt8(ascii: "\n")], to: STDOUT_FILENO)
    }

    /// The record's head line and one line per event.
    static func table(_ record: JSONValue) -> String {
        var lines = [
            "\(cellText(record["provider"])) subscription \(cellText(record["reference"])) of order \(cellText(record["orderId"])): "
                + "\(cellText(record["state"])) (opened \(cellText(record["openedAt"])))",
            "seq      at                        event                   cycle  amount      state",
        ]
        for event in record["events"]?.arrayValue ?? [] {
            let amount = event["amount"].map { "\(cellText($0)) \(cellText(event["currency"]))" } ?? "-"
            lines.append(
                [
                    cellText(event["seq"]).padding(8), cellText(event["at"]).padding(25), cellText(event["type"]).padding(23),
                    cellText(event["cycle"]).padding(6), amount.padding(11), cellText(event["subscription"]?["state"]),
                ].joined(separator: " "))
        }
        return lines.joined(separator: "\n")
    }
}

/// A field of a ledger record as a table cell: text and numbers as they are, anything else "-".
func cellText(_ value: JSONValue?) -> String {
    switch value {
    case .string(let s)?: s
    case .integer(let i)?: String(i)
    default: "-"
    }
}

/// How a command reaches the ledger's replay endpoint, as an order system would.
struct ReplayConnection: ParsableArguments {
    @Option(help: "Replay endpoint (default: endpoints.outcomesReplay of --config, else tcp://127.0.0.1:5558).") var replay: String?
    @Option(help: "Config file to take endpoints.outcomesReplay from; default $PAYPIPE_CONFIG.") var config: String?
    @Option(help: "With upstream CURVE: this client's key pair, <path>.public and <path>.secret (paypipe keys generate --upstream).")
    var upstreamKey: String?

    init() {}

    /// One exchange with the replay endpoint; a failure to reach it ends the command with the reason.
    func ask<Answer>(_ exchange: (OutcomeReplayClient) async throws -> Answer) async throws -> Answer {
        let endpoint = replay ?? configuredEndpoints(config)?.outcomesReplay ?? "tcp://127.0.0.1:5558"
        let context = try ZMQContext()
        defer { context.terminate() }
        let client = try OutcomeReplayClient(
            context: context, endpoint: endpoint, options: UpstreamKey.clientOptions(stageOptions(), keyPath: upstreamKey, configPath: config))
        let answer: Answer
        do {
            answer = try await exchange(client)
        } catch {
            await client.close()
            StageProcess.fail("\(error) (\(endpoint))")
        }
        await client.close()
        return answer
    }
}

/// `paypipe sandbox`: moves the provider sandbox's clock and acts on its subscriptions, for the
/// demo and for trying renewals by hand (docs/testing.md, "The sandbox").
struct SandboxCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sandbox", abstract: "Drive the provider sandbox: move its clock, act on a subscription.",
        subcommands: [Advance.self, Act.self])

    struct Advance: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Move the sandbox's clock on by --days, a day at a time; prints what its providers sent.")
        @Option(help: "Days to move on (1-3660).") var days: Int64
        @Option(help: "The sandbox's URL.") var url = "http://127.0.0.1:9100"

        func run() async throws { try await sandboxPost(url + "/_sandbox/clock", ["advanceDays": .integer(days)]) }
    }

    struct Act: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "One action on one subscription, e.g. trustpayments pay '{\"jwt\":\"…\"}', trustpayments declineNext, phonepe debit.")
        @Argument(help: "The provider.") var provider: String
        @Argument(help: "The action (docs/testing.md lists each provider's).") var action: String
        @Argument(help: "The JSON body, e.g. {\"subscription\":\"57-9-12345678\"}.") var body: String
        @Option(help: "The sandbox's URL.") var url = "http://127.0.0.1:9100"

        func run() async throws {
            guard let json = try? JSONValue.parse(Array(body.utf8)) else { throw ValidationError("the body must be JSON") }
            try await sandboxPost(url + "/_sandbox/subscriptions/\(provider)/\(action)", json)
        }
    }
}

/// POSTs to the sandbox and prints its answer; fails on anything but 200.
func sandboxPost(_ url: String, _ body: JSONValue) async throws {
    let http = ProviderHTTPClient(connectTimeoutMilliseconds: 2000, requestTimeoutMilliseconds: 300_000, maxIdleConnectionsPerHost: 1)
    let result = await http.execute(
        HTTPRequestSpec(method: .POST, url: url, headers: [HTTPHeader("Content-Type", "application/json")], body: body.bytes))
    await http.shutdown()
    switch result {
    case .success(let response) where response.status == 200:
        StageProcess.writeAll(response.body + [UInt8(ascii: "\n")], to: STDOUT_FILENO)
    case .success(let response):
        StageProcess.fail("HTTP \(response.status): \(String(decoding: response.body.prefix(300), as: UTF8.self))")
    case .failure(let failure):
        StageProcess.fail("no answer from the sandbox: \(failure.reason)")
    }
}

extension String {
    func padding(_ width: Int) -> String { count >= width ? self : self + String(repeating: " ", count: width - count) }
}

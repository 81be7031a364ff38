import ArgumentParser
import PaypipeCore
import StageRuntime
import StageWire
import ZeroMQ

#if canImport(Glibc)
import Glibc
#endif

/// `paypipe order show|resolve|recheck KEY`: one order, through the ledger's admin link
/// (docs/operations.md, "Finding and resolving an order").
struct OrderCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "order", abstract: "Show, resolve or re-check one order, through the ledger's admin endpoint.",
        subcommands: [Show.self, Resolve.self, Recheck.self])

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "One order's story: its state and times, dispatches, references, callbacks, every outcome with its seq, and what operators did."
        )
        @Argument(help: "The order: merchant/orderId, or an orderId of --merchant.") var key: String
        @Option(help: "The merchant of an orderId given without one.") var merchant = "default"
        @Flag(help: "Print the record as the ledger answers it, one JSON object.") var json = false
        @OptionGroup var connection: AdminConnection

        func run() async throws {
            let answer = try await connection.ask(.show(orderKey(key, merchant: merchant)))
            guard let story = answer["order"] else { StageProcess.fail(refusal(answer)) }
            printText(json ? story.serialized : OrderStory.text(story))
        }
    }

    struct Resolve: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "End an order in review as you decided; its outcome goes upstream, with who and why in its audit trail.",
            discussion: """
                Only an order in review (unknown NEEDS_REVIEW) can be resolved. Check with the provider first: succeeded means \
                the provider took the money, failed that it did not. The outcome carries "resolution" {by, reason, operatorKey, at}.
                """)
        @Argument(help: "The order: merchant/orderId, or an orderId of --merchant.") var key: String
        @Option(help: "The merchant of an orderId given without one.") var merchant = "default"
        @Option(help: "succeeded or failed.") var status: String
        @Option(help: "Why: what you checked with the provider.") var reason: String
        @Option(help: "Who decides (your name).") var by: String
        @OptionGroup var connection: AdminConnection

        func validate() throws {
            guard status == "succeeded" || status == "failed" else { throw ValidationError("--status must be succeeded or failed") }
            guard !reason.isEmpty, !by.isEmpty else { throw ValidationError("--reason and --by must not be empty") }
        }

        func run() async throws {
            let resolution = AdminRequest.Resolution(status: Outcome.Status(rawValue: status)!, reason: reason, by: by)
            let answer = try await connection.ask(.resolve(orderKey(key, merchant: merchant), resolution))
            guard let outcome = answer["resolved"] else { StageProcess.fail(refusal(answer)) }
            printText(outcome.serialized)
        }
    }

    struct Recheck: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Ask the provider's status call for a pending order, or one in review, now; its answer arrives as the order's outcome.")
        @Argument(help: "The order: merchant/orderId, or an orderId of --merchant.") var key: String
        @Option(help: "The merchant of an orderId given without one.") var merchant = "default"
        @OptionGroup var connection: AdminConnection

        func run() async throws {
            let answer = try await connection.ask(.recheck(orderKey(key, merchant: merchant)))
            guard let rechecking = answer["rechecking"] else { StageProcess.fail(refusal(answer)) }
            printText(rechecking.serialized)
        }
    }
}

/// `paypipe orders list`: orders by state, provider, operation, merchant and age.
struct OrdersCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "orders", abstract: "List orders, through the ledger's admin endpoint.", subcommands: [List.self])

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Orders matching every filter given, oldest first.",
            discussion: "States: open, unknown, pending, review, terminal. --older-than takes 90s, 15m, 2h or 3d.")
        @Option(help: "Only orders in this state.") var state: String?
        @Flag(help: "Only orders in review (the same as --state review).") var review = false
        @Option(help: "Only this merchant's.") var merchant: String?
        @Option(help: "Only this provider's.") var provider: String?
        @Option(help: "Only this operation.") var operation: String?
        @Option(help: "Only orders accepted at least this long ago (90s, 15m, 2h, 3d).") var olderThan: String?
        @Option(help: "At most this many (1-1000).") var limit = 100
        @Flag(help: "Print JSON lines as the ledger answers them.") var json = false
        @OptionGroup var connection: AdminConnection

        func validate() throws {
            if let state, !AdminRequest.states.contains(state) {
                throw ValidationError("--state must be one of \(AdminRequest.states.sorted().joined(separator: ", "))")
            }
            if review, let state, state != "review" { throw ValidationError("--review and --state \(state) contradict each other") }
            if let olderThan, Self.milliseconds(olderThan) == nil { throw ValidationError("--older-than must look like 90s, 15m, 2h or 3d") }
            guard (1...AdminRequest.maxListLimit).contains(limit) else { throw ValidationError("--limit must be 1 to 1000") }
        }

        func run() async throws {
            let filter = AdminRequest.OrderFilter(
                state: review ? "review" : state, merchant: merchant, provider: provider, operation: operation,
                olderThanMilliseconds: olderThan.flatMap(Self.milliseconds), limit: limit)
            let answer = try await connection.ask(.list(filter))
            guard let orders = answer["orders"]?.arrayValue else { StageProcess.fail(refusal(answer)) }
            let lines = json ? orders.map(\.serialized) : [Self.header] + orders.map(Self.line)
            printText(lines.joined(separator: "\n"))
        }

        static func milliseconds(_ text: String) -> Int64? {
            guard let unit = text.last, let value = Int64(text.dropLast()), value >= 0 else { return nil }
            let scale: Int64? =
                switch unit {
                case "s": 1000
                case "m": 60_000
                case "h": 3_600_000
                case "d": 86_400_000
                default: nil
                }
            return scale.map { value * $0 }
        }

        static let header = "merchant/orderId                                   provider  operation           state     age      status     code"

        static func line(_ order: JSONValue) -> String {
            [
                "\(cellText(order["merchant"]))/\(cellText(order["orderId"]))".padding(50), cellText(order["provider"]).padding(9),
                cellText(order["operation"]).padding(19), cellText(order["state"]).padding(9),
                (order["ageSeconds"]?.integerValue.map(ageText) ?? "-").padding(8), cellText(order["status"]).padding(10), cellText(order["code"]),
            ].joined(separator: " ")
        }
    }
}

/// How a command reaches the ledger's admin endpoint.
struct AdminConnection: ParsableArguments {
    @Option(help: "Admin endpoint (default: endpoints.admin of --config, else tcp://127.0.0.1:5557).") var admin: String?
    @Option(help: "Config file to take endpoints.admin and the ledger's CURVE key from; default $PAYPIPE_CONFIG.") var config: String?
    @Option(help: "With CURVE: your operator key pair, <path>.public and <path>.secret (paypipe keys generate --admin NAME).")
    var adminKey: String?
    @Option(
        help:
            "With --admin-key: the ledger's public key file (ledger.public) instead of --config, for an operator outside the fleet (kubectl port-forward)."
    )
    var ledgerPublicKey: String?

    init() {}

    func validate() throws {
        if ledgerPublicKey != nil, adminKey == nil { throw ValidationError("--ledger-public-key goes with --admin-key") }
    }

    func ask(_ request: AdminRequest) async throws -> JSONValue {
        // The ledger's public key file stands in for the whole config: an operator outside the
        // fleet has neither its merchants nor its files, only the endpoint and the two keys.
        let loaded = ledgerPublicKey == nil ? configuredConfig(config) : nil
        let endpoint = admin ?? loaded?.endpoints.admin ?? "tcp://127.0.0.1:5557"
        var options = stageOptions()
        if let adminKey {
            let key: UpstreamKey
            do { key = try UpstreamKey.load(adminKey) } catch { StageProcess.fail("bad admin key: \(error)") }
            let ledgerKey: String
            if let ledgerPublicKey {
                do { ledgerKey = try UpstreamKey.readKey(ledgerPublicKey) } catch { StageProcess.fail("bad ledger public key: \(error)") }
            } else {
                guard let curve = loaded?.curve else {
                    StageProcess.fail(
                        "--admin-key needs --config (or PAYPIPE_CONFIG) with a curve section, or --ledger-public-key: the ledger's public key")
                }
                ledgerKey = curve.publicKey(of: .ledger)
            }
            options.curve = .client(serverPublicKey: ledgerKey, publicKey: key.publicKey, secretKey: key.secretKey)
        } else if loaded?.curve != nil {
            StageProcess.fail("this config turns CURVE on: the admin endpoint admits only the keys on curve.admins; pass --admin-key")
        }
        let context = try ZMQContext()
        defer { context.terminate() }
        let client = try AdminClient(context: context, endpoint: endpoint, options: options)
        let answer: JSONValue
        do {
            answer = try await client.ask(request)
        } catch {
            await client.close()
            StageProcess.fail("\(error) (\(endpoint))")
        }
        await client.close()
        return answer
    }
}

/// `merchant/orderId`, or an orderId of `merchant`.
func orderKey(_ text: String, merchant: String) -> OrderKey {
    guard let slash = text.firstIndex(of: "/") else { return OrderKey(merchant: merchant, orderId: text) }
    return OrderKey(merchant: String(text[..<slash]), orderId: String(text[text.index(after: slash)...]))
}

func refusal(_ answer: JSONValue) -> String { "the ledger refused: \(answer["error"]?.stringValue ?? answer.serialized)" }

func printText(_ text: String) { StageProcess.writeAll(Array((text + "\n").utf8), to: STDOUT_FILENO) }

func ageText(_ seconds: Int64) -> String {
    switch seconds {
    case ..<120: "\(seconds)s"
    case ..<7200: "\(seconds / 60)m"
    case ..<172_800: "\(seconds / 3600)h"
    default: "\(seconds / 86400)d"
    }
}

/// `paypipe order show`'s text: the record, section by section.
enum OrderStory {
    static func text(_ story: JSONValue) -> String {
        var lines = [
            "\(cellText(story["merchant"]))/\(cellText(story["orderId"]))  \(cellText(story["provider"])) \(cellText(story["operation"]))  state: \(cellText(story["state"]))"
        ]
        let times = story["times"]
        for (label, name) in [
            ("accepted", "acceptedAt"), ("last dispatched", "lastDispatchedAt"), ("pending since", "pendingAt"), ("ended", "endedAt"),
            ("corrected", "correctedAt"),
        ] {
            if let at = times?[name]?.stringValue { lines.append("  \(label.padding(16)) \(at)") }
        }
        let dispatches = story["dispatches"]
        lines.append(
            "  dispatches       generation \(cellText(dispatches?["generation"])), claimed \(cellText(dispatches?["claimed"])) times, held generation \(cellText(dispatches?["claimedGeneration"])), lease until \(cellText(dispatches?["leaseUntil"]))"
        )
        for reference in story["references"]?.arrayValue ?? [] {
            lines.append("  reference        \(cellText(reference["provider"])) \(cellText(reference["reference"]))")
        }
        lines.append("  order            \(story["order"]?.serialized ?? "-")")
        if let refund = story["refund"] {
            lines.append(
                "  refund of        \(cellText(refund["refundOf"])) capture \(cellText(refund["capture"])): \(cellText(refund["amount"])) \(cellText(refund["currency"]))"
            )
        }
        if let refunds = story["refunds"] {
            lines.append("  refunded         \(cellText(refunds["refunded"])) (succeeded refunds)")
            for refund in refunds["orders"]?.arrayValue ?? [] {
                lines.append(
                    "    \(cellText(refund["orderId"])) capture \(cellText(refund["capture"])): \(cellText(refund["amount"])) \(cellText(refund["currency"])) \(cellText(refund["status"]))"
                )
            }
        }
        lines.append("outcomes (seq, logged at, outcome):")
        for entry in story["outcomes"]?.arrayValue ?? [] {
            lines.append("  \(cellText(entry["seq"]).padding(8)) \(cellText(entry["loggedAt"]))  \(entry["outcome"]?.serialized ?? "-")")
        }
        lines.append("callbacks:")
        for callback in story["callbacks"]?.arrayValue ?? [] { lines.append("  \(cellText(callback["at"]))  \(cellText(callback["event"]))") }
        lines.append("operator actions:")
        for action in story["audit"]?.arrayValue ?? [] {
            lines.append(
                "  \(cellText(action["at"]))  \(cellText(action["action"])) by \(cellText(action["by"])) (key \(cellText(action["operatorKey"]))): \(cellText(action["reason"])) \(action["detail"].map { $0 == .null ? "" : $0.serialized } ?? "")"
            )
        }
        return lines.joined(separator: "\n")
    }
}

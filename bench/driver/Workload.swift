import BenchSupport
import Foundation
import PaypipeCore
import StageRuntime

/// An order with its orderId cut out: `parts.joined(separator: orderId)` is the frame.
struct OrderTemplate: Sendable {
    /// provider/operation (the example's orderId), e.g. "viva/sale (demo-viva-1)".
    let label: String
    let provider: String
    let operation: String
    let parts: [[UInt8]]

    init(order: [String: JSONValue]) throws {
        guard let provider = order["provider"]?.stringValue, let operation = order["operation"]?.stringValue else {
            throw BenchError("an example order without provider/operation")
        }
        self.provider = provider
        self.operation = operation
        label = "\(provider)/\(operation) (\(order["orderId"]?.stringValue ?? "?"))"
        var order = order
        let placeholder = "PAYPIPEBENCHORDERID"
        order["orderId"] = .string(placeholder)
        let text = JSONValue.object(order).serialized
        parts = text.components(separatedBy: placeholder).map { Array($0.utf8) }
    }

    /// Writes the frame for `orderId` into `buffer` (reused between orders).
    func frame(orderId: [UInt8], into buffer: inout [UInt8]) {
        buffer.removeAll(keepingCapacity: true)
        for (index, part) in parts.enumerated() {
            if index > 0 { buffer.append(contentsOf: orderId) }
            buffer.append(contentsOf: part)
        }
    }
}

enum Workload: String, Codable, Sendable {
    case w1 = "W1", w2 = "W2", w3 = "W3"
}

/// The example orders (examples/orders.jsonl) as templates, in file order.
func loadExampleTemplates(path: String) throws -> [OrderTemplate] {
    guard let data = FileManager.default.contents(atPath: path) else {
        throw BenchError("cannot read \(path) (run from the repository root or pass --examples)")
    }
    var templates: [OrderTemplate] = []
    for line in data.split(separator: UInt8(ascii: "\n")) where !line.allSatisfy({ $0 == 32 || $0 == 9 || $0 == 13 }) {
        guard case .object(let order) = try JSONValue.parse(line) else { throw BenchError("\(path): a line that is not a JSON object") }
        templates.append(try OrderTemplate(order: order))
    }
    return templates
}

/// The W1/W2 order: the example file's PhonePe authInit.
func phonePeTemplate(_ templates: [OrderTemplate]) throws -> OrderTemplate {
    guard let t = templates.first(where: { $0.provider == "phonepe" && $0.operation == "authInit" }) else {
        throw BenchError("the examples have no phonepe authInit order")
    }
    return t
}

/// Endpoints of one scenario's pipeline, on ports nobody else uses.
struct BenchEndpoints: Codable, Sendable {
    var intake, outcomes, signQueue, signedIn, signedOut, results, ledgerRPC, pollQueue, outcomesReplay: String
    var callbacks: String
    var sandboxPort: Int

    /// The ledger's addresses on ports the kernel picks as it binds (`*`), read back from its
    /// ready line (`bound(from:)`): ports picked here in advance could be taken in the meantime,
    /// as the ledger's own metrics port once was ("Address already in use").
    static func allocate() throws -> BenchEndpoints {
        let p = try freePorts(2)
        let any = "tcp://127.0.0.1:*"
        return BenchEndpoints(
            intake: any, outcomes: any, signQueue: any, signedIn: any, signedOut: any, results: any, ledgerRPC: any, pollQueue: any,
            outcomesReplay: any, callbacks: "127.0.0.1:\(p[0])", sandboxPort: p[1])
    }

    /// The same with the addresses the ledger printed in its ready line
    /// (`paypipe-ledger ready intake=tcp://… outcomes=tcp://… …`).
    func bound(from readyLine: String) throws -> BenchEndpoints {
        var printed: [String: String] = [:]
        for part in readyLine.split(separator: " ") {
            let pair = part.split(separator: "=", maxSplits: 1)
            if pair.count == 2 { printed[String(pair[0])] = String(pair[1]) }
        }
        func address(_ name: String) throws -> String {
            guard let value = printed[name], value.hasPrefix("tcp://"), !value.hasSuffix(":*") else {
                throw BenchError("the ledger's ready line names no bound \(name): \(readyLine)")
            }
            return value
        }
        var bound = self
        bound.intake = try address("intake")
        bound.outcomes = try address("outcomes")
        bound.signQueue = try address("signQueue")
        bound.signedIn = try address("signedIn")
        bound.signedOut = try address("signedOut")
        bound.results = try address("results")
        bound.ledgerRPC = try address("ledgerRPC")
        bound.pollQueue = try address("pollQueue")
        bound.outcomesReplay = try address("outcomesReplay")
        return bound
    }
}

/// The pipeline config of a scenario: the demo credentials (the sandbox reads the same file, so
/// both sides agree), every provider at the sandbox or at `providerURL`, and the scenario's
/// own endpoints.
func configText(endpoints e: BenchEndpoints, providerURL: String?) -> String {
    DemoConfig.text(
        sandboxURL: "http://127.0.0.1:\(e.sandboxPort)", callbacks: e.callbacks, providerURL: providerURL,
        endpoints: [
            "intake": e.intake, "outcomes": e.outcomes, "signQueue": e.signQueue, "signedIn": e.signedIn, "signedOut": e.signedOut,
            "results": e.results, "ledgerRPC": e.ledgerRPC, "pollQueue": e.pollQueue, "outcomesReplay": e.outcomesReplay,
            "ledgerMetrics": "127.0.0.1:0",
        ])
}

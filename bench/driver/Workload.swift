import BenchSupport
import Connectors
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

/// What one scenario's pipeline listens on besides the ledger: the sandbox and the callback
/// validator, on free ports picked here. The ledger binds on ports the kernel picks (`*`), read
/// back from its ready line (`LedgerAddresses`): ports picked here in advance could be taken in
/// the meantime ("Address already in use").
struct BenchEndpoints: Codable, Sendable {
    var callbacks: String
    var sandboxPort: Int

    static func allocate() throws -> BenchEndpoints {
        let p = try freePorts(2)
        return BenchEndpoints(callbacks: "127.0.0.1:\(p[0])", sandboxPort: p[1])
    }
}

/// The pipeline config of a scenario: the demo credentials (the sandbox reads the same file, so
/// both sides agree), every provider at the sandbox or at `providerURL`, the scenario's own
/// endpoints, and every address the ledger binds on a port the kernel picks.
func configText(endpoints e: BenchEndpoints, providerURL: String?, otlpEndpoint: String? = nil, sampleRatio: Double = 1) -> String {
    let any = "tcp://127.0.0.1:*"
    let text = DemoConfig.text(
        sandboxURL: "http://127.0.0.1:\(e.sandboxPort)", callbacks: e.callbacks, providerURL: providerURL,
        endpoints: [
            "intake": any, "outcomes": any, "signQueue": any, "signedIn": any, "signedOut": any, "results": any, "ledgerRPC": any,
            "pollQueue": any, "outcomesReplay": any, "admin": any,
            "ledgerMetrics": "127.0.0.1:0",
        ])
    guard let otlpEndpoint, case .object(var document)? = try? JSONValue.parse(Array(text.utf8)) else { return text }
    document["tracing"] = ["otlpEndpoint": .string(otlpEndpoint), "sampleRatio": .fraction(sampleRatio)]
    return JSONValue.object(document).serialized
}

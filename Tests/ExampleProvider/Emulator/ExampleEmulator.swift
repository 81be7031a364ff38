import ExampleConnector
import Foundation
import PaypipeCore
import Sandbox
import Synchronization

/// The example provider under `/example`, for the sandbox:
/// - `POST /charges` (Bearer API key, `Idempotency-Key`, `{"reference","amount","currency","note"}`)
///   creates a charge once per key and answers `{"id","status"}` again for a repeated key. The
///   note decides it: "decline" is declined, "async" and "polled" are pending, anything else
///   succeeds.
/// - `GET /charges?idempotencyKey=…` (Bearer publishable key) reads a charge. A "polled" charge
///   succeeds on its `example.decideAfterPolls`-th read (`--provider-option`, default 2); an
///   "async" one stays pending (its webhook is the merchant's business).
public final class ExampleEmulator: ProviderEmulator {
    public static let provider = Provider.example

    struct Charge: Sendable {
        var merchant: String
        var id: String
        var status: String
        var note: String
        var reads = 0
    }

    let merchants: [(name: String, config: ExampleConfig)]
    /// Idempotency key → charge.
    let charges = Mutex<[String: Charge]>([:])

    public init(config: PaypipeConfig) {
        merchants = SandboxMerchants.of(ExampleConfig.self, in: config)
    }

    public func ledgerKey(_ request: HTTPRequestSpec) -> SandboxLedgerKey {
        .now(request.method == .POST ? request.header("Idempotency-Key") : nil)
    }

    public func handle(_ request: HTTPRequestSpec, context: SandboxContext) async -> HTTPResponseSpec {
        let path = request.url.split(separator: "?", maxSplits: 1).first.map(String.init) ?? ""
        guard path == "/charges" else { return SandboxContext.json(404, ["error": "no such route"]) }
        switch request.method {
        case .POST: return create(request, context: context)
        case .GET: return read(request, context: context)
        default: return SandboxContext.json(405, ["error": "use POST or GET"])
        }
    }

    func create(_ request: HTTPRequestSpec, context: SandboxContext) -> HTTPResponseSpec {
        guard let merchant = merchant(bearer: request.header("Authorization"), key: { $0.apiKey.reveal() }) else {
            return SandboxContext.json(401, ["error": "unknown API key"])
        }
        guard let key = request.header("Idempotency-Key"), !key.isEmpty else {
            return SandboxContext.json(400, ["error": "Idempotency-Key is required"])
        }
        guard case .object(let body)? = try? JSONValue.parse(request.body), let amount = body["amount"]?.integerValue, amount > 0,
            body["currency"]?.stringValue?.count == 3, body["reference"]?.stringValue?.isEmpty == false
        else { return SandboxContext.json(400, ["error": "reference, a positive amount and a currency are required"]) }
        let note = body["note"]?.stringValue ?? ""
        let (charge, created) = charges.withLock { charges -> (Charge, Bool) in
            if let existing = charges[key] { return (existing, false) }
            let status = note == "decline" ? "declined" : (note == "async" || note == "polled") ? "pending" : "succeeded"
            let charge = Charge(merchant: merchant, id: "ch_" + UUID().uuidString.prefix(12).lowercased(), status: status, note: note)
            charges[key] = charge
            return (charge, true)
        }
        if created { context.ledger.tookEffect("example:" + key.prefix(128)) }
        return SandboxContext.json(created ? 201 : 200, ["id": .string(charge.id), "status": .string(charge.status)])
    }

    func read(_ request: HTTPRequestSpec, context: SandboxContext) -> HTTPResponseSpec {
        guard let merchant = merchant(bearer: request.header("Authorization"), key: { $0.publishableKey }) else {
            return SandboxContext.json(401, ["error": "unknown publishable key"])
        }
        let query = request.url.split(separator: "?", maxSplits: 1).dropFirst().first.map(String.init)
        guard let key = SandboxContext.queryParameters(query)["idempotencyKey"] else {
            return SandboxContext.json(400, ["error": "idempotencyKey is required"])
        }
        let decideAfter = context.option(.example, "decideAfterPolls").flatMap(Int.init) ?? 2
        let charge = charges.withLock { charges -> Charge? in
            guard var charge = charges[key], charge.merchant == merchant else { return nil }
            charge.reads += 1
            if charge.status == "pending", charge.note == "polled", charge.reads >= decideAfter { charge.status = "succeeded" }
            charges[key] = charge
            return charge
        }
        guard let charge else { return SandboxContext.json(404, ["error": "no such charge"]) }
        return SandboxContext.json(200, ["id": .string(charge.id), "status": .string(charge.status)])
    }

    /// The merchant whose key (its API key or its publishable key) the Bearer header carries.
    func merchant(bearer header: String?, key: (ExampleConfig) -> String) -> String? {
        guard let header, header.hasPrefix("Bearer ") else { return nil }
        let presented = Array(header.dropFirst(7).utf8)
        return merchants.first { ConstantTime.equals(presented, Array(key($0.config).utf8)) }?.name
    }
}

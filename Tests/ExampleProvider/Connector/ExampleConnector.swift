import Crypto
import PaypipeCore

extension Provider {
    /// A made-up provider that exists only in the tests.
    public static let example = Provider("example")
}

extension Operation {
    public static let exampleCharge = Operation(.example, "charge")
}

/// A made-up sixth provider, added the way docs/architecture.md "Adding a provider" says: this
/// folder (connector, config section, polling, sandbox emulator) and one registry line. It takes
/// `POST {baseURL}/charges` with an `Idempotency-Key` and a Bearer key, answers `succeeded`,
/// `declined` or `pending`; a pending charge is polled (`ExampleConnector+Polling.swift`) or
/// confirmed first by a webhook signed `X-Example-Signature: hex(HMAC-SHA256(webhookSecret, body))`.
public struct ExampleConnector: ProviderConnector {
    public static let provider = Provider.example
    public static let operations = [OperationSpec(.exampleCharge, movesMoney: true)]
    public static let settingsSection: any MerchantSection.Type = ExampleConfig.self

    let config: PaypipeConfig

    public init(config: PaypipeConfig) async { self.config = config }

    /// The provider's idempotency key, derived from (merchant, orderId) so a redelivery is harmless.
    public static func idempotencyKey(_ key: OrderKey) -> String {
        "ex-" + Digest.sha256Hex(Array("\(key.merchant)\u{0}\(key.orderId)".utf8)).prefix(32)
    }

    public func sign(_ order: Order, purpose: DispatchPurpose, nowSeconds: Int64) throws(Rejection) -> Signed<NoContext> {
        let settings = try config.merchant(order.merchant).require(\.example, .example)
        guard let note = order.params["note"] else { throw .missingParam("note") }
        guard case .string(let text) = note, text.unicodeScalars.count <= 64 else {
            throw .invalidParam("note", "must be a string of at most 64 characters")
        }
        if let unknown = order.params.keys.first(where: { $0 != "note" }) {
            throw Rejection(.unknownField, field: "params.\(unknown)", "params.\(unknown) is not a param of example charge (allowed: note)")
        }
        let body: JSONValue = [
            "reference": .string(order.orderId), "amount": .integer(order.amount ?? 0), "currency": .string(order.currency ?? ""),
            "note": .string(text),
        ]
        let request = HTTPRequestSpec(
            method: .POST, url: settings.baseURL + "/charges",
            headers: [
                HTTPHeader("Authorization", "Bearer " + settings.apiKey.reveal()),
                HTTPHeader("Idempotency-Key", Self.idempotencyKey(order.key)), HTTPHeader("Content-Type", "application/json"),
            ],
            body: body.bytes)
        return .request(SignedRequest(request: request))
    }

    public func read(_ response: HTTPResponseSpec, to current: HTTPRequestSpec, in exchange: Exchange<NoContext>) -> ProviderReading {
        if response.status >= 500 { return .verdict(.retry(reason: "HTTP \(response.status)")) }
        guard response.status == 200 || response.status == 201, let reading = read(charge: response.body) else {
            return .verdict(.failed(code: .exampleBadResponse, message: "HTTP \(response.status)"))
        }
        return reading
    }

    /// A charge as the provider describes it: `{"id", "status"}`.
    func read(charge body: [UInt8]) -> ProviderReading? {
        guard case .object(let charge)? = try? JSONValue.parse(body), let id = charge["id"]?.stringValue,
            let status = charge["status"]?.stringValue
        else { return nil }
        switch status {
        case "succeeded": return .verdict(.succeeded(["chargeId": .string(id)]))
        case "pending": return .verdict(.pending(["chargeId": .string(id)]))
        default: return .verdict(.failed(code: .exampleDeclined, message: "the charge was \(status)"))
        }
    }

    public var callbackRoutes: [CallbackRoute] {
        [
            CallbackRoute(path: "/callbacks/example", label: "example", headers: ["X-Example-Signature"]) {
                request, orders throws(CallbackRejection) in
                try await webhook(request, orders: orders)
            }
        ]
    }

    func webhook(_ request: CallbackRequest, orders: any CallbackOrderLookup) async throws(CallbackRejection) -> CallbackDecision {
        let signature = request.header("X-Example-Signature") ?? ""
        let merchant = config.merchants.sorted { $0.key < $1.key }.first { _, merchant in
            guard let secret = merchant.example?.webhookSecret, !secret.isEmpty else { return false }
            let expected = HMAC<SHA256>.authenticationCode(for: request.body, using: SymmetricKey(data: Array(secret.reveal().utf8)))
            return ConstantTime.equals(Array(signature.utf8), Array(Digest.hex(Array(expected)).utf8))
        }?.key
        guard let merchant else { throw CallbackRejection(status: 401, code: .badSignature, "X-Example-Signature does not verify") }
        guard case .object(let body)? = try? JSONValue.parse(request.body), let chargeId = body["chargeId"]?.stringValue,
            let status = body["status"]?.stringValue
        else { throw CallbackRejection(status: 400, code: .malformed, "the body needs chargeId and status") }
        let order = try await orders.order(reference: chargeId, provider: .example, merchant: merchant)
        let verdict: ProviderVerdict =
            status == "succeeded" ? .succeeded(["chargeId": .string(chargeId)]) : .failed(code: .exampleDeclined, message: "the charge was \(status)")
        return CallbackDecision(order: order, event: "\(chargeId)|\(status)", verdict: verdict)
    }

    public func callbackReferences(in outcome: Outcome) -> [String] {
        outcome.result?["chargeId"]?.stringValue.map { [$0] } ?? []
    }
}

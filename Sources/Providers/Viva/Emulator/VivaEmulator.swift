import Foundation
import PaypipeCore
import Sandbox
import Synchronization
import Viva

/// Viva under `/viva`:
/// - `POST /sale` with `{"uri": "vivapayclient://pay/v1?...", "decline"?: true}` stands in for
///   the Viva app (an inter-app call): the sale URL is read as the app would
///   (`VivaSandbox.readSale`), the transaction is recorded, and the answer is
///   `{"callback": "<callback URI the app would open>"}`, or 400 naming what is wrong with the URL.
/// - `POST /connect/token` (OAuth2 client credentials, HTTP Basic) and
///   `GET /checkout/v2/transactions/{transactionId}` (bearer) stand in for Viva's accounts and
///   API hosts, answering only for sales this sandbox recorded under the token's merchant.
package final class VivaEmulator: ProviderEmulator {
    package static let provider = Provider.viva

    package static let salePath = "/sale"
    package static let tokenPath = "/connect/token"
    package static let transactionsPrefix = "/checkout/v2/transactions/"
    package static let tokenLifetimeSeconds: Int64 = 3600

    package struct Merchant: Sendable {
        let name: String
        let config: VivaConfig
    }

    package struct Recorded: Sendable {
        var merchantKey: String
        var statusId: String
        var amount: Int64
        var clientTransactionId: String
    }

    package struct State: Sendable {
        /// Access token → the merchant it was issued to and when it expires (epoch seconds).
        var tokens: [String: (merchant: Int, expires: Int64)] = [:]
        var transactions: [String: Recorded] = [:]
        var tokensIssued = 0
    }

    package let merchants: [Merchant]
    package let state = Mutex(State())

    package convenience init(config: PaypipeConfig) {
        self.init(merchants: SandboxMerchants.of(VivaConfig.self, in: config))
    }

    package init(merchants: [(name: String, config: VivaConfig)]) {
        self.merchants = merchants.map { Merchant(name: $0.name, config: $0.config) }
    }

    package var tokensIssued: Int { state.withLock { $0.tokensIssued } }

    /// Records a sale as Viva would after the app ran it (also a hook for tests).
    package func record(transactionId: String, merchantKey: String, statusId: String, amount: Int64, clientTransactionId: String) {
        state.withLock {
            $0.transactions[transactionId] = Recorded(
                merchantKey: merchantKey, statusId: statusId, amount: amount, clientTransactionId: clientTransactionId)
        }
    }

    package func handle(_ request: HTTPRequestSpec, context: SandboxContext) async -> HTTPResponseSpec { handle(request) }

    package func handle(_ request: HTTPRequestSpec) -> HTTPResponseSpec {
        if request.url == Self.salePath {
            guard request.method == .POST else { return SandboxContext.json(405, ["error": "use POST"]) }
            return sale(request)
        }
        if request.url == Self.tokenPath {
            guard request.method == .POST else { return SandboxContext.json(405, ["error": "use POST"]) }
            return token(request)
        }
        if request.url.hasPrefix(Self.transactionsPrefix) {
            guard request.method == .GET else { return SandboxContext.json(405, ["error": "use GET"]) }
            return transaction(String(request.url.dropFirst(Self.transactionsPrefix.count)), request)
        }
        return SandboxContext.json(404, ["error": "no such Viva route"])
    }

    package func sale(_ request: HTTPRequestSpec) -> HTTPResponseSpec {
        let body = try? JSONValue.parse(request.body)
        guard let uri = body?["uri"]?.stringValue else {
            return SandboxContext.json(400, ["error": "body must be {\"uri\": \"<sale request URL>\"}"])
        }
        let sale: VivaSale
        do {
            sale = try VivaSandbox.readSale(uri)
        } catch {
            return SandboxContext.json(400, ["error": .string(String(describing: error))])
        }
        let declined = body?["decline"]?.boolValue == true
        let result = declined ? VivaSandbox.declined(sale) : VivaSandbox.approved(sale)
        if let transactionId = result.transactionId {
            record(
                transactionId: transactionId, merchantKey: sale.merchantKey, statusId: declined ? "E" : "F", amount: sale.amount,
                clientTransactionId: sale.clientTransactionId)
        }
        return SandboxContext.json(200, ["callback": .string(result.uri)])
    }

    /// Client credentials in HTTP Basic, checked against every merchant with API credentials.
    package func token(_ request: HTTPRequestSpec) -> HTTPResponseSpec {
        let form = String(decoding: request.body, as: UTF8.self)
        guard form.split(separator: "&").contains("grant_type=client_credentials") else {
            return SandboxContext.json(400, ["error": "unsupported_grant_type"])
        }
        guard let (clientId, secret) = Self.basicCredentials(request.header("Authorization")),
            let index = merchants.firstIndex(where: { merchant in
                guard let api = merchant.config.api else { return false }
                return api.clientId == clientId && Self.sameBytes(Array(secret.utf8), Array(api.clientSecret.reveal().utf8))
            })
        else {
            return SandboxContext.json(401, ["error": "invalid_client"])
        }
        let token = "viva-sandbox-" + UUID().uuidString
        let expires = SandboxContext.epochSeconds() + Self.tokenLifetimeSeconds
        state.withLock {
            $0.tokens[token] = (index, expires)
            $0.tokensIssued += 1
        }
        return SandboxContext.json(
            200,
            [
                "access_token": .string(token), "expires_in": .integer(Self.tokenLifetimeSeconds), "token_type": "Bearer",
                "scope": "urn:viva:payments:core:api:redirectcheckout",
            ])
    }

    package func transaction(_ transactionId: String, _ request: HTTPRequestSpec) -> HTTPResponseSpec {
        guard let header = request.header("Authorization"), header.hasPrefix("Bearer ") else {
            return HTTPResponseSpec(status: 401)
        }
        let now = SandboxContext.epochSeconds()
        let (grant, recorded) = state.withLock { state in (state.tokens[String(header.dropFirst(7))], state.transactions[transactionId]) }
        guard let grant, grant.expires > now else { return HTTPResponseSpec(status: 401) }
        guard let recorded, recorded.merchantKey == merchants[grant.merchant].config.merchantKey else {
            return SandboxContext.json(404, ["message": "transaction not found"])
        }
        return SandboxContext.json(
            200,
            [
                "statusId": .string(recorded.statusId), "amount": .fraction(Double(recorded.amount) / 100),
                "merchantTrns": .string(recorded.clientTransactionId), "currencyCode": "978", "insDate": "2019-09-13T12:14:19.87+03:00",
                "orderCode": 1_091_166_300_000_136,
            ])
    }

    /// (client id, secret) of an HTTP Basic header, decoded here rather than with the client's code.
    package static func basicCredentials(_ header: String?) -> (String, String)? {
        guard let header, header.count > 6, header.prefix(6).lowercased() == "basic " else { return nil }
        guard let decoded = Data(base64Encoded: String(header.dropFirst(6)).trimmingCharacters(in: .whitespaces)) else { return nil }
        let bytes = Array(decoded)
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")) else { return nil }
        return (String(decoding: bytes[..<colon], as: UTF8.self), String(decoding: bytes[(colon + 1)...], as: UTF8.self))
    }

    package static func sameBytes(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        return zip(a, b).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
    }
}

import Foundation
import PaypipeCore
import Sandbox
import Synchronization
import Viva

/// Viva under `/viva`:
/// - `POST /sale` with `{"uri": "vivapayclient://pay/v1?...", "decline"?: true, "statusId"?: "A"}`
///   stands in for the Viva app (an inter-app call): the sale URL is read as the app would
///   (`VivaSandbox.readSale`), the transaction is recorded, and the answer is
///   `{"callback": "<callback URI the app would open>"}`, or 400 naming what is wrong with the URL.
///   `statusId` sets what Viva's transaction record says afterwards, one of the documented values
///   F (completed), A (in progress), E (error), X (cancelled), R (refunded); by default F, or E
///   with `decline`. The app's result is a failure for E and X (and `decline`), else a success.
/// - `POST /connect/token` (OAuth2 client credentials, HTTP Basic) and
///   `GET /checkout/v2/transactions/{transactionId}` (bearer) stand in for Viva's accounts and
///   API hosts, answering only for sales this sandbox recorded under the token's merchant.
/// - `DELETE /api/transactions/{transactionId}?amount={cents}` (bearer) refunds a recorded sale
///   (`VivaEmulator+Refunds.swift`).
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
        /// The card as the app's result masked it (`537489******1831`).
        var accountNumber: String? = nil
        var orderCode: Int64? = nil
        var installments: Int64? = nil
        var customerTrns: String? = nil
    }

    /// The `statusId` values Viva documents for a transaction (PROVIDERS.md, Viva server-side
    /// confirmation; the corpus's transactionResponse fixtures).
    package static let statusIds: Set<String> = ["F", "A", "E", "X", "R"]

    package struct State: Sendable {
        /// Access token → the merchant it was issued to and when it expires (epoch seconds).
        var tokens: [String: (merchant: Int, expires: Int64)] = [:]
        var transactions: [String: Recorded] = [:]
        var tokensIssued = 0
        /// Sale transactionId → the cents refunded of it.
        var refunded: [String: Int64] = [:]
        /// Every refund request received, in order.
        var refundRequests: [RefundRequest] = []
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
    package func record(
        transactionId: String, merchantKey: String, statusId: String, amount: Int64, clientTransactionId: String,
        accountNumber: String? = nil, orderCode: Int64? = nil, installments: Int64? = nil, customerTrns: String? = nil
    ) {
        state.withLock {
            $0.transactions[transactionId] = Recorded(
                merchantKey: merchantKey, statusId: statusId, amount: amount, clientTransactionId: clientTransactionId,
                accountNumber: accountNumber, orderCode: orderCode, installments: installments, customerTrns: customerTrns)
        }
    }

    package func handle(_ request: HTTPRequestSpec, context: SandboxContext) async -> HTTPResponseSpec {
        if request.method == .DELETE, request.url.hasPrefix(Self.refundPrefix) { return refund(request, ledger: context.ledger) }
        return handle(request)
    }

    package func handle(_ request: HTTPRequestSpec) -> HTTPResponseSpec {
        if request.url == Self.salePath {
            guard request.method == .POST else { return SandboxContext.json(405, ["error": "use POST"]) }
            return sale(request)
        }
        if request.url == Self.tokenPath {
            guard request.method == .POST else { return SandboxContext.json(405, ["error": "use POST"]) }
            return token(request)
        }
        if request.url.hasPrefix(Self.refundPrefix) {
            guard request.method == .DELETE else { return SandboxContext.json(405, ["error": "use DELETE"]) }
            return refund(request)
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
        let decline = body?["decline"]?.boolValue == true
        let statusId: String
        if let requested = body?["statusId"] {
            guard let text = requested.stringValue, Self.statusIds.contains(text) else {
                return SandboxContext.json(400, ["error": "statusId must be one of F, A, E, X, R"])
            }
            statusId = text
        } else {
            statusId = decline ? "E" : "F"
        }
        let declined = decline || statusId == "E" || statusId == "X"
        let result = declined ? VivaSandbox.declined(sale) : VivaSandbox.approved(sale)
        if let transactionId = result.transactionId {
            record(
                transactionId: transactionId, merchantKey: sale.merchantKey, statusId: statusId, amount: sale.amount,
                clientTransactionId: sale.clientTransactionId, accountNumber: result.accountNumber,
                orderCode: result.orderCode.flatMap { Int64($0) }, installments: result.installments, customerTrns: sale.isv?.customerTrns)
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
            // Viva documents only the status (404 = unknown transaction); the body is as it was.
            return SandboxContext.json(404, ["message": "transaction not found"])
        }
        return SandboxContext.json(200, Self.transactionRecord(recorded))
    }

    /// A transaction as Viva's Retrieve-transaction answer shows it (the corpus's
    /// transactionResponse fixtures: developer.viva.com verify-a-payment, member names and value
    /// forms of the transaction-payment-created example): `amount` in major units as a decimal,
    /// `cardNumber` masked with `X` (`414746XXXXXX0133`), `insDate` without an offset, the members
    /// the sandbox does not know null as Viva writes them, `transactionTypeId` 5 (a card payment),
    /// `cardTypeId` 1.
    package static func transactionRecord(_ recorded: Recorded) -> JSONValue {
        let cardNumber: JSONValue = recorded.accountNumber.map { JSONValue.string($0.replacingOccurrences(of: "*", with: "X")) } ?? .null
        let customerTrns: JSONValue = recorded.customerTrns.map { JSONValue.string($0) } ?? .null
        let amount = JSONValue.fraction(Double(recorded.amount) / 100)
        let orderCode = JSONValue.integer(recorded.orderCode ?? 1_091_166_300_000_136)
        let totalInstallments = JSONValue.integer(recorded.installments ?? 0)
        let fields: [String: JSONValue] = [
            "email": "customer@example.com", "fullName": "Customer name", "amount": amount, "orderCode": orderCode,
            "statusId": .string(recorded.statusId), "insDate": "2019-09-13T12:14:19.87", "cardNumber": cardNumber,
            "currencyCode": "978", "customerTrns": customerTrns, "merchantTrns": .string(recorded.clientTransactionId),
            "transactionTypeId": 5, "recurringSupport": false, "totalInstallments": totalInstallments, "cardCountryCode": .null,
            "cardIssuingBank": .null, "currentInstallment": 0, "cardUniqueReference": .null, "cardTypeId": 1, "digitalWalletId": .null,
        ]
        return .object(fields)
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

import PaypipeCore

/// Viva's record of one transaction, `GET {api}/checkout/v2/transactions/{transactionId}`: only
/// the fields the confirmation reads (Viva's transactions API documentation).
public struct VivaTransaction: Sendable, Equatable {
    /// F completed, A in progress, E error, X cancelled, R refunded.
    public var statusId: String
    /// Minor units (the API answers a decimal in major units: 15.00 = 1500).
    public var amount: Int64
    /// The Sale request's `clientTransactionId`.
    public var merchantTrns: String?

    public init(statusId: String, amount: Int64, merchantTrns: String?) {
        self.statusId = statusId
        self.amount = amount
        self.merchantTrns = merchantTrns
    }

    /// Reads a 200 body; nil when it lacks a statusId or an amount that is a whole number of cents.
    public init?(body: [UInt8]) {
        guard case .object(let object)? = try? JSONValue.parse(body),
            let statusId = object["statusId"]?.stringValue, !statusId.isEmpty,
            let amount = object["amount"].flatMap(VivaTransaction.minorUnits)
        else { return nil }
        let merchantTrns: String?
        switch object["merchantTrns"] {
        case .string(let text)?: merchantTrns = text
        case nil, .null?: merchantTrns = nil
        default: return nil
        }
        self.init(statusId: statusId, amount: amount, merchantTrns: merchantTrns)
    }

    /// Major units with at most two decimals → minor units. Viva's currencies all have two
    /// (unconfirmed for any zero-decimal currency Viva may add).
    static func minorUnits(_ value: JSONValue) -> Int64? {
        switch value {
        case .integer(let major):
            let (cents, overflow) = major.multipliedReportingOverflow(by: 100)
            return overflow || cents < 0 ? nil : cents
        case .fraction(let major):
            let cents = (major * 100).rounded()
            guard major >= 0, cents < 9e15, abs(cents - major * 100) < 1e-6 else { return nil }
            return Int64(cents)
        default:
            return nil
        }
    }
}

/// The rules that turn Viva's record of a transaction into the order's verdict.
/// Viva's record decides, never the forwarded URI: the customer holds the URI and can edit
/// every field of it, so only its `transactionId` is used, to ask Viva.
public enum VivaConfirmation {
    /// - F with the order's amount → `succeeded`; F with another amount → `failed AMOUNT_MISMATCH`
    ///   (Viva took a different amount for this order: a person reviews it).
    /// - E (error) or X (cancelled) → `failed VIVA_SALE_FAILED`; R → `failed VIVA_REFUNDED`. This
    ///   holds whatever status the URI claims: a forwarded failure that Viva records as F succeeds
    ///   (the money was taken), and a forwarded success that Viva records as E fails.
    /// - A (in progress) or anything else → refused 409, order unchanged: forward it again later.
    /// - A `merchantTrns` other than the order's clientTransactionId → refused 409, order unchanged:
    ///   that transaction belongs to another sale, so it says nothing about this order (otherwise
    ///   anyone holding one of their own transactions could fail any order by naming it).
    public static func verdict(
        for transaction: VivaTransaction, callback: VivaSaleCallback, order: Order
    ) throws(CallbackRejection) -> ProviderVerdict {
        let expectedReference = VivaSaleCallback.expectedReference(of: order)
        guard transaction.merchantTrns == expectedReference else {
            throw CallbackRejection(
                status: 409, code: .referenceMismatch,
                "Viva records this transaction for another clientTransactionId than the order's")
        }
        switch transaction.statusId {
        case "F":
            guard let orderAmount = order.amount, transaction.amount == orderAmount else {
                return .failed(
                    code: .amountMismatch,
                    message: "confirmed amount \(transaction.amount) != order amount \(order.amount.map { String($0) } ?? "(none)")")
            }
            var result = callback.result
            result["status"] = "success"
            result["amount"] = .integer(transaction.amount)
            result["clientTransactionId"] = .string(expectedReference)
            result["statusId"] = "F"
            result["confirmed"] = true
            return .succeeded(result)
        case "E", "X":
            return .failed(code: .vivaSaleFailed, message: "Viva records the sale as \(transaction.statusId == "E" ? "failed (E)" : "cancelled (X)")")
        case "R":
            return .failed(code: .vivaRefunded, message: "Viva records the sale as refunded (R)")
        default:
            throw CallbackRejection(
                status: 409, code: .notFinal,
                "Viva has not finished this transaction (statusId \(VivaText.printable(transaction.statusId, limit: 8))); forward the result again later"
            )
        }
    }
}

/// Asks Viva about one transaction: an OAuth2 client-credentials token (cached until shortly
/// before it expires), then the transaction. Failures are refusals the forwarder may retry.
public actor VivaTransactionsClient {
    struct CachedToken {
        var token: Secret
        var expiresAtMilliseconds: Int64
    }

    /// By accounts URL and client id: merchants may share API credentials.
    var tokens: [String: CachedToken] = [:]
    let now: @Sendable () -> Int64

    public init(now: @escaping @Sendable () -> Int64 = { Timestamp.nowMilliseconds() }) {
        self.now = now
    }

    /// Viva's record of `transactionId`. Throws 404 `TRANSACTION_NOT_FOUND` when Viva does not
    /// know it, 503 `VIVA_UNAVAILABLE` when Viva cannot be asked right now.
    public func transaction(
        _ transactionId: String, api: VivaAPICredentials, http: any ProviderHTTPTransport
    ) async throws(CallbackRejection) -> VivaTransaction {
        let token = try await self.token(api, http: http)
        let response: HTTPResponseSpec
        switch await http.execute(VivaAPIRequests.transaction(transactionId, api: api, token: token)) {
        case .success(let answer): response = answer
        case .failure(let failure): throw Self.unavailable("the transactions API did not answer (\(failure.reason))")
        }
        switch response.status {
        case 200:
            guard let transaction = VivaTransaction(body: response.body) else {
                throw Self.unavailable("the transactions API answered a body without statusId and amount")
            }
            return transaction
        case 404:
            throw CallbackRejection(status: 404, code: .transactionNotFound, "Viva does not know this transactionId")
        case 401, 403:
            // A revoked or expired token: the next callback fetches a fresh one.
            tokens[Self.key(api)] = nil
            throw Self.unavailable("the transactions API refused the token (\(response.status))")
        default:
            throw Self.unavailable("the transactions API answered \(response.status)")
        }
    }

    func token(_ api: VivaAPICredentials, http: any ProviderHTTPTransport) async throws(CallbackRejection) -> Secret {
        let key = Self.key(api)
        if let cached = tokens[key], cached.expiresAtMilliseconds > now() { return cached.token }
        let response: HTTPResponseSpec
        switch await http.execute(VivaAPIRequests.token(api)) {
        case .success(let answer): response = answer
        case .failure(let failure): throw Self.unavailable("the token endpoint did not answer (\(failure.reason))")
        }
        guard response.status == 200 else { throw Self.unavailable("the token endpoint answered \(response.status)") }
        guard case .object(let object)? = try? JSONValue.parse(response.body),
            let token = object["access_token"]?.stringValue, !token.isEmpty,
            object["token_type"]?.stringValue.map({ $0.lowercased() == "bearer" }) ?? true
        else {
            throw Self.unavailable("the token endpoint answered without a bearer access_token")
        }
        let lifetimeSeconds = max(0, object["expires_in"]?.integerValue ?? 0)
        // Renew a minute early (or halfway, for short lifetimes) so a token never expires in flight.
        let margin = min(60, lifetimeSeconds / 2)
        let cached = CachedToken(token: Secret(token), expiresAtMilliseconds: now() + (lifetimeSeconds - margin) * 1000)
        if lifetimeSeconds > 0 { tokens[key] = cached }
        return cached.token
    }

    static func key(_ api: VivaAPICredentials) -> String { api.accountsURL + "|" + api.clientId }

    static func unavailable(_ detail: String) -> CallbackRejection {
        CallbackRejection(status: 503, code: .vivaUnavailable, "could not confirm with Viva: \(detail); retry later")
    }
}

/// The two requests of Viva's server-side confirmation.
public enum VivaAPIRequests {
    public static let tokenPath = "/connect/token"
    public static let transactionsPath = "/checkout/v2/transactions/"

    /// `POST {accounts}/connect/token`, HTTP Basic (client id : secret), `grant_type=client_credentials`.
    public static func token(_ api: VivaAPICredentials) -> HTTPRequestSpec {
        let basic = VivaBase64.encode(Array((api.clientId + ":" + api.clientSecret.reveal()).utf8))
        return HTTPRequestSpec(
            method: .POST, url: api.accountsURL + tokenPath,
            headers: [
                HTTPHeader("Authorization", "Basic " + basic), HTTPHeader("Content-Type", "application/x-www-form-urlencoded"),
                HTTPHeader("Accept", "application/json"),
            ],
            body: Array("grant_type=client_credentials".utf8))
    }

    /// `GET {api}/checkout/v2/transactions/{transactionId}` with the bearer token.
    public static func transaction(_ transactionId: String, api: VivaAPICredentials, token: Secret) -> HTTPRequestSpec {
        HTTPRequestSpec(
            method: .GET, url: api.apiURL + transactionsPath + VivaQuery.percentEncode(transactionId),
            headers: [HTTPHeader("Authorization", "Bearer " + token.reveal()), HTTPHeader("Accept", "application/json")])
    }
}

enum VivaBase64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var index = 0
        while index < bytes.count {
            let chunk = bytes[index..<min(index + 3, bytes.count)]
            let b0 = chunk[chunk.startIndex]
            let b1 = chunk.count > 1 ? chunk[chunk.startIndex + 1] : 0
            let b2 = chunk.count > 2 ? chunk[chunk.startIndex + 2] : 0
            out.append(alphabet[Int(b0 >> 2)])
            out.append(alphabet[Int((b0 & 0x03) << 4 | b1 >> 4)])
            out.append(chunk.count > 1 ? alphabet[Int((b1 & 0x0F) << 2 | b2 >> 6)] : UInt8(ascii: "="))
            out.append(chunk.count > 2 ? alphabet[Int(b2 & 0x3F)] : UInt8(ascii: "="))
            index += 3
        }
        return String(decoding: out, as: UTF8.self)
    }
}

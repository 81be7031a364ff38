import NetsEasy
import PaypipeCore
import PhonePe
import TrustPayments
import Viva

/// What the callback endpoint answers, and how `/metrics` counts it.
public struct CallbackAnswer: Sendable, Equatable {
    public var status: Int
    /// `applied`, `duplicate`, `no_change`, or the rejection code (e.g. `BAD_CHECKSUM`).
    public var result: String
    public var message: String

    static func handedOn(applied: Bool, duplicate: Bool) -> CallbackAnswer {
        let result = applied ? "applied" : duplicate ? "duplicate" : "no_change"
        return CallbackAnswer(status: 200, result: result, message: duplicate ? "already processed" : applied ? "order updated" : "nothing to change")
    }

    static func rejected(_ status: Int, _ code: String, _ message: String) -> CallbackAnswer {
        CallbackAnswer(status: status, result: code, message: message)
    }

    public var isRejection: Bool { status >= 400 }

    /// `{"status":"applied"}` or `{"error":{"code","message"}}`; messages never carry secrets.
    public var body: String {
        let json: JSONValue =
            isRejection
            ? ["error": ["code": .string(result), "message": .string(message)]]
            : ["status": .string(result), "message": .string(message)]
        return json.serialized
    }
}

/// The callback validator's core (PROTOCOL.md §3): every authenticity and consistency check is
/// the provider module's; this type finds the merchant and the order, and hands an authentic
/// verdict to the ledger, answering 2xx only once the ledger has committed it. It keeps no state.
public struct CallbackValidator: Sendable {
    let config: PaypipeConfig
    let directory: any OrderDirectory
    let jwtVerifiers: [String: TPResponseJWTVerifier]
    let checksums: [String: PhonePeChecksum]
    let now: @Sendable () -> Int64

    public init(config: PaypipeConfig, directory: any OrderDirectory, now: @escaping @Sendable () -> Int64 = { Timestamp.nowMilliseconds() }) async {
        self.config = config
        self.directory = directory
        self.now = now
        var verifiers: [String: TPResponseJWTVerifier] = [:]
        for (name, merchant) in config.merchants {
            if let tp = merchant.trustpayments { verifiers[name] = await TPResponseJWTVerifier(secret: tp.jwtSecret) }
        }
        jwtVerifiers = verifiers
        checksums = config.merchants.compactMapValues { $0.phonepe.map(PhonePeChecksum.init(config:)) }
    }

    // MARK: - Routes

    /// `POST /callbacks/phonepe`: checksum with the salt of the merchant the body names, then the
    /// order by authRequestId; the amount and references are checked by the PhonePe module.
    public func phonePe(body: [UInt8], xVerify: String?) async -> CallbackAnswer {
        let envelope: PhonePeCallbackEnvelope
        do {
            envelope = try PhonePeCallbackEnvelope(body: body)
        } catch {
            return .rejected(error.status, error.code, error.message)
        }
        var callback: PhonePeCallback?
        var merchantName = ""
        var lastError = CallbackRejection.forged(CallbackRejection.Code.badChecksum, "no merchant is configured with this PhonePe merchantId")
        for (name, merchant) in config.merchants.sorted(by: { $0.key < $1.key }) where merchant.phonepe?.merchantId == envelope.claimedMerchantId {
            guard let checksum = checksums[name] else { continue }
            do {
                callback = try envelope.authenticate(xVerify: xVerify, checksum: checksum)
                merchantName = name
                break
            } catch {
                lastError = error
            }
        }
        guard let callback, let merchantId = config.merchants[merchantName]?.phonepe?.merchantId else {
            return .rejected(lastError.status, lastError.code, lastError.message)
        }
        let order: Order
        do { order = try await self.order(.lookupRef(.phonepe, callback.authRequestId), merchant: merchantName, provider: .phonepe) } catch { return error.answer }
        switch callback.effect(order: order, merchantId: merchantId) {
        case .ignored: return await settle(order, event: "phonepe|\(callback.dedupeKey)", verdict: nil)
        case .verdict(let verdict): return await settle(order, event: "phonepe|\(callback.dedupeKey)", verdict: verdict)
        }
    }

    /// `POST /callbacks/nets`: the merchant is the one whose webhook secret the Authorization
    /// equals (constant time); the order is found by paymentId; redeliveries dedupe on event id.
    public func nets(headers: [HTTPHeader], body: [UInt8]) async -> CallbackAnswer {
        let notConfigured = CallbackRejection.Code.webhookNotConfigured
        var rejection = CallbackRejection.forged(notConfigured, "no merchant has a nets webhookAuthorization")
        var authentic: (String, NetsWebhookEvent)?
        for (name, merchant) in config.merchants.sorted(by: { $0.key < $1.key }) {
            guard let nets = merchant.nets else { continue }
            do {
                authentic = (name, try NetsWebhook.verify(headers: headers, body: body, config: nets))
                break
            } catch let error where error.isForged {
                if rejection.code == notConfigured || error.code != notConfigured { rejection = error }
            } catch {
                return .rejected(error.status, error.code, error.message)
            }
        }
        guard let (merchantName, event) = authentic else { return .rejected(rejection.status, rejection.code, rejection.message) }
        let order: Order
        do { order = try await self.order(.lookupRef(.nets, event.paymentId), merchant: merchantName, provider: .nets) } catch { return error.answer }
        switch NetsWebhook.interpret(event, for: order) {
        case .apply(let verdict): return await settle(order, event: "nets|\(event.id)", verdict: verdict)
        case .noChange: return await settle(order, event: "nets|\(event.id)", verdict: nil)
        }
    }

    /// `POST /callbacks/trustpayments/notification`: `responsesitesecurity` with the notification
    /// password of the merchant whose site the form names; `orderreference` names the order.
    public func trustPaymentsNotification(body: [UInt8]) async -> CallbackAnswer {
        let fields: [TPNotification.Field]
        do {
            fields = try TPNotification.parseForm(body)
        } catch {
            return .rejected(error.status, error.code, error.message)
        }
        let site = fields.first { $0.name == "sitereference" }?.value
        var lastError = CallbackRejection.forged(CallbackRejection.Code.badSignature, "no merchant is configured for this sitereference")
        var verified: (String, TPNotificationEvent)?
        for (name, merchant) in config.merchants.sorted(by: { $0.key < $1.key }) {
            guard let tp = merchant.trustpayments, site == nil || site == tp.siteReference else { continue }
            do {
                verified = (name, try TPNotification.verify(fields: fields, password: tp.notificationPassword))
                break
            } catch {
                lastError = error
            }
        }
        guard let (merchantName, event) = verified, let tp = config.merchants[merchantName]?.trustpayments else {
            return .rejected(lastError.status, lastError.code, lastError.message)
        }
        guard Order.isValidOrderId(event.orderReference) else {
            return .rejected(400, "INVALID_FIELD", "orderreference is not an orderId this pipeline issues")
        }
        let order: Order
        do {
            order = try await self.order(.lookup(OrderKey(merchant: merchantName, orderId: event.orderReference)), merchant: merchantName, provider: .trustpayments)
        } catch {
            return error.answer
        }
        let verdict = event.verdict(for: TPExpectedOrder(order: order, config: tp))
        return await settle(order, event: "trustpayments|\(event.dedupeKey)", verdict: verdict)
    }

    /// `POST /callbacks/trustpayments/jwt` from the app's backend: `{"orderId","jwt","merchant"?}`.
    public func trustPaymentsJWT(body: [UInt8]) async -> CallbackAnswer {
        let forwarded: Forwarded
        do { forwarded = try Forwarded(body, field: "jwt") } catch { return error.answer }
        guard let tp = config.merchants[forwarded.merchant]?.trustpayments, let verifier = jwtVerifiers[forwarded.merchant] else {
            return .rejected(404, "UNKNOWN_MERCHANT", "merchant \(forwarded.merchant) has no trustpayments configuration")
        }
        let response: TPResponseJWT
        do {
            response = try await verifier.verify(forwarded.value, now: now() / 1000, maxAgeSeconds: config.timers.tpResponseMaxAgeS)
        } catch {
            return .rejected(error.status, error.code, error.message)
        }
        let order: Order
        do { order = try await self.order(.lookup(forwarded.key), merchant: forwarded.merchant, provider: .trustpayments) } catch { return error.answer }
        let payment = response.entries.first { $0["requesttypedescription"]?.stringValue == "AUTH" } ?? response.entries.first
        let reference = payment?["transactionreference"]?.stringValue ?? "jwt:\(Digest.sha256Hex(Array(forwarded.value.utf8)))"
        return await settle(order, event: "trustpayments|\(reference)", verdict: response.verdict(for: TPExpectedOrder(order: order, config: tp)))
    }

    /// `POST /callbacks/viva` from the app's backend: `{"orderId","uri","merchant"?}`.
    public func viva(body: [UInt8]) async -> CallbackAnswer {
        let forwarded: Forwarded
        do { forwarded = try Forwarded(body, field: "uri") } catch { return error.answer }
        guard let vivaConfig = config.merchants[forwarded.merchant]?.viva else {
            return .rejected(404, "UNKNOWN_MERCHANT", "merchant \(forwarded.merchant) has no viva configuration")
        }
        let order: Order
        do { order = try await self.order(.lookup(forwarded.key), merchant: forwarded.merchant, provider: .viva) } catch { return error.answer }
        let validation: VivaCallbackValidation
        do {
            validation = try VivaSaleCallback.validate(uri: forwarded.value, order: order, config: vivaConfig)
        } catch {
            return .rejected(error.status, error.code, error.message)
        }
        let event = "viva|\(order.orderId)|\(validation.callback.transactionId ?? validation.callback.clientTransactionId)"
        return await settle(order, event: event, verdict: validation.verdict)
    }

    // MARK: - Shared steps

    /// The stored order, which must belong to `merchant` and `provider`.
    func order(_ request: LedgerRequest, merchant: String, provider: Provider) async throws(AnswerError) -> Order {
        let reply: LedgerReply
        do {
            reply = try await directory.call(request)
        } catch {
            throw AnswerError(.rejected(503, "LEDGER_UNAVAILABLE", "the order store did not answer; retry later"))
        }
        guard case .order(let stored?) = reply, stored.key.merchant == merchant,
            case .order(let order) = Order.decode(frame: Array(stored.orderJSON.utf8)), order.provider == provider
        else {
            throw AnswerError(.rejected(404, "ORDER_NOT_FOUND", "no \(provider.rawValue) order of merchant \(merchant) matches this callback"))
        }
        return order
    }

    /// Hands an authentic callback to the ledger: terminal verdicts become the order's outcome;
    /// others only record the event so a redelivery is recognised.
    func settle(_ order: Order, event: String, verdict: ProviderVerdict?) async -> CallbackAnswer {
        var outcome: Outcome?
        switch verdict {
        case .succeeded(let result)?: outcome = Outcome(order: order, status: .succeeded, result: result)
        case .failed(let code, let message)?: outcome = Outcome(order: order, status: .failed, error: .init(code: code, message: message))
        case .pending?, .retry?, .unknown?, nil: outcome = nil
        }
        let eventKey = event.utf8.count <= 300 ? event : "\(event.prefix(40))#\(Digest.sha256Hex(Array(event.utf8)))"
        do {
            guard case .settled(let applied, let duplicate) = try await directory.call(.settle(order.key, event: eventKey, outcome: outcome)) else {
                return .rejected(503, "LEDGER_UNAVAILABLE", "unexpected answer from the order store; retry later")
            }
            return .handedOn(applied: applied, duplicate: duplicate)
        } catch {
            return .rejected(503, "LEDGER_UNAVAILABLE", "the order store did not confirm; retry later")
        }
    }
}

/// A body forwarded by the app's backend: `{"orderId", <field>, "merchant"?}`.
struct Forwarded {
    let merchant: String
    let orderId: String
    let value: String
    var key: OrderKey { OrderKey(merchant: merchant, orderId: orderId) }

    init(_ body: [UInt8], field: String) throws(AnswerError) {
        guard body.count <= 64 * 1024 else { throw AnswerError(.rejected(413, "TOO_LARGE", "the body is larger than 64 KiB")) }
        guard case .object(let object)? = try? JSONValue.parse(body) else {
            throw AnswerError(.rejected(400, "MALFORMED", "the body is not a JSON object"))
        }
        guard let orderId = object["orderId"]?.stringValue, Order.isValidOrderId(orderId) else {
            throw AnswerError(.rejected(400, "INVALID_FIELD", "orderId must be 1-64 characters of [A-Za-z0-9._:-]"))
        }
        switch object["merchant"] {
        case nil, .null?: merchant = "default"
        case .string(let name)? where !name.isEmpty && name.utf8.count <= 64: merchant = name
        default: throw AnswerError(.rejected(400, "INVALID_FIELD", "merchant must be a string of 1-64 characters"))
        }
        guard let value = object[field]?.stringValue, !value.isEmpty else {
            throw AnswerError(.rejected(400, "MISSING_FIELD", "\(field) must be a non-empty string"))
        }
        self.orderId = orderId
        self.value = value
    }
}

/// A callback refused before it could be handed on; `answer` is what the endpoint says.
struct AnswerError: Error {
    let answer: CallbackAnswer
    init(_ answer: CallbackAnswer) { self.answer = answer }
}

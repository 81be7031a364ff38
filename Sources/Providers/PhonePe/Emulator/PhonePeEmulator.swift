import Foundation
import PaypipeCore
import PhonePe
import Sandbox
import Synchronization

/// PhonePe recurring v3 under `/phonepe`: `POST /v3/recurring/auth/init` (checked and answered
/// by `PhonePeSandbox.handleAuthInit`) and `GET /v3/recurring/auth/status/{merchantId}/{authRequestId}`
/// (`verifyAuthStatus` + `authStatusResponse`). The merchant is the one whose `merchantId` the
/// request names. An authRequestId seen before is refused as PhonePe refuses it (HTTP 400
/// `INVALID_TRANSACTION_ID` "Duplicate TransactionID") and creates no second mandate; the
/// first answer is not replayed, so a second submission cannot pass unseen. The S2S callback
/// goes to the merchant's configured `phonepe.callbackURL`
/// after `PhonePeEmulatorSettings.callbackDelayMilliseconds`; from then on the status call reports the
/// terminal state too.
package final class PhonePeEmulator: ProviderEmulator {
    package static let provider = Provider.phonepe

    /// Only the mandate is kept (not the answer): the answer is a function of the mandate, so
    /// a benchmark's mandates cost only what each mandate holds.
    package struct Record: Sendable {
        var mandate: PhonePeSandboxMandate
        var acceptedAt: ContinuousClock.Instant
    }

    package final class Merchant: Sendable {
        let name: String
        let config: PhonePeConfig
        let sandbox: PhonePeSandbox
        init(name: String, config: PhonePeConfig) {
            self.name = name
            self.config = config
            sandbox = PhonePeSandbox(config: config)
        }
    }

    package let merchants: [Merchant]
    package let byMerchantId: [String: Merchant]
    /// "merchantId \0 authRequestId" → the accepted mandate.
    package let records = Mutex<[String: Record]>([:])
    package struct Debits: Sendable {
        /// Debits asked for per subscriptionId (`debit` action), numbering their transactions.
        var actionCounts: [String: Int] = [:]
        /// "merchantId \0 transactionId" → the merchant's notification and debit.
        var records: [String: Debit] = [:]
    }
    package let debits = Mutex(Debits())
    package let refunds = Mutex(Refunds())
    /// Subscriptions whose next debit is declined (`declineNext` action).
    /// The `payResponseCode` each one's debit fails with.
    package let declineNextDebit = Mutex<[String: String]>([:])
    /// Subscriptions whose next Recurring INIT answers state FAILED (`failNextNotify` action).
    package let failNextNotify = Mutex<Set<String>>([])
    /// Mandates that are not ACTIVE, by subscriptionId: the state the customer or merchant last
    /// gave them (`pause`, `revoke`, … actions; `unpause` makes one ACTIVE again).
    package let mandateStates = Mutex<[String: String]>([:])
    /// Notifications and debits held in front of PhonePe (`holdNext`).
    package let holds = Mutex(Holds())
    /// The last callback `act` sent per subscriptionId, for `resendLast`.
    package let lastCallbacks = Mutex<[String: [String: JSONValue]]>([:])
    /// Mandates that are over (cancelled by the merchant, revoked by the user, expired), by
    /// subscriptionId: their final state. Nothing more is notified or debited on them.
    package let endedMandates = Mutex<[String: String]>([:])

    package func ledgerKey(_ request: HTTPRequestSpec) -> SandboxLedgerKey {
        .now(Self.peekPayload(request)?.authRequestId ?? debitLedgerKey(request) ?? cancelLedgerKey(request) ?? refundLedgerKey(request))
    }

    package convenience init(config: PaypipeConfig) {
        self.init(merchants: SandboxMerchants.of(PhonePeConfig.self, in: config))
    }

    package init(merchants: [(name: String, config: PhonePeConfig)]) {
        self.merchants = merchants.map { Merchant(name: $0.name, config: $0.config) }
        var byMerchantId: [String: Merchant] = [:]
        for merchant in self.merchants where byMerchantId[merchant.config.merchantId] == nil {
            byMerchantId[merchant.config.merchantId] = merchant
        }
        self.byMerchantId = byMerchantId
    }

    /// merchantId and authRequestId of an auth/init body, read without verifying anything
    /// (for routing and the ledger; the sandbox verifies the request afterwards).
    package static func peekPayload(_ request: HTTPRequestSpec) -> (merchantId: String?, authRequestId: String?)? {
        guard request.method == .POST, request.url == PhonePeSandbox.authInitPath,
            let encoded = (try? JSONValue.parse(request.body))?["request"]?.stringValue,
            let decoded = Data(base64Encoded: encoded), let payload = try? JSONValue.parse(Array(decoded))
        else { return nil }
        return (payload["merchantId"]?.stringValue, payload["authRequestId"]?.stringValue)
    }

    package static func recordKey(merchantId: String, authRequestId: String) -> String { merchantId + "\u{0}" + authRequestId }

    package func handle(_ request: HTTPRequestSpec, context: SandboxContext) async -> HTTPResponseSpec {
        guard let fallback = merchants.first else {
            return SandboxContext.json(404, ["error": "no merchant with phonepe is configured"])
        }
        if request.method == .POST, request.url == PhonePeSandbox.authInitPath {
            let named = Self.peekPayload(request)?.merchantId.flatMap { byMerchantId[$0] }
            return authInit(request, merchant: named ?? fallback, context: context)
        }
        if request.method == .GET, request.url.hasPrefix(PhonePeSandbox.authStatusPathPrefix) {
            let merchantId = request.url.dropFirst(PhonePeSandbox.authStatusPathPrefix.count).split(separator: "/").first.map(String.init)
            return authStatus(request, merchant: merchantId.flatMap { byMerchantId[$0] } ?? fallback, context: context)
        }
        if request.method == .POST, request.url == PhonePeRules.debitInitPath || request.url == PhonePeRules.debitExecutePath {
            return await debitRequest(request, context: context)
        }
        if request.method == .GET, request.url.hasPrefix(PhonePeRules.debitStatusPathPrefix) { return debitStatus(request, context: context) }
        if request.method == .POST, request.url == Self.subscriptionCancelPath { return await cancelRequest(request, context: context) }
        if request.method == .POST, request.url == Self.refundPath { return refund(request, context: context) }
        if request.method == .GET, request.url.hasPrefix(Self.transactionStatusPrefix) { return refundStatus(request, context: context) }
        return SandboxContext.json(404, ["success": false, "code": "NOT_FOUND", "message": "No such PhonePe API"])
    }

    package func authInit(_ request: HTTPRequestSpec, merchant: Merchant, context: SandboxContext) -> HTTPResponseSpec {
        let reply = merchant.sandbox.handleAuthInit(path: request.url, headers: request.headers, body: request.body)
        guard let mandate = reply.mandate else { return reply.response }
        let key = Self.recordKey(merchantId: mandate.merchantId, authRequestId: mandate.authRequestId)
        let now = ContinuousClock.now
        let isNew = records.withLock { records in
            guard records[key] == nil else { return false }
            records[key] = Record(mandate: mandate, acceptedAt: now)
            return true
        }
        // A used authRequestId, with the same payload or another: PhonePe's duplicate refusal
        // (fixture `authinitresponse--invalid-transaction-id-duplicate`). The mandate of the
        // first request stays as it was; only its auth status call tells what became of it.
        guard isNew else { return PhonePeSandbox.duplicateTransactionId() }
        context.ledger.tookEffect("phonepe:" + mandate.authRequestId.prefix(128))
        if let outcome = mandate.scheduledOutcome {
            // Built when due, not now: under load most callbacks are still far in the future.
            let sandbox = merchant.sandbox, callbackURL = merchant.config.callbackURL
            context.scheduler.schedule(afterMilliseconds: context.configuration.phonePe.callbackDelayMilliseconds) { [context] in
                var callback = sandbox.callback(for: mandate, outcome: outcome, variant: context.configuration.phonePe.callbackVariant)
                callback.url = callbackURL
                await context.outbound.deliver(callback.request, label: "phonepe callback for \(mandate.authRequestId)")
            }
        }
        return reply.response
    }

    package func authStatus(_ request: HTTPRequestSpec, merchant: Merchant, context: SandboxContext) -> HTTPResponseSpec {
        switch merchant.sandbox.verifyAuthStatus(path: request.url, headers: request.headers) {
        case .rejected(let response):
            return response
        case .valid(let authRequestId):
            let key = Self.recordKey(merchantId: merchant.config.merchantId, authRequestId: authRequestId)
            guard let record = records.withLock({ $0[key] }) else {
                return merchant.sandbox.authStatusNotFound(authRequestId: authRequestId)
            }
            let decided = ContinuousClock.now - record.acceptedAt >= .milliseconds(context.configuration.phonePe.callbackDelayMilliseconds)
            let outcome = decided ? (record.mandate.scheduledOutcome ?? .pending) : .pending
            return merchant.sandbox.authStatusResponse(for: record.mandate, outcome: outcome)
        }
    }
}

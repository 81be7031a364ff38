import Cleeng
import PaypipeCore
import Sandbox
import Synchronization

/// Cleeng under `/cleeng`: `POST /checkout/apple_inapp.php` (the receipt endpoint, checked by
/// `CleengSandbox.verifyReceiptRequest` against the merchant whose user name the Basic
/// credentials carry) and `POST /3.0/json-rpc` (getAccessStatus). Receipt processing is
/// asynchronous at Cleeng: access reads not granted until `CleengEmulatorSettings.grantAfterMilliseconds` after
/// the first accepted receipt for the customer and offer, then granted (never when nil).
package final class CleengEmulator: ProviderEmulator {
    package static let provider = Provider.cleeng

    package static let receiptPath = "/checkout/apple_inapp.php"
    package static let apiPath = "/3.0/json-rpc"

    package let merchants: [(name: String, config: CleengConfig)]
    /// "customerToken \0 offerId" → when its first receipt was accepted.
    package let receipts = Mutex<[String: ContinuousClock.Instant]>([:])
    /// "customerToken \0 offerId" → the entitlement once granted.
    package let entitlements = Mutex<[String: Entitlement]>([:])

    package struct Entitlement: Sendable {
        /// Sandbox epoch ms.
        var expiresAt: Int64
        var renewing = true
    }

    package func ledgerKey(_ request: HTTPRequestSpec) -> SandboxLedgerKey { .now(Self.transactionId(request)) }

    package convenience init(config: PaypipeConfig) {
        self.init(merchants: SandboxMerchants.of(CleengConfig.self, in: config))
    }

    package init(merchants: [(name: String, config: CleengConfig)]) {
        self.merchants = merchants
    }

    package static func transactionId(_ request: HTTPRequestSpec) -> String? {
        guard request.url == receiptPath else { return nil }
        return (try? JSONValue.parse(request.body))?["transactionId"]?.stringValue
    }

    package static func receiptKey(customerToken: String, offerId: String) -> String { customerToken + "\u{0}" + offerId }

    package func handle(_ request: HTTPRequestSpec, context: SandboxContext) async -> HTTPResponseSpec {
        switch request.url {
        case Self.receiptPath: return receipt(request, context: context)
        case Self.apiPath:
            guard request.method == .POST else { return SandboxContext.json(405, ["error": "use POST"]) }
            return accessStatus(request, context: context)
        default: return SandboxContext.json(404, ["error": "no such Cleeng route"])
        }
    }

    package func receipt(_ request: HTTPRequestSpec, context: SandboxContext) -> HTTPResponseSpec {
        let user = SandboxContext.basicUser(request.header("Authorization"))
        guard let merchant = merchants.first(where: { $0.config.username == user }) ?? merchants.first else {
            return SandboxContext.json(404, ["error": "no merchant with cleeng is configured"])
        }
        let check = CleengSandbox.verifyReceiptRequest(request, username: merchant.config.username, password: merchant.config.password)
        guard let receipt = check.receipt else { return check.response }
        let key = Self.receiptKey(customerToken: receipt.customerToken, offerId: receipt.offerId)
        let now = ContinuousClock.now
        receipts.withLock { receipts in
            if receipts[key] == nil { receipts[key] = now }
        }
        context.ledger.tookEffect("cleeng:" + receipt.transactionId.prefix(128))
        return check.response
    }

    package func accessStatus(_ request: HTTPRequestSpec, context: SandboxContext) -> HTTPResponseSpec {
        switch CleengSandbox.parseAccessStatusRequest(request.body) {
        case .failure(let error):
            return error.response
        case .success(let query):
            let key = Self.receiptKey(customerToken: query.customerToken, offerId: query.offerId)
            let acceptedAt = receipts.withLock { $0[key] }
            var granted = false
            if let acceptedAt {
                let elapsed = ContinuousClock.now - acceptedAt
                let milliseconds = elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000
                let polls = context.ledger.cleengPolled(customerToken: query.customerToken, millisecondsAfterReceipt: milliseconds)
                if let onPoll = context.configuration.cleeng.grantOnPoll {
                    granted = polls >= onPoll
                } else if let after = context.configuration.cleeng.grantAfterMilliseconds, after >= 0 {
                    granted = elapsed >= .milliseconds(after)
                }
            }
            var expiresAt: Int64?
            if granted {
                // The subscription's current period, on the sandbox's clock: renewed by `advance`
                // while it renews, lapsed once it does not.
                let now = context.clock.nowMilliseconds
                let period = periodMilliseconds(context)
                expiresAt = entitlements.withLock { entitlements in
                    let entitlement = entitlements[key] ?? Entitlement(expiresAt: now + period)
                    entitlements[key] = entitlement
                    return entitlement.expiresAt
                }
                if let expiry = expiresAt, expiry <= now { granted = false }
            }
            let grant =
                granted
                ? CleengAccessGrant(grantType: CleengSandbox.directPurchase, expiresAt: expiresAt.map { $0 / 1000 }, purchasedDirectly: true) : nil
            return CleengSandbox.accessStatusResponse(id: query.id, grant: grant)
        }
    }
}

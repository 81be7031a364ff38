import Foundation
import PaypipeCore
import Sandbox
import Synchronization
import TrustPayments

/// Trust Payments under `/trustpayments`: `POST /json/` (the web services API, answered by
/// `TPSandbox.handleWebServices`) and `POST /sdk/payment` (stands in for the mobile SDK: body
/// `{"jwt": "<request JWT>"}`, answered by `TPSandbox.processPayment` with
/// `{"jwt": "<response JWT>", "notification": "<URL notification form body>"}`).
///
/// Transactions the sandbox has seen (SDK payments, updated references) are kept so a
/// TRANSACTIONQUERY by orderreference or transactionreference finds them. A reference it never
/// saw is treated as an existing subscription (the emulated merchant's history predates the
/// sandbox), so updates of any reference are accepted.
package final class TrustPaymentsEmulator: ProviderEmulator {
    package static let provider = Provider.trustpayments

    package static let webServicesPath = "/json/"
    package static let sdkPaymentPath = "/sdk/payment"

    package struct Store {
        /// transactionreference → record.
        var records: [String: [String: JSONValue]] = [:]
        /// orderreference → transactionreferences.
        var byOrder: [String: [String]] = [:]
        /// The subscription engine's series, by the first AUTH's transactionreference.
        var series: [String: Series] = [:]
        /// parenttransactionreference → the REFUND transactions made of it.
        var refundsByParent: [String: [String]] = [:]
        /// Every REFUND request received, in order, whatever became of it.
        var refundRequests: [RefundRequest] = []

        mutating func upsert(_ record: [String: JSONValue]) {
            guard let reference = record["transactionreference"]?.stringValue else { return }
            if records[reference] == nil {
                if let order = record["orderreference"]?.stringValue { byOrder[order, default: []].append(reference) }
                if record["requesttypedescription"]?.stringValue == "REFUND", let parent = record["parenttransactionreference"]?.stringValue {
                    refundsByParent[parent, default: []].append(reference)
                }
            }
            records[reference] = record
        }

        /// The AUTH `parent` (when known) and the refunds made of it.
        func refundRecords(parent: String) -> [[String: JSONValue]] {
            ([parent] + (refundsByParent[parent] ?? [])).compactMap { records[$0] }
        }

        func matching(transactionReferences: [String], orderReferences: [String]) -> [[String: JSONValue]] {
            var found: [String: [String: JSONValue]] = [:]
            for reference in transactionReferences { if let record = records[reference] { found[reference] = record } }
            for order in orderReferences {
                for reference in byOrder[order] ?? [] { if let record = records[reference] { found[reference] = record } }
            }
            return Array(found.values)
        }
    }

    package struct RefundRequest: Sendable, Equatable {
        package var requestReference: String?
        package var parent: String
        package var orderReference: String?
        package var amount: Int64?
        /// The answer's errorcode, or the HTTP status of a refused request.
        package var errorcode: String
    }

    package final class Merchant: Sendable {
        let name: String
        let config: TrustPaymentsConfig
        let store = Mutex(Store())
        init(name: String, config: TrustPaymentsConfig) {
            self.name = name
            self.config = config
        }
    }

    package let merchants: [Merchant]
    /// The callback validator's address (`endpoints.callbacks`), where URL notifications go.
    package let callbacksAddress: String

    package func ledgerKey(_ request: HTTPRequestSpec) -> SandboxLedgerKey {
        // The SDK payment's key is only known once its JWT is verified.
        request.url == Self.sdkPaymentPath ? .byEmulator : .now(Self.requestReference(request))
    }

    package convenience init(config: PaypipeConfig) {
        self.init(merchants: SandboxMerchants.of(TrustPaymentsConfig.self, in: config), callbacksAddress: config.endpoints.callbacks)
    }

    package init(merchants: [(name: String, config: TrustPaymentsConfig)], callbacksAddress: String = "127.0.0.1:8080") {
        self.merchants = merchants.map { Merchant(name: $0.name, config: $0.config) }
        self.callbacksAddress = callbacksAddress
    }

    /// The configured merchant whose web services user sent the request, else the default.
    package func merchant(for request: HTTPRequestSpec) -> Merchant? {
        if let user = SandboxContext.basicUser(request.header("Authorization")),
            let match = merchants.first(where: { $0.config.webservicesUser == user })
        {
            return match
        }
        return merchants.first
    }

    /// The envelope's first `requestreference` (the ledger key), when the body has one.
    package static func requestReference(_ request: HTTPRequestSpec) -> String? {
        guard request.url == webServicesPath, let envelope = try? JSONValue.parse(request.body) else { return nil }
        return envelope["request"]?.arrayValue?.first?["requestreference"]?.stringValue
    }

    package func handle(_ request: HTTPRequestSpec, context: SandboxContext) async -> HTTPResponseSpec {
        guard request.method == .POST else { return SandboxContext.json(405, ["error": "use POST"]) }
        guard let merchant = merchant(for: request) else {
            return SandboxContext.json(404, ["error": "no merchant with trustpayments is configured"])
        }
        switch request.url {
        case Self.webServicesPath: return webServices(request, merchant: merchant, ledger: context.ledger)
        case Self.sdkPaymentPath: return sdkPayment(request, ledger: context.ledger, now: context.clock.nowMilliseconds)
        default: return SandboxContext.json(404, ["error": "no such Trust Payments route"])
        }
    }

    package func webServices(_ request: HTTPRequestSpec, merchant: Merchant, ledger: SandboxLedger) -> HTTPResponseSpec {
        let entry = (try? JSONValue.parse(request.body))?["request"]?.arrayValue?.first
        if entry?["requesttypedescriptions"]?.arrayValue == ["REFUND"], let entry {
            return refund(request, entry: entry, merchant: merchant, ledger: ledger)
        }
        let filter = entry?["filter"]
        func values(_ name: String) -> [String] {
            (filter?[name]?.arrayValue ?? []).compactMap { $0["value"]?.stringValue }
        }
        let known = merchant.store.withLock {
            $0.matching(transactionReferences: values("transactionreference"), orderReferences: values("orderreference"))
        }
        // Known records answer for themselves; otherwise the module's stateless behaviour
        // (any reference exists, an order query finds nothing yet).
        let response = TPSandbox.handleWebServices(
            body: request.body, headers: request.headers, config: merchant.config, records: known.isEmpty ? nil : known)

        guard response.status == 200, let entry, entry["requesttypedescriptions"]?.arrayValue?.first == "TRANSACTIONUPDATE",
            let answer = try? TPWebServicesResponse(body: response.body), answer.entries.first?["errorcode"] == "0",
            let reference = values("transactionreference").first
        else { return response }
        let updates = entry["updates"]?.objectValue ?? [:]
        merchant.store.withLock { store in
            var record =
                store.records[reference] ?? [
                    "transactionreference": .string(reference), "sitereference": .string(merchant.config.siteReference),
                    "requesttypedescription": "SUBSCRIPTION", "errorcode": "0", "settlestatus": "0", "transactionactive": "2",
                ]
            for (key, value) in updates { record[key] = value }
            store.upsert(record)
            // The engine runs the series of the SUBSCRIPTION updated.
            if let parent = record["parenttransactionreference"]?.stringValue, store.series[parent]?.subscriptionReference == reference {
                store.series[parent]?.apply(updates.compactMapValues(\.stringValue))
            }
        }
        if let requestReference = entry["requestreference"]?.stringValue {
            ledger.tookEffect("trustpayments:" + requestReference.prefix(128))
        }
        return response
    }

    /// One REFUND request, recorded whatever its answer; a refund made (or declined) is kept as
    /// a transaction the queries find, and one made counts in the ledger under its own
    /// transactionreference, so two refunds from one request sent twice show as two.
    package func refund(_ request: HTTPRequestSpec, entry: JSONValue, merchant: Merchant, ledger: SandboxLedger) -> HTTPResponseSpec {
        let parent = entry["parenttransactionreference"]?.stringValue ?? ""
        return merchant.store.withLock { store in
            let response = TPSandbox.handleWebServices(
                body: request.body, headers: request.headers, config: merchant.config, records: store.refundRecords(parent: parent))
            let answer = response.status == 200 ? (try? TPWebServicesResponse(body: response.body))?.entries.first : nil
            store.refundRequests.append(
                RefundRequest(
                    requestReference: entry["requestreference"]?.stringValue, parent: parent,
                    orderReference: entry["orderreference"]?.stringValue, amount: entry["baseamount"]?.stringValue.flatMap { Int64($0) },
                    errorcode: answer?["errorcode"]?.stringValue ?? "HTTP \(response.status)"))
            guard let answer, let reference = answer["transactionreference"]?.stringValue else { return response }
            store.upsert(answer.merging(["sitereference": .string(merchant.config.siteReference)]) { _, site in site })
            if answer["errorcode"] == "0" { ledger.tookEffect("trustpayments:refund:" + reference) }
            return response
        }
    }

    /// The REFUND requests received, in order.
    package func refundRequests() -> [RefundRequest] {
        merchants.flatMap { merchant in merchant.store.withLock { $0.refundRequests } }
    }

    package func sdkPayment(_ request: HTTPRequestSpec, ledger: SandboxLedger, now: Int64) -> HTTPResponseSpec {
        let document = try? JSONValue.parse(request.body)
        guard let jwt = document?["jwt"]?.stringValue, !jwt.isEmpty else {
            ledger.received(nil)
            return SandboxContext.json(400, ["error": "body must be {\"jwt\": \"<request JWT>\"}"])
        }
        var refusal: TPSandbox.RequestError?
        for merchant in merchants {
            let payment: TPSandbox.Payment
            do {
                payment = try TPSandbox.processPayment(jwt: jwt, config: merchant.config, now: SandboxContext.epochSeconds())
            } catch {
                // Another merchant's secret may have signed it; keep the first merchant's reason.
                if refusal == nil { refusal = error }
                continue
            }
            merchant.store.withLock { store in
                for var record in payment.records {
                    record["transactionstartedtimestamp"] = .string(TPSandbox.timestamp(milliseconds: now))
                    store.upsert(record)
                }
                if let series = Self.series(from: payment.records, merchant: merchant.name, now: now), store.series[series.parent] == nil {
                    store.series[series.parent] = series
                }
            }
            let key = "trustpayments:" + payment.requestReference.prefix(128)
            ledger.received(key)
            ledger.tookEffect(key)
            return SandboxContext.json(
                200,
                [
                    "jwt": .string(payment.responseJWT), "notification": .string(String(decoding: payment.notificationBody, as: UTF8.self)),
                ])
        }
        ledger.received(nil)
        return SandboxContext.json(400, ["error": .string(refusal?.reason ?? "no merchant with trustpayments is configured")])
    }
}

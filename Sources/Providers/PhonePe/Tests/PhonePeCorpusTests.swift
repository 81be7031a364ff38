import FixtureCorpus
import Foundation
import PaypipeCore
import PhonePeTesting
import Testing

@testable import PhonePe

/// PhonePe's documented messages (Fixtures/, see its README) driven through the entry points
/// the pipeline uses: `connector.sign` for what paypipe sends, `connector.read` for the answers,
/// and the callback route's handler (`connector.callback`) for S2S callbacks, signed with the
/// unit tests' salt (`Fixtures.salt`, salt index 1).
@Suite struct PhonePeCorpusTests {
    static let corpus = PhonePeCorpus.all

    struct CorpusError: Error, CustomStringConvertible {
        let description: String
    }

    /// Finds the one order a callback may name (by its authRequestId, as the ledger indexes it).
    struct OneOrder: CallbackOrderLookup {
        let known: Order?
        func order(_ key: OrderKey, provider: Provider) async throws(CallbackRejection) -> Order {
            guard let known else { throw .orderNotFound(provider, merchant: key.merchant) }
            return known
        }
        func order(reference: String, provider: Provider, merchant: String) async throws(CallbackRejection) -> Order {
            guard let known, PhonePeAuthInitParams.authRequestId(of: known) == reference else {
                throw .orderNotFound(provider, merchant: merchant)
            }
            return known
        }
    }

    // MARK: - Helpers

    func makeConnector(merchantId: String) async -> PhonePeConnector {
        await PhonePeConnector(config: PaypipeConfig(merchants: ["default": MerchantConfig(Fixtures.config(merchantId: merchantId))]))
    }

    func signRequest(_ connector: PhonePeConnector, _ order: Order) throws -> SignedRequest<PhonePeConnector.Context> {
        guard case .request(let signed) = try connector.sign(order, purpose: .submit, nowSeconds: 1_700_000_000) else {
            throw CorpusError(description: "order \(order.orderId) did not sign to a request")
        }
        return signed
    }

    func text(_ f: Fixture, _ key: String) -> String? { f.meaning(key)?.stringValue }

    func number(_ f: Fixture, _ key: String) -> Int64? { f.meaning(key)?.integerValue }

    func list(_ f: Fixture, _ key: String) -> [String] {
        (text(f, key) ?? "").split(separator: ",").map { String($0) }
    }

    /// A dotted member (`deviceContext.deviceOS`) of a JSON object.
    func member(_ object: JSONValue?, _ dotted: String) -> JSONValue? {
        var current = object
        for part in dotted.split(separator: ".") { current = current?[String(part)] }
        return current
    }

    func response(_ f: Fixture) -> HTTPResponseSpec {
        HTTPResponseSpec(status: f.status ?? 200, headers: [HTTPHeader("Content-Type", "application/json")], body: f.jsonBody)
    }

    /// The authInit order a response or callback belongs to.
    func authOrder(_ f: Fixture) -> Order {
        let workflow = text(f, "orderWorkflow") ?? "TRANSACTION"
        let transaction = workflow == "TRANSACTION"
        let params: [String: JSONValue] = [
            "merchantUserId": .string(text(f, "orderMerchantUserId") ?? "5330F4FB-C66C-4646-8691-11544B580547"),
            "subscriptionId": .string(text(f, "orderSubscriptionId") ?? "OMS2301191527473651197003"),
            "authRequestId": .string(text(f, "orderAuthRequestId") ?? text(f, "authRequestId") ?? "D2500CEFBBE481095A43D6D5B7A787F"),
            "authWorkflowType": .string(workflow),
        ]
        return Order(
            orderId: "ord-corpus", merchant: "default", operation: .authInit, amount: transaction ? (number(f, "orderAmount") ?? 39900) : nil,
            currency: transaction ? "INR" : nil, params: params)
    }

    /// The debitNotify / debitExecute order a response belongs to.
    func debitOrder(_ f: Fixture) -> Order {
        let execute = text(f, "operation") == "debitExecute"
        var params: [String: JSONValue] = [
            "subscriptionId": .string(text(f, "orderSubscriptionId") ?? "OMS2006110139450123456789"),
            "merchantUserId": .string(text(f, "orderMerchantUserId") ?? "U123456789"),
            "transactionId": .string(text(f, "orderTransactionId") ?? "TX1234567890"),
        ]
        if execute { params["notificationId"] = .string(text(f, "orderNotificationId") ?? "OMN2006110139450123456789") }
        return Order(
            orderId: "ord-corpus", merchant: "default", operation: execute ? .debitExecute : .debitNotify,
            amount: number(f, "orderAmount") ?? 39900, currency: "INR", params: params)
    }

    /// What the connector reads from the fixture's response in `phase`.
    func reading(_ f: Fixture, order: Order, phase: ExchangePhase) async throws -> ProviderVerdict {
        let connector = await makeConnector(merchantId: text(f, "merchantId") ?? "MID12345")
        let signed = try signRequest(connector, order)
        let current = phase == .resolving ? (signed.resolve ?? signed.request) : signed.request
        let exchange = Exchange(order: order, signed: signed, purpose: .submit, phase: phase)
        guard case .verdict(let verdict) = connector.read(response(f), to: current, in: exchange) else {
            throw CorpusError(description: "\(f.name): the connector asked for a follow-up instead of reading a verdict")
        }
        return verdict
    }

    static let resultKeys = [
        "redirectURL", "authRequestId", "providerReferenceId", "subscriptionState", "transactionState", "notificationId", "transactionId",
        "amount", "validAfter", "validUpto",
    ]

    func expectVerdict(_ verdict: ProviderVerdict, _ f: Fixture) {
        #expect(Fixture.verdictName(verdict) == text(f, "verdict"), "\(f.name): \(verdict)")
        if let code = text(f, "errorCode") {
            #expect(verdict.failureCode == code, "\(f.name): \(verdict)")
        }
        let result = Fixture.verdictResult(verdict)
        for key in Self.resultKeys {
            if let expected = f.meaning(key) { #expect(result[key] == expected, "\(f.name): result \(key)") }
        }
    }

    /// The signed body decoded, checked against the documented payload: names, required values,
    /// absent members, headers and the X-VERIFY over `base64 + path`.
    func expectSignedPost(_ request: HTTPRequestSpec, _ f: Fixture) throws {
        let path = text(f, "path") ?? ""
        #expect(request.method.rawValue == text(f, "method"), "\(f.name)")
        #expect(request.url.hasSuffix(path), "\(f.name): \(request.url)")
        #expect(request.header("Content-Type") == "application/json", "\(f.name)")
        for header in list(f, "headers") { #expect(request.header(header) != nil, "\(f.name): header \(header)") }
        let body = try #require(try? JSONValue.parse(request.body).objectValue)
        #expect(Array(body.keys) == [text(f, "bodyEnvelope") ?? "request"], "\(f.name)")
        let b64 = try #require(body["request"]?.stringValue)
        #expect(request.header("X-VERIFY") == Digest.sha256Hex(b64 + path + Fixtures.salt) + "###1", "\(f.name)")

        let payload = JSONValue.object(try #require(Fixtures.decodedPayload(request)))
        let documented = try #require(f.json)
        for field in list(f, "requiredFields") {
            #expect(member(payload, field) != nil, "\(f.name): \(field) is required")
            #expect(member(payload, field) == member(documented, field), "\(f.name): \(field)")
        }
        for field in list(f, "absentFields") { #expect(member(payload, field) == nil, "\(f.name): \(field) must be absent") }
        // Every member paypipe sends is one PhonePe's sample shows, spelled as it spells it.
        for (key, value) in payload.objectValue ?? [:] {
            #expect(documented[key] != nil, "\(f.name): \(key) is not a documented member")
            for inner in value.objectValue?.keys.map({ $0 }) ?? [] {
                #expect(documented[key]?[inner] != nil, "\(f.name): \(key).\(inner) is not a documented member")
            }
        }
    }

    func expectSignedGet(_ request: HTTPRequestSpec, _ f: Fixture) {
        let path = text(f, "path") ?? ""
        #expect(f.text == path, "\(f.name)")
        #expect(request.method.rawValue == text(f, "method"), "\(f.name)")
        #expect(request.url.hasSuffix(path), "\(f.name): \(request.url)")
        #expect(request.body.isEmpty, "\(f.name)")
        for header in list(f, "headers") { #expect(request.header(header) != nil, "\(f.name): header \(header)") }
        #expect(request.header("X-VERIFY") == Digest.sha256Hex(path + Fixtures.salt) + "###1", "\(f.name)")
    }

    /// The fixture's decoded payload as PhonePe posts it: `{"response": base64}` with X-VERIFY.
    func signedCallback(_ f: Fixture, checksumOK: Bool = true) -> CallbackRequest {
        let response = Data(f.jsonBody).base64EncodedString()
        var xVerify = PhonePeChecksum(saltKey: Secret(Fixtures.salt), saltIndex: "1").xVerify(callbackResponse: response)
        if !checksumOK {
            let first = xVerify.removeFirst()
            xVerify = (first == "0" ? "1" : "0") + xVerify
        }
        return CallbackRequest(headers: [HTTPHeader("X-VERIFY", xVerify)], body: Array("{\"response\":\"\(response)\"}".utf8))
    }

    func deliver(_ f: Fixture, orders: OneOrder) async throws -> CallbackDecision {
        let connector = await makeConnector(merchantId: text(f, "merchantId") ?? "MID12345")
        // A genuine body under a wrong checksum is never read.
        await #expect(throws: CallbackRejection.self, "\(f.name): a wrong X-VERIFY must be refused") {
            _ = try await connector.callback(signedCallback(f, checksumOK: false), orders: orders)
        }
        return try await connector.callback(signedCallback(f), orders: orders)
    }

    // MARK: - Every fixture

    static let handledKinds: Set<String> = [
        "authInitRequest", "authStatusRequest", "debitInitRequest", "debitExecuteRequest", "debitStatusRequest", "authInitResponse",
        "authStatusResponse", "authCallback", "debitInitResponse", "debitExecuteResponse", "debitStatusResponse", "debitCallback",
        "notifyCallback", "subscriptionCallback",
    ]

    @Test func everyFixtureNamesItsSourceKindAndSummary() {
        #expect(!Self.corpus.fixtures.isEmpty)
        for f in Self.corpus.fixtures {
            #expect(!f.source.isEmpty, "\(f.name)")
            #expect(!f.kind.isEmpty, "\(f.name)")
            #expect(!f.summary.isEmpty, "\(f.name)")
            #expect(Self.handledKinds.contains(f.kind), "\(f.name): kind \(f.kind) has no test")
            #expect(f.accepted, "\(f.name): every PhonePe fixture is a genuine message")
        }
    }

    // MARK: - Outgoing

    @Test(arguments: PhonePeCorpus.all.of(kind: "authInitRequest"))
    func authInitRequestHasTheDocumentedShape(_ f: Fixture) async throws {
        let documented = try #require(f.json)
        let workflow = text(f, "authWorkflowType") ?? "TRANSACTION"
        let amount = workflow == "TRANSACTION" ? documented["amount"]?.integerValue : nil
        let order = Order(
            orderId: "ord-corpus", merchant: "default", operation: .authInit, amount: amount, currency: amount == nil ? nil : "INR",
            params: [
                "merchantUserId": documented["merchantUserId"] ?? .null, "subscriptionId": documented["subscriptionId"] ?? .null,
                "authRequestId": documented["authRequestId"] ?? .null, "authWorkflowType": .string(workflow),
                "merchantCallBackScheme": documented["deviceContext"]?["merchantCallBackScheme"] ?? .null,
            ])
        let connector = await makeConnector(merchantId: documented["merchantId"]?.stringValue ?? "")
        let signed = try signRequest(connector, order)
        try expectSignedPost(signed.request, f)
        #expect(signed.request.header("X-CALLBACK-URL") == Fixtures.config().callbackURL)
    }

    @Test(arguments: PhonePeCorpus.all.of(kind: "authStatusRequest"))
    func authStatusRequestHasTheDocumentedShape(_ f: Fixture) async throws {
        let connector = await makeConnector(merchantId: text(f, "merchantId") ?? "")
        let order = Order(
            orderId: "ord-corpus", merchant: "default", operation: .authInit, amount: 39900, currency: "INR",
            params: [
                "merchantUserId": "U123456789", "subscriptionId": "OMS2006110139450123456789",
                "authRequestId": .string(text(f, "authRequestId") ?? ""),
            ])
        let status = try #require(try signRequest(connector, order).resolve)
        expectSignedGet(status, f)
    }

    @Test(arguments: PhonePeCorpus.all.of(kind: "debitInitRequest") + PhonePeCorpus.all.of(kind: "debitExecuteRequest"))
    func debitRequestHasTheDocumentedShape(_ f: Fixture) async throws {
        let documented = try #require(f.json)
        let execute = f.kind == "debitExecuteRequest"
        var params: [String: JSONValue] = [
            "subscriptionId": documented["subscriptionId"] ?? .null, "merchantUserId": documented["merchantUserId"] ?? .null,
            "transactionId": documented["transactionId"] ?? .null,
        ]
        if execute { params["notificationId"] = documented["notificationId"] ?? .null }
        let order = Order(
            orderId: "ord-corpus", merchant: "default", operation: execute ? .debitExecute : .debitNotify,
            amount: documented["amount"]?.integerValue ?? 39900, currency: "INR", params: params)
        let connector = await makeConnector(merchantId: documented["merchantId"]?.stringValue ?? "")
        try expectSignedPost(try signRequest(connector, order).request, f)
    }

    @Test(arguments: PhonePeCorpus.all.of(kind: "debitStatusRequest"))
    func debitStatusRequestHasTheDocumentedShape(_ f: Fixture) async throws {
        let connector = await makeConnector(merchantId: text(f, "merchantId") ?? "")
        let order = Order(
            orderId: "ord-corpus", merchant: "default", operation: .debitExecute, amount: 39900, currency: "INR",
            params: [
                "subscriptionId": "OMS2006110139450123456789", "merchantUserId": "U123456789",
                "transactionId": .string(text(f, "transactionId") ?? ""), "notificationId": "OMN2006110139450123456789",
            ])
        let status = try #require(try signRequest(connector, order).resolve)
        expectSignedGet(status, f)
    }

    // MARK: - Answers

    @Test(arguments: PhonePeCorpus.all.of(kind: "authInitResponse"))
    func authInitResponseIsRead(_ f: Fixture) async throws {
        expectVerdict(try await reading(f, order: authOrder(f), phase: .submitting), f)
    }

    @Test(arguments: PhonePeCorpus.all.of(kind: "authStatusResponse"))
    func authStatusResponseIsRead(_ f: Fixture) async throws {
        expectVerdict(try await reading(f, order: authOrder(f), phase: .resolving), f)
    }

    @Test(arguments: PhonePeCorpus.all.of(kind: "debitInitResponse") + PhonePeCorpus.all.of(kind: "debitExecuteResponse"))
    func debitResponseIsRead(_ f: Fixture) async throws {
        expectVerdict(try await reading(f, order: debitOrder(f), phase: .submitting), f)
    }

    @Test(arguments: PhonePeCorpus.all.of(kind: "debitStatusResponse"))
    func debitStatusResponseIsRead(_ f: Fixture) async throws {
        expectVerdict(try await reading(f, order: debitOrder(f), phase: .resolving), f)
    }

    // MARK: - S2S callbacks

    @Test(arguments: PhonePeCorpus.all.of(kind: "authCallback"))
    func authCallbackDecidesItsOrder(_ f: Fixture) async throws {
        let order = authOrder(f)
        let decision = try await deliver(f, orders: OneOrder(known: order))
        #expect(decision.order == order, "\(f.name)")
        #expect(decision.event == text(f, "event"), "\(f.name)")
        let verdict = try #require(decision.verdict, "\(f.name): an AUTH callback decides the order")
        expectVerdict(verdict, f)
    }

    @Test(
        arguments: PhonePeCorpus.all.of(kind: "debitCallback") + PhonePeCorpus.all.of(kind: "notifyCallback")
            + PhonePeCorpus.all.of(kind: "subscriptionCallback"))
    func laterCallbackIsTheSubscriptionsEvent(_ f: Fixture) async throws {
        let decision = try await deliver(f, orders: OneOrder(known: nil))
        #expect(decision.order == nil, "\(f.name)")
        guard let kind = text(f, "eventKind"), !kind.isEmpty else {
            #expect(decision.subscriptionEvents.isEmpty, "\(f.name): \(decision.subscriptionEvents)")
            return
        }
        let event = try #require(decision.subscriptionEvents.first, "\(f.name): no subscription event")
        #expect(decision.subscriptionEvents.count == 1, "\(f.name)")
        #expect(event.kind.rawValue == kind, "\(f.name)")
        #expect(event.provider == .phonepe, "\(f.name)")
        #expect(event.merchant == "default", "\(f.name)")
        #expect(event.subscription == text(f, "subscription"), "\(f.name)")
        if let key = text(f, "dedupeKey") { #expect(event.dedupeKey == key, "\(f.name)") }
        if let amount = number(f, "amount") {
            #expect(event.amount == amount, "\(f.name)")
            #expect(event.currency == "INR", "\(f.name)")
        }
        if let reference = text(f, "providerReference") { #expect(event.providerReference == reference, "\(f.name)") }
        if let reason = text(f, "reason") { #expect(event.reason == reason, "\(f.name)") }
    }
}

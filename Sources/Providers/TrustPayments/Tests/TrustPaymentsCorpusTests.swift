import FixtureCorpus
import Foundation
import PaypipeCore
import Testing
import TrustPaymentsTesting

@testable import TrustPayments

/// Trust Payments' published messages (`Fixtures/`), each driven through the entry point the
/// pipeline uses: the callback routes' handlers for response JWTs and URL notifications, the
/// submitter's classification for JSON API answers, the connector's signer for what paypipe sends.
@Suite struct TrustPaymentsCorpusTests {
    /// The orders a callback may name, by orderId.
    typealias Orders = TPStoredOrders

    static func connector() async -> TrustPaymentsConnector {
        await TrustPaymentsConnector(config: PaypipeConfig(merchants: ["default": MerchantConfig(TPFixtures.config)]))
    }

    /// The `subscriptionJwt` order a callback fixture is about: `meaning.orderId`, `amount`,
    /// `currency`, `freeTrial`, with the seed's schedule (monthly, 12 payments, from 2020-01-01;
    /// a free trial without a begin date).
    static func order(_ fixture: Fixture) -> Order? {
        guard let orderId = fixture.meaning("orderId")?.stringValue else { return nil }
        let freeTrial = fixture.meaning("freeTrial")?.boolValue ?? false
        var params = TPFixtures.seedParams
        if freeTrial {
            params.removeValue(forKey: "beginDate")
            params["freeTrial"] = true
        }
        return Order(
            orderId: orderId, operation: .subscriptionJwt, amount: fixture.meaning("amount")?.integerValue,
            currency: fixture.meaning("currency")?.stringValue, params: params)
    }

    static func errorCode(_ verdict: ProviderVerdict?) -> JSONValue? {
        if case .failed(let code, _)? = verdict { JSONValue.string(code.rawValue) } else { nil }
    }

    /// Each `meaning` key among `keys` that `actual` does not carry with the same value.
    static func differences(_ fixture: Fixture, _ actual: [String: JSONValue], keys: [String]) -> [String] {
        keys.compactMap { key in
            guard let wanted = fixture.meaning(key) else { return nil }
            let got = actual[key]
            return got == wanted ? nil : "\(key): wanted \(wanted), got \(got.map { "\($0)" } ?? "nothing")"
        }
    }

    /// Records the problems.
    static func report(_ problems: [String], for fixture: Fixture) {
        for problem in problems { Issue.record("\(fixture.name): \(problem)") }
    }

    // MARK: - Every fixture

    @Test(arguments: TrustPaymentsCorpus.all.fixtures)
    func everyFixtureNamesItsSource(_ fixture: Fixture) {
        #expect(!fixture.source.isEmpty)
        #expect(!fixture.source.contains("\n"))
        #expect(!fixture.kind.isEmpty)
        #expect(!fixture.summary.isEmpty)
        #expect(fixture.name.contains("--"))
    }

    @Test func theCorpusCoversEveryMessage() {
        let corpus = TrustPaymentsCorpus.all
        for kind in ["sdkJwt", "transactionUpdateRequest", "transactionQueryRequest", "responseJWT", "urlNotification", "webservicesResponse"] {
            #expect(!corpus.of(kind: kind).isEmpty, "no \(kind) fixture")
        }
    }

    // MARK: - Incoming: URL notifications (POST /callbacks/trustpayments/notification)

    @Test(arguments: TrustPaymentsCorpus.all.of(kind: "urlNotification"))
    func urlNotification(_ fixture: Fixture) async {
        // Signed as Trust Payments does: sha256 of the values in field-name order + the notification password.
        let body = TPNotification.formBody(fields: fixture.form, password: TPFixtures.config.notificationPassword)
        let orders = Orders(stored: Self.order(fixture).map { [$0] } ?? [])
        var problems: [String] = []
        do {
            let decision = try await Self.connector().notification(body, orders: orders)
            if !fixture.accepted { problems.append("accepted a notification that must be refused") }
            let event = decision.subscriptionEvents.first
            var actual: [String: JSONValue] = ["verdict": .string(Fixture.verdictName(decision.verdict))]
            actual["errorCode"] = Self.errorCode(decision.verdict)
            actual["transactionReference"] =
                Fixture.verdictResult(decision.verdict)["transactionReference"] ?? event?.providerReference.map(JSONValue.string)
            actual["subscriptionEvent"] = event.map { JSONValue.string($0.kind.rawValue) }
            actual["subscription"] = event.map { JSONValue.string($0.subscription) }
            actual["cycle"] = event?.cycle.map(JSONValue.integer)
            actual["event"] = decision.event.map(JSONValue.string)
            problems += Self.differences(
                fixture, actual, keys: ["verdict", "errorCode", "transactionReference", "subscriptionEvent", "subscription", "cycle", "event"])
            if decision.verdict != nil, let orderId = fixture.meaning("orderId")?.stringValue, decision.order?.orderId != orderId {
                problems.append("decided order \(decision.order?.orderId ?? "none"), not \(orderId)")
            }
        } catch {
            if fixture.accepted { problems.append("refused: \(error.code.rawValue) \(error)") }
        }
        Self.report(problems, for: fixture)
    }

    /// The known bug: a correctly signed notification whose requestreference is Trust Payments'
    /// own `W57-aubk3dr3` was refused by `fieldFormats`; the format check itself, directly.
    @Test func documentedRequestReferenceFormsPassTheFieldFormats() throws {
        for reference in ["W57-aubk3dr3", "W23-rd55dned", "W72-g9wv2j5c", "W3-y2b7mvbk", "A1wqmc662", "Ahc6uwqq6", "RR555"] {
            #expect(TPNotification.fieldRefusal([("requestreference", reference)]) == nil, "\(reference)")
        }
        for reference in ["57-9-18087", "57-9-1930", "12-3-2", "23-9-1", "17-70-1", "3-9-5432832", "1-2-345678"] {
            #expect(TPNotification.fieldRefusal([("transactionreference", reference), ("parenttransactionreference", reference)]) == nil)
        }
        // Still bounded: no control characters, no separators, a length cap.
        #expect(TPNotification.fieldRefusal([("requestreference", "W57-aubk3dr3\n")]) != nil)
        #expect(TPNotification.fieldRefusal([("requestreference", "W57 aubk3dr3")]) != nil)
        #expect(TPNotification.fieldRefusal([("requestreference", String(repeating: "W", count: 65))]) != nil)
        // The signature covers values only: "THREEDQUERY" moved from requesttypedescription into
        // requestreference (leaving a notification read as the AUTH) is not a form Trust Payments writes.
        #expect(TPNotification.fieldRefusal([("requestreference", "W57-aubk3dr3THREEDQUERY")]) != nil)
        #expect(TPNotification.fieldRefusal([("requestreference", "RR555AUTH")]) != nil)
    }

    // MARK: - Incoming: response JWTs (POST /callbacks/trustpayments/jwt)

    @Test(arguments: TrustPaymentsCorpus.all.of(kind: "responseJWT"))
    func responseJWT(_ fixture: Fixture) async throws {
        guard case .object(var claims)? = fixture.jwtPayload, let orderId = fixture.meaning("orderId")?.stringValue else {
            Issue.record("\(fixture.name) needs a jwtPayload object and meaning.orderId")
            return
        }
        // Issued now (the verifier refuses old tokens), in the form the fixture writes iat.
        let now = Timestamp.nowMilliseconds() / 1000
        claims["iat"] = claims["iat"]?.stringValue != nil ? JSONValue.string(String(now)) : JSONValue.integer(now)
        let jwt = TPHS256.sign(claims: JSONValue.object(claims).bytes, secret: Secret(TPFixtures.jwtSecret))
        let body = Array(#"{"orderId":"\#(orderId)","jwt":"\#(jwt)"}"#.utf8)
        let orders = Orders(stored: Self.order(fixture).map { [$0] } ?? [])
        var problems: [String] = []
        do {
            let decision = try await Self.connector().responseJWT(body, orders: orders)
            if !fixture.accepted { problems.append("accepted a response JWT that must be refused") }
            let result = decision.failureResult ?? Fixture.verdictResult(decision.verdict)
            var actual: [String: JSONValue] = ["verdict": .string(Fixture.verdictName(decision.verdict))]
            actual["errorCode"] = Self.errorCode(decision.verdict)
            for key in ["transactionReference", "subscriptionScheduled", "subscriptionState", "settlement"] { actual[key] = result[key] }
            problems += Self.differences(
                fixture, actual,
                keys: ["verdict", "errorCode", "transactionReference", "subscriptionScheduled", "subscriptionState", "settlement"])
        } catch {
            if fixture.accepted { problems.append("refused: \(error.code.rawValue) \(error)") }
        }
        Self.report(problems, for: fixture)
    }

    // MARK: - Incoming: JSON API answers (the submitter's reading)

    @Test(arguments: TrustPaymentsCorpus.all.of(kind: "webservicesResponse"))
    func webservicesResponse(_ fixture: Fixture) throws {
        guard case .object(var envelope)? = fixture.json, let answers = fixture.meaning("answers")?.stringValue else {
            Issue.record("\(fixture.name) needs a json object and meaning.answers")
            return
        }
        let config = TPFixtures.config
        let request: TPWebServicesRequest
        switch answers {
        case "transactionUpdate":
            request = try TPWebServices.request(
                for: Order(
                    orderId: "upd-1", operation: .transactionUpdate,
                    params: ["transactionReference": "12-3-2", "updates": ["baseamount": "999"]]),
                config: config)
        case "orderQuery":
            let orderId = fixture.meaning("orderId")?.stringValue ?? ""
            request = TPWebServices.orderQuery(for: OrderKey(merchant: "default", orderId: orderId), config: config)
        default:
            request = try TPWebServices.request(
                for: Order(orderId: "q-1", operation: .transactionQuery, params: ["transactionReference": "12-3-2"]), config: config)
        }
        // Trust Payments echoes the requestreference it was sent (its Python SDK's api.py checks it).
        envelope["requestreference"] = .string(request.requestReference)
        let response = HTTPResponseSpec(
            status: fixture.status ?? 200, headers: [HTTPHeader("Content-Type", "application/json")], body: JSONValue.object(envelope).bytes)

        let verdict: ProviderVerdict
        if answers == "orderQuery", let order = Self.order(fixture) {
            verdict = TrustPaymentsConnector.readOrderQuery(response, query: request, order: order, siteReference: config.siteReference)
        } else {
            verdict = TPWebServices.classify(response, for: request)
        }
        let result = Fixture.verdictResult(verdict)
        var actual: [String: JSONValue] = ["verdict": .string(Fixture.verdictName(verdict))]
        actual["errorCode"] = Self.errorCode(verdict)
        for key in ["transactionReference", "found", "settlement"] { actual[key] = result[key] }
        Self.report(Self.differences(fixture, actual, keys: ["verdict", "errorCode", "transactionReference", "found", "settlement"]), for: fixture)
    }

    // MARK: - Outgoing: the SDK JWT

    @Test(arguments: TrustPaymentsCorpus.all.of(kind: "sdkJwt"))
    func sdkJwt(_ fixture: Fixture) async throws {
        let documented = try #require(fixture.jwtPayload?["payload"]?.objectValue)
        let types = documented["requesttypedescriptions"]?.arrayValue?.compactMap(\.stringValue) ?? []
        // The order whose params ask for the documented subscription.
        var params: [String: JSONValue] = [:]
        for (param, field) in [
            ("subscriptionType", "subscriptiontype"), ("unit", "subscriptionunit"), ("frequency", "subscriptionfrequency"),
            ("number", "subscriptionnumber"), ("finalNumber", "subscriptionfinalnumber"), ("beginDate", "subscriptionbegindate"),
            ("transactionActive", "transactionactive"),
        ] {
            if let value = documented[field] { params[param] = value }
        }
        if types.first == "ACCOUNTCHECK" { params["freeTrial"] = true }
        let orderId = fixture.meaning("orderId")?.stringValue ?? "ord-000123"
        let order = Order(
            orderId: orderId, operation: .subscriptionJwt, amount: documented["baseamount"]?.stringValue.flatMap { Int64($0) },
            currency: documented["currencyiso3a"]?.stringValue, params: params)

        let signed = try await Self.connector().sign(order, purpose: .submit, nowSeconds: TPFixtures.seedIssuedAt)
        guard case .outcome(let status, let result) = signed, let jwt = result["jwt"]?.stringValue else {
            Issue.record("\(fixture.name): a subscriptionJwt order must be answered with the JWT, not a request")
            return
        }
        #expect(status == .pending)
        let parts = jwt.split(separator: ".", omittingEmptySubsequences: false)
        try #require(parts.count == 3)
        let header = try JSONValue.parse(try #require(TPFixtures.base64URLDecode(parts[0])))
        #expect(header["alg"] == fixture.meaning("alg"))
        let claims = try JSONValue.parse(try #require(TPFixtures.base64URLDecode(parts[1])))
        let payload = try #require(claims["payload"]?.objectValue)

        // Every documented field, with the documented value (numbers written as strings).
        for (field, value) in documented.sorted(by: { $0.key < $1.key }) {
            #expect(payload[field] == value, "\(fixture.name): payload.\(field) is \(String(describing: payload[field])), documented \(value)")
        }
        #expect(payload["orderreference"] == JSONValue.string(orderId))
        #expect(types.joined(separator: ",") == fixture.meaningText("requestTypes"))
        #expect(claims["iss"] == fixture.jwtPayload?["iss"])
        // iat in seconds; the documentation writes it as a string of digits, paypipe as a number.
        let documentedIat = fixture.jwtPayload?["iat"]?.stringValue.flatMap { Int64($0) } ?? fixture.jwtPayload?["iat"]?.integerValue
        #expect(claims["iat"]?.integerValue == documentedIat)
    }

    // MARK: - Outgoing: JSON API requests

    static func check(_ http: HTTPRequestSpec, against fixture: Fixture) throws {
        let documented = try #require(fixture.json)
        let entry = try #require(documented["request"]?.arrayValue?.first?.objectValue)
        #expect(http.method.rawValue == fixture.meaningText("method"))
        #expect(http.url.hasSuffix(fixture.meaningText("path") ?? "/json/"))
        #expect(http.header("Authorization")?.hasPrefix("Basic ") == true)
        #expect(http.header("Content-Type") == "application/json")
        let body = try JSONValue.parse(http.body)
        #expect(body["alias"] == JSONValue.string(TPFixtures.config.webservicesUser))
        #expect(body["version"] == documented["version"])
        let requests = try #require(body["request"]?.arrayValue)
        #expect(requests.count == 1)
        let sent = try #require(requests.first?.objectValue)
        #expect(Set(sent.keys) == Set(entry.keys), "\(fixture.name): sent \(sent.keys.sorted()), documented \(entry.keys.sorted())")
        let required = (fixture.meaningText("requiredFields") ?? "").split(separator: ",").map(String.init)
        for field in required { #expect(sent[field] != nil, "\(fixture.name): \(field) missing") }
        #expect(sent["requesttypedescriptions"] == entry["requesttypedescriptions"])
        #expect(sent["filter"] == entry["filter"])
        #expect(sent["updates"] == entry["updates"])
        // requestreference: paypipe's own, letters and digits like the SDK's A1wqmc662.
        let reference = try #require(sent["requestreference"]?.stringValue)
        #expect(!reference.isEmpty && reference.utf8.count <= 64 && reference.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) })
    }

    @Test(arguments: TrustPaymentsCorpus.all.of(kind: "transactionUpdateRequest"))
    func transactionUpdateRequest(_ fixture: Fixture) async throws {
        let entry = try #require(fixture.json?["request"]?.arrayValue?.first)
        let reference = try #require(entry["filter"]?["transactionreference"]?.arrayValue?.first?["value"])
        let updates = try #require(entry["updates"])
        let order = Order(orderId: "upd-1", operation: .transactionUpdate, params: ["transactionReference": reference, "updates": updates])
        guard case .request(let signed) = try await Self.connector().sign(order, purpose: .submit, nowSeconds: TPFixtures.seedIssuedAt) else {
            Issue.record("\(fixture.name): a transactionUpdate order must be sent")
            return
        }
        try Self.check(signed.request, against: fixture)
        // An update whose outcome is unknown is resolved by a query of the same reference.
        let resolve = try #require(signed.resolve)
        let query = try JSONValue.parse(resolve.body)["request"]?.arrayValue?.first
        #expect(query?["requesttypedescriptions"] == ["TRANSACTIONQUERY"])
        #expect(query?["filter"]?["transactionreference"] == entry["filter"]?["transactionreference"])
    }

    @Test(arguments: TrustPaymentsCorpus.all.of(kind: "transactionQueryRequest"))
    func transactionQueryRequest(_ fixture: Fixture) async throws {
        let entry = try #require(fixture.json?["request"]?.arrayValue?.first)
        let connector = await Self.connector()
        let signed: Signed<TrustPaymentsConnector.Context>?
        if fixture.meaningText("operation") == "orderQuery" {
            // The status check of a subscriptionJwt order whose result never came back.
            let orderId = fixture.meaningText("orderId") ?? ""
            let order = TPFixtures.order(TPFixtures.seedParams, orderId: orderId)
            signed = try connector.signStatusCheck(order, pending: [:], purpose: .statusCheck, nowSeconds: TPFixtures.seedIssuedAt)
        } else {
            let reference = try #require(entry["filter"]?["transactionreference"]?.arrayValue?.first?["value"])
            let order = Order(orderId: "q-1", operation: .transactionQuery, params: ["transactionReference": reference])
            signed = try connector.sign(order, purpose: .submit, nowSeconds: TPFixtures.seedIssuedAt)
        }
        guard case .request(let request)? = signed else {
            Issue.record("\(fixture.name): the query must be sent")
            return
        }
        try Self.check(request.request, against: fixture)
    }
}

import FixtureCorpus
import Foundation
import PaypipeCore
import Testing
import TrustPayments
import TrustPaymentsTesting

@testable import Sandbox
@testable import TrustPaymentsEmulation

/// The emulator says nothing Trust Payments' published messages (`TrustPaymentsCorpus`) never
/// say, in the forms they say it: `requestreference` as `W57-aubk3dr3`, response JWTs without
/// `sitereference` and with `aud`, JSON API answers without per-entry `requestreference` or
/// `found`, an unusable request type as an `ERROR` entry.
@Suite struct TrustPaymentsEmulatorShapeTests {
    static let corpus = TrustPaymentsCorpus.all
    var config: TrustPaymentsConfig { TPFixtures.config }

    /// `W` + digits + `-` + eight lower-case letters or digits (`W57-aubk3dr3`, `W23-rd55dned`).
    static func isTPRequestReference(_ text: String) -> Bool {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 2, parts[0].first == "W" else { return false }
        let digits = parts[0].dropFirst()
        return !digits.isEmpty && digits.allSatisfy { $0.isASCII && $0.isNumber } && parts[1].count == 8
            && parts[1].allSatisfy { $0.isASCII && ($0.isLowercase || $0.isNumber) }
    }

    @Test func theReferenceFormCheckTakesTheDocumentedExamples() {
        for documented in ["W57-aubk3dr3", "W23-rd55dned", "W72-g9wv2j5c", "W3-y2b7mvbk"] {
            #expect(Self.isTPRequestReference(documented), "\(documented)")
        }
        for other in ["W1a2b3c4d5e6", "A1wqmc662", "W57-AUBK3DR3", "57-aubk3dr3"] {
            #expect(!Self.isTPRequestReference(other), "\(other)")
        }
    }

    // MARK: JSON API (POST /json/)

    func update(_ amount: Int64, reference: String = "57-9-1") throws -> TPWebServicesRequest {
        try TPWebServices.request(
            for: Order(
                orderId: "shape-\(amount)", operation: .transactionUpdate,
                params: ["transactionReference": .string(reference), "updates": ["baseamount": .integer(amount)]]),
            config: config)
    }

    func makePayment(amount: Int64 = 1050) throws -> TPSandbox.Payment {
        let order = TPFixtures.order(TPFixtures.seedParams, amount: amount)
        let jwt = try TPJWTSigner(config: config).sign(order: order, issuedAt: TPFixtures.seedIssuedAt)
        return try TPSandbox.processPayment(jwt: jwt, config: config, now: TPFixtures.seedIssuedAt + 30)
    }

    func webServicesAnswer(_ request: TPWebServicesRequest, records: [[String: JSONValue]]? = nil) throws -> JSONValue {
        let response = TPSandbox.handleWebServices(body: request.http.body, headers: request.http.headers, config: config, records: records)
        #expect(response.status == 200)
        return try JSONValue.parse(response.body)
    }

    func expectWebServicesShape(_ answer: JSONValue, echoing reference: String, _ label: String) {
        #expect(
            Self.corpus.unpublishedPaths(in: answer, kind: "webservicesResponse").isEmpty,
            "\(label): \(Self.corpus.unpublishedPaths(in: answer, kind: "webservicesResponse"))")
        #expect(answer["requestreference"]?.stringValue == reference, "\(label)")
        for entry in answer["response"]?.arrayValue ?? [] {
            #expect(entry["requestreference"] == nil, "\(label): requestreference only at the top level")
            #expect(entry["found"] == nil, "\(label): no found member")
            #expect(entry["errorcode"]?.stringValue != nil, "\(label): errorcode as a string")
        }
    }

    @Test func updateAnswersHaveTheCorpusShape() throws {
        let payment = try makePayment()
        var cases: [(String, TPWebServicesRequest, [[String: JSONValue]]?, String)] = try [
            ("ok", update(1050), nil, "0"),
            ("decline", update(TPSandbox.declineAmount), nil, "70000"),
            ("bank error", update(TPSandbox.bankErrorAmount), nil, "60010"),
            ("unknown reference", update(1050), payment.records, "60014"),
        ]
        // A SUBSCRIPTION the payment scheduled can be updated.
        let scheduled = payment.records.first(where: { $0["requesttypedescription"] == "SUBSCRIPTION" })
        let subscription = try #require(scheduled?["transactionreference"]?.stringValue)
        let known = try update(2500, reference: subscription)
        cases.append(("known reference", known, payment.records, "0"))
        for (label, request, records, code) in cases {
            let answer = try webServicesAnswer(request, records: records)
            expectWebServicesShape(answer, echoing: request.requestReference, label)
            let entry = answer["response"]?.arrayValue?.first
            #expect(entry?["errorcode"]?.stringValue == code, "\(label)")
            #expect(entry?["requesttypedescription"] == "TRANSACTIONUPDATE", "\(label)")
        }
    }

    @Test func aNotUpdatableFieldIs60017AsTheCorpusShows() throws {
        let frozen: JSONValue = [
            "alias": "ws@example.com", "version": "1.00",
            "request": [
                [
                    "requestreference": "W23-rd55dned", "requesttypedescriptions": ["TRANSACTIONUPDATE"],
                    "filter": ["sitereference": [["value": "test_site12345"]], "transactionreference": [["value": "12-3-2"]]],
                    "updates": ["subscriptionnumber": "2"],
                ]
            ],
        ]
        let response = TPSandbox.handleWebServices(body: frozen.bytes, headers: try update(1).http.headers, config: config)
        let answer = try JSONValue.parse(response.body)
        expectWebServicesShape(answer, echoing: "W23-rd55dned", "60017")
        let expected = Self.corpus.named("webservices-response--update-not-updatable-60017").json?["response"]?.arrayValue?.first
        let entry = answer["response"]?.arrayValue?.first
        #expect(entry?["errorcode"] == expected?["errorcode"])
        #expect(entry?["requesttypedescription"] == expected?["requesttypedescription"])
    }

    @Test func queryAnswersHaveTheCorpusShape() throws {
        let payment = try makePayment()
        // A reference query the stateless emulator answers with one record.
        let referenceQuery = TPWebServices.referenceQuery(
            transactionReference: "57-9-55555555", for: OrderKey(merchant: "default", orderId: "shape-q"), config: config)
        let byReference = try webServicesAnswer(referenceQuery)
        expectWebServicesShape(byReference, echoing: referenceQuery.requestReference, "reference query")
        #expect(byReference["response"]?.arrayValue?.first?["records"]?.arrayValue?.count == 1)

        // The order query before and after the customer paid.
        let orderQuery = TPWebServices.orderQuery(for: OrderKey(merchant: "default", orderId: "ord-000123"), config: config)
        let before = try webServicesAnswer(orderQuery, records: [])
        expectWebServicesShape(before, echoing: orderQuery.requestReference, "order query, nothing yet")
        #expect(before["response"]?.arrayValue?.first?["records"] == .array([]))
        let after = try webServicesAnswer(orderQuery, records: payment.records)
        expectWebServicesShape(after, echoing: orderQuery.requestReference, "order query, paid")
        let records = after["response"]?.arrayValue?.first?["records"]?.arrayValue ?? []
        #expect(!records.isEmpty)
        for record in records {
            // Records, unlike response JWT entries, name the site (the corpus's query records do).
            #expect(record["sitereference"] == .string(config.siteReference))
            #expect(record["requestreference"] == nil)
        }
    }

    @Test func aRequestTypeTheGatewayCannotTakeIsAnErrorEntry() throws {
        // No requestreference sent: the answer carries one in Trust Payments' own form.
        let request: JSONValue = [
            "alias": "ws@example.com", "version": "1.00",
            "request": [["requesttypedescriptions": ["BADREQUEST"], "filter": ["sitereference": [["value": "test_site12345"]]]]],
        ]
        let headers = try update(1).http.headers
        let response = TPSandbox.handleWebServices(body: request.bytes, headers: headers, config: config)
        #expect(response.status == 200)
        let answer = try JSONValue.parse(response.body)
        let reference = try #require(answer["requestreference"]?.stringValue)
        #expect(Self.isTPRequestReference(reference), "\(reference)")
        expectWebServicesShape(answer, echoing: reference, "ERROR entry")
        // The corpus's ERROR entry: requesttypedescription ERROR, 60018, the type as errordata.
        let sample = try #require(Self.corpus.named("webservices-response--error-entry-60018").json?["response"]?.arrayValue?.first)
        let entry = try #require(answer["response"]?.arrayValue?.first)
        #expect(entry["requesttypedescription"] == sample["requesttypedescription"])
        #expect(entry["errorcode"] == sample["errorcode"])
        #expect(entry["errormessage"] == sample["errormessage"])
        #expect(entry["errordata"] == ["BADREQUEST"])
        // The same body gets the same reference (deterministic, no clock or randomness).
        let again = try JSONValue.parse(TPSandbox.handleWebServices(body: request.bytes, headers: headers, config: config).body)
        #expect(again["requestreference"]?.stringValue == reference)
    }

    // MARK: SDK payment: the response JWT and the URL notification

    static func claims(of token: String) throws -> JSONValue {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        #expect(parts.count == 3)
        let bytes = try #require(SandboxCrypto.base64URLDecode(parts[1]))
        return try JSONValue.parse(bytes)
    }

    @Test(arguments: [Int64(1050), TPSandbox.declineAmount, TPSandbox.bankErrorAmount])
    func theResponseJWTHasTheSampleShape(amount: Int64) throws {
        let payment = try makePayment(amount: amount)
        let claims = try Self.claims(of: payment.responseJWT)
        #expect(
            Self.corpus.unpublishedPaths(in: claims, kind: "responseJWT").isEmpty, "\(Self.corpus.unpublishedPaths(in: claims, kind: "responseJWT"))")
        // Trust Payments' sample names the JWT user as `aud`, and has no `iss`.
        #expect(claims["aud"] == .string(config.jwtIssuer))
        #expect(claims["iss"] == nil)
        let reference = try #require(claims["payload"]?["requestreference"]?.stringValue)
        #expect(Self.isTPRequestReference(reference), "\(reference)")
        #expect(reference == payment.requestReference)
        let entries = claims["payload"]?["response"]?.arrayValue ?? []
        for entry in entries {
            #expect(entry["sitereference"] == nil, "no sitereference in a response JWT entry, as the sample")
            #expect(entry["requestreference"] == nil)
        }
        let auth = try #require(entries.first(where: { $0["requesttypedescription"] == "AUTH" }))
        let hasSubscription = entries.contains { $0["requesttypedescription"] == "SUBSCRIPTION" }
        switch amount {
        case TPSandbox.declineAmount:
            let sample = Self.corpus.named("response-jwt--auth-declined-70000").jwtPayload?["payload"]?["response"]?.arrayValue?
                .first(where: { $0["requesttypedescription"] == "AUTH" })
            #expect(auth["errorcode"] == sample?["errorcode"])
            #expect(auth["errormessage"] == sample?["errormessage"])
            #expect(auth["settlestatus"] == sample?["settlestatus"])
            #expect(!hasSubscription)
        case TPSandbox.bankErrorAmount:
            let sample = Self.corpus.named("response-jwt--auth-bank-system-error-60010").jwtPayload?["payload"]?["response"]?.arrayValue?
                .first(where: { $0["requesttypedescription"] == "AUTH" })
            #expect(auth["errorcode"] == sample?["errorcode"])
            #expect(auth["errormessage"] == sample?["errormessage"])
            #expect(auth["settlestatus"] == sample?["settlestatus"])
            #expect(!hasSubscription)
        default:
            #expect(auth["errorcode"] == "0")
            #expect(auth["settlestatus"] == "0")
            #expect(hasSubscription)
        }
        // Deterministic: the same SDK JWT gets the same requestreference.
        #expect(try makePayment(amount: amount).requestReference == payment.requestReference)
    }

    @Test(arguments: [Int64(1050), TPSandbox.declineAmount, TPSandbox.bankErrorAmount])
    func theURLNotificationHasTheCorpusFields(amount: Int64) throws {
        let payment = try makePayment(amount: amount)
        let fields = try TPNotification.parseForm(payment.notificationBody)
        let names = Set(fields.map { $0.name }).subtracting(["responsesitesecurity"])
        #expect(names.subtracting(Self.corpus.formFields(ofKind: "urlNotification")).isEmpty, "\(names.sorted())")
        var values: [String: String] = [:]
        for field in fields { values[field.name] = field.value }
        // paypipe reads a notification without baseamount and currencyiso3a as undecided.
        #expect(values["baseamount"] == String(amount))
        #expect(values["currencyiso3a"] == "GBP")
        let reference = try #require(values["requestreference"])
        #expect(Self.isTPRequestReference(reference), "\(reference)")
        #expect(reference == payment.requestReference)
        // It reads as the payment it reports.
        let event = try TPNotification.verify(fields: fields, password: config.notificationPassword)
        let order = TPFixtures.order(TPFixtures.seedParams, amount: amount)
        let verdict = event.verdict(for: TPExpectedOrder(order: order, config: config))
        switch amount {
        case TPSandbox.declineAmount: #expect(TPFixtures.kind(verdict) == "failed:DECLINED")
        case TPSandbox.bankErrorAmount: #expect({ if case .unknown? = verdict { true } else { false } }())
        default: #expect({ if case .succeeded? = verdict { true } else { false } }())
        }
    }

    @Test func engineNotificationsHaveTheCorpusFields() {
        var series = TrustPaymentsEmulator.Series(
            merchant: "default", parent: "57-9-18087", orderReference: "ord-000123", amount: 1050, currency: "GBP", unit: "DAY",
            frequency: 1, number: 1, finalNumber: 4, nextDue: 86_400_000)
        var store = TrustPaymentsEmulator.Store()
        var sent = TrustPaymentsEmulator.run(&series, until: 86_400_000, siteReference: "test_site12345", store: &store).sent
        series.declineNext = true
        sent += TrustPaymentsEmulator.run(&series, until: 10 * 86_400_000, siteReference: "test_site12345", store: &store).sent
        #expect(!sent.isEmpty)
        let documented = Self.corpus.formFields(ofKind: "urlNotification")
        for fields in sent {
            let names = Set(fields.map { $0.name })
            #expect(names.subtracting(documented).isEmpty, "\(names.sorted())")
            #expect(names.contains("baseamount") && names.contains("currencyiso3a"))
        }
    }
}

import Foundation
import PaypipeCore
import Testing
import TrustPayments
import TrustPaymentsTesting

@testable import Sandbox
@testable import TrustPaymentsEmulation

@Suite struct TrustPaymentsSandboxTests {
    static func updateOrder(_ orderId: String, amount: Int64, reference: String = "57-9-12345678") -> Order {
        Order(
            orderId: orderId, operation: .transactionUpdate,
            params: ["transactionReference": .string(reference), "updates": ["baseamount": .integer(amount)]])
    }

    @Test func anUpdateIsAcceptedAndClassifiedAsSucceeded() async throws {
        try await withSandbox { sandbox in
            let config = try #require(try Fixtures.merchant(sandbox.config).trustpayments)
            let request = try TPWebServices.request(for: Self.updateOrder("tp-ok", amount: 1050), config: config)
            #expect(request.http.url == "http://127.0.0.1:\(sandbox.port)/trustpayments/json/")
            let response = try await sandbox.send(request.http)
            #expect(response.status == 200)
            // The echoed requestreference is what classify insists on.
            let parsed = try TPWebServicesResponse(body: response.body)
            #expect(parsed.requestReference == request.requestReference)
            #expect(TPWebServices.classify(response, for: request).kind == "succeeded")
            #expect(sandbox.ledger.effects("trustpayments:" + request.requestReference) == 1)
            #expect(sandbox.ledger.requests("trustpayments:" + request.requestReference) == 1)
        }
    }

    @Test(arguments: [(Int64(70000), "failed:"), (60010, "retry"), (1050, "succeeded")])
    func testAmountsBehaveAsDocumented(amount: Int64, expected: String) async throws {
        try await withSandbox { sandbox in
            let config = try #require(try Fixtures.merchant(sandbox.config).trustpayments)
            let request = try TPWebServices.request(for: Self.updateOrder("tp-amount-\(amount)", amount: amount), config: config)
            let response = try await sandbox.send(request.http)
            #expect(response.status == 200)
            #expect(TPWebServices.classify(response, for: request).kind.hasPrefix(expected))
            let effects = sandbox.ledger.effects("trustpayments:" + request.requestReference)
            #expect(effects == (expected == "succeeded" ? 1 : 0))
        }
    }

    @Test func wrongWebServicesPasswordIsRefusedWith401() async throws {
        try await withSandbox { sandbox in
            var config = try #require(try Fixtures.merchant(sandbox.config).trustpayments)
            config.webservicesPassword = Secret("not-the-password")
            let request = try TPWebServices.request(for: Self.updateOrder("tp-401", amount: 1050), config: config)
            let response = try await sandbox.send(request.http)
            #expect(response.status == 401)
            #expect(TPWebServices.classify(response, for: request).kind == "failed:UNAUTHORIZED")
            #expect(sandbox.ledger.effects("trustpayments:" + request.requestReference) == 0)
            #expect(sandbox.ledger.requests("trustpayments:" + request.requestReference) == 1)
        }
    }

    @Test func aQueryFindsTheUpdateInPlace() async throws {
        try await withSandbox { sandbox in
            let config = try #require(try Fixtures.merchant(sandbox.config).trustpayments)
            let update = try TPWebServices.request(for: Self.updateOrder("tp-resolve", amount: 2500, reference: "57-9-55555555"), config: config)
            _ = try await sandbox.send(update.http)
            let query = TPWebServices.referenceQuery(
                transactionReference: "57-9-55555555", for: OrderKey(merchant: "default", orderId: "tp-resolve"), config: config)
            let answer = try await sandbox.send(query.http)
            #expect(TPWebServices.resolveUpdate(queryResponse: answer, query: query, update: update).kind == "succeeded")

            // A different amount is not in place: the module says the update may be sent again.
            let other = try TPWebServices.request(for: Self.updateOrder("tp-resolve-2", amount: 9999, reference: "57-9-55555555"), config: config)
            #expect(TPWebServices.resolveUpdate(queryResponse: answer, query: query, update: other).kind == "retry")
        }
    }

    @Test func anSDKPaymentIsFoundByAnOrderQuery() async throws {
        try await withSandbox { sandbox in
            let config = try #require(try Fixtures.merchant(sandbox.config).trustpayments)
            let order = Order(
                orderId: "tp-sdk-1", operation: .subscriptionJwt, amount: 1050, currency: "GBP",
                params: ["subscriptionType": "RECURRING", "unit": "MONTH", "frequency": 1, "number": 1, "finalNumber": 12])
            let expected = TPExpectedOrder(order: order, config: config)

            // Before the customer pays, the order query finds nothing: pending.
            let query = TPWebServices.orderQuery(for: order.key, config: config)
            let before = try await sandbox.send(query.http)
            #expect(TPWebServices.classifyOrderQuery(before, for: query, expected: expected).kind == "pending")

            let jwt = try TPJWTSigner(config: config).sign(order: order, issuedAt: Timestamp.nowMilliseconds() / 1000)
            let payment = try await sandbox.send(
                HTTPRequestSpec(
                    method: .POST, url: "http://127.0.0.1:\(sandbox.port)/trustpayments/sdk/payment",
                    headers: [HTTPHeader("Content-Type", "application/json")], body: Array(JSONValue.object(["jwt": .string(jwt)]).serialized.utf8)))
            #expect(payment.status == 200)
            let document = try JSONValue.parse(payment.body)
            #expect(document["jwt"]?.stringValue?.split(separator: ".").count == 3)

            let after = try await sandbox.send(query.http)
            let verdict = TPWebServices.classifyOrderQuery(after, for: query, expected: expected)
            #expect(verdict.kind == "succeeded")
        }
    }

    @Test func anSDKPaymentSignedWithAnotherSecretIsRefused() async throws {
        try await withSandbox { sandbox in
            var config = try #require(try Fixtures.merchant(sandbox.config).trustpayments)
            config.jwtSecret = Secret("another-secret-of-at-least-32-bytes-long!!")
            let order = Order(
                orderId: "tp-sdk-2", operation: .subscriptionJwt, amount: 1050, currency: "GBP",
                params: ["subscriptionType": "RECURRING", "unit": "MONTH", "frequency": 1, "number": 1, "finalNumber": 12])
            let jwt = try TPJWTSigner(config: config).sign(order: order, issuedAt: Timestamp.nowMilliseconds() / 1000)
            let payment = try await sandbox.send(
                HTTPRequestSpec(
                    method: .POST, url: "http://127.0.0.1:\(sandbox.port)/trustpayments/sdk/payment",
                    body: Array(JSONValue.object(["jwt": .string(jwt)]).serialized.utf8)))
            #expect(payment.status == 400)
            #expect(try await sandbox.ledgerDocument()["effects"] == .object([:]))
        }
    }
}

// MARK: The emulator on its own, without the server

extension TrustPaymentsSandboxTests {
    var config: TrustPaymentsConfig { TPFixtures.config }

    func update(_ amount: Int64) throws -> TPWebServicesRequest {
        try TPWebServices.request(
            for: Order(
                orderId: "upd-\(amount)", operation: .transactionUpdate,
                params: ["transactionReference": "57-9-1", "updates": ["baseamount": .integer(amount)]]),
            config: config)
    }

    func roundTrip(_ request: TPWebServicesRequest, records: [[String: JSONValue]]? = nil) -> (HTTPResponseSpec, ProviderVerdict) {
        let response = TPSandbox.handleWebServices(body: request.http.body, headers: request.http.headers, config: config, records: records)
        return (response, TPWebServices.classify(response, for: request))
    }

    @Test func testAmounts() throws {
        let (ok, okVerdict) = roundTrip(try update(1050))
        #expect(ok.status == 200)
        #expect({ if case .succeeded = okVerdict { true } else { false } }())
        let decline = try update(70000), bankError = try update(60010)
        #expect(TPFixtures.kind(roundTrip(decline).1) == "failed:DECLINED")
        #expect(TPFixtures.kind(roundTrip(bankError).1) == "retry")
        let echoed = try TPWebServicesResponse(body: ok.body)
        #expect(try echoed.requestReference == update(1050).requestReference)
    }

    @Test func credentialsAreChecked() throws {
        let request = try update(1050)
        var headers = request.http.headers.filter { $0.name != "Authorization" }
        #expect(TPSandbox.handleWebServices(body: request.http.body, headers: headers, config: config).status == 401)
        headers.append(HTTPHeader("Authorization", "Basic " + Data("ws@example.com:wrong".utf8).base64EncodedString()))
        #expect(TPSandbox.handleWebServices(body: request.http.body, headers: headers, config: config).status == 401)
        #expect(TPSandbox.handleWebServices(body: Array("nope".utf8), headers: request.http.headers, config: config).status == 400)
    }

    @Test func siteAndFieldsAreChecked() throws {
        var other = config
        other.siteReference = "test_site99999"
        let request = try TPWebServices.request(
            for: Order(orderId: "u", operation: .transactionUpdate, params: ["transactionReference": "57-9-1", "updates": ["baseamount": 5]]),
            config: other)
        #expect({ if case .failed(code: "UNAUTHENTICATED", _) = roundTrip(request).1 { true } else { false } }())

        let frozen: JSONValue = [
            "alias": "ws@example.com", "version": "1.00",
            "request": [
                [
                    "requestreference": "R1", "requesttypedescriptions": ["TRANSACTIONUPDATE"],
                    "filter": ["sitereference": [["value": "test_site12345"]], "transactionreference": [["value": "1-2-3"]]],
                    "updates": ["subscriptionnumber": "2"],
                ]
            ],
        ]
        let response = TPSandbox.handleWebServices(body: Array(frozen.serialized.utf8), headers: try update(1).http.headers, config: config)
        let entry = try TPWebServicesResponse(body: response.body).entries.first
        #expect(entry?["errorcode"] == "60017")
        #expect(entry?["errordata"] == ["subscriptionnumber"])
    }

    @Test func statefulQueriesAndUnknownReferences() throws {
        let payment = try TPSandbox.processPayment(
            jwt: TPJWTSigner(config: config).sign(order: TPFixtures.order(TPFixtures.seedParams), issuedAt: TPFixtures.seedIssuedAt), config: config,
            now: TPFixtures.seedIssuedAt)
        let query = TPWebServices.orderQuery(for: OrderKey(merchant: "default", orderId: "ord-000123"), config: config)
        let response = TPSandbox.handleWebServices(body: query.http.body, headers: query.http.headers, config: config, records: payment.records)
        let expected = TPExpectedOrder(orderId: "ord-000123", siteReference: "test_site12345", amount: 1050, currency: "GBP")
        #expect({ if case .succeeded = TPWebServices.classifyOrderQuery(response, for: query, expected: expected) { true } else { false } }())
        let unknownReference = try update(1050)
        #expect(TPFixtures.kind(roundTrip(unknownReference, records: payment.records).1) == "failed:REFERENCE_NOT_FOUND")
    }

    @Test func sdkPaymentEndToEnd() async throws {
        let signer = TPJWTSigner(config: config)
        let verifier = await TPResponseJWTVerifier(secret: config.jwtSecret)
        let now = TPFixtures.seedIssuedAt + 30
        for (amount, code) in [(1050 as Int64, nil as OutcomeErrorCode?), (70000, "DECLINED"), (60010, nil)] {
            let order = TPFixtures.order(TPFixtures.seedParams, amount: amount)
            let payment = try TPSandbox.processPayment(
                jwt: try signer.sign(order: order, issuedAt: TPFixtures.seedIssuedAt), config: config, now: now)
            let response = try await verifier.verify(payment.responseJWT, now: now, maxAgeSeconds: 3600)
            let verdict = response.verdict(for: TPExpectedOrder(order: order, config: config))
            let event = try TPNotification.verify(
                fields: try TPNotification.parseForm(payment.notificationBody), password: config.notificationPassword)
            let notified = event.verdict(for: TPExpectedOrder(order: order, config: config))
            if amount == TPSandbox.bankErrorAmount {
                // Its final status is unknown to Trust Payments: the order query decides.
                #expect({ if case .unknown = verdict { true } else { false } }())
                #expect({ if case .unknown? = notified { true } else { false } }())
            } else if let code {
                #expect({ if case .failed(code, _) = verdict { true } else { false } }(), "amount \(amount)")
                #expect({ if case .failed(code, _)? = notified { true } else { false } }(), "amount \(amount)")
                #expect(!response.entries.contains { $0["requesttypedescription"] == "SUBSCRIPTION" })
            } else {
                guard case .succeeded(let result) = verdict else {
                    Issue.record("1050 succeeds")
                    continue
                }
                #expect(result["subscriptionScheduled"] == true)
                guard case .succeeded(let notice)? = notified else {
                    Issue.record("notification succeeds")
                    continue
                }
                #expect(notice["transactionReference"] == result["transactionReference"])
                #expect(notice["transactionReference"] != nil)
            }
        }
    }

    @Test func sdkRequestsAreChecked() throws {
        let token = try TPJWTSigner(config: config).sign(order: TPFixtures.order(TPFixtures.seedParams), issuedAt: 1)
        var wrongSecret = config
        wrongSecret.jwtSecret = Secret("another-secret-another-secret-another-secret")
        #expect(throws: TPSandbox.RequestError.self) { try TPSandbox.processPayment(jwt: token, config: wrongSecret, now: 1) }
        var wrongIssuer = config
        wrongIssuer.jwtIssuer = "someone"
        #expect(throws: TPSandbox.RequestError.self) { try TPSandbox.processPayment(jwt: token, config: wrongIssuer, now: 1) }
        #expect(throws: TPSandbox.RequestError.self) { try TPSandbox.processPayment(jwt: "x.y.z", config: config, now: 1) }
    }
}

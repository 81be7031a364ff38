import Foundation
import PaypipeCore
import Testing
import TrustPaymentsTesting

@testable import TrustPayments

@Suite struct TPWebServicesTests {
    let config = TPFixtures.config

    func updateOrder(_ updates: JSONValue, reference: JSONValue = "56-9-123456") -> Order {
        Order(orderId: "upd-1", operation: .transactionUpdate, params: ["transactionReference": reference, "updates": updates])
    }

    func rejection(_ order: Order) -> Rejection? {
        do {
            _ = try TPWebServices.request(for: order, config: config)
            return nil
        } catch {
            return error
        }
    }

    func response(_ status: Int = 200, _ body: JSONValue) -> HTTPResponseSpec {
        HTTPResponseSpec(status: status, body: Array(body.serialized.utf8))
    }

    func answer(_ request: TPWebServicesRequest, _ entry: JSONValue, reference: String? = nil) -> HTTPResponseSpec {
        response(
            200, ["requestreference": .string(reference ?? request.requestReference), "version": "1.00", "response": [entry], "secrand": "ab12"])
    }

    @Test func updateRequestShape() throws {
        let request = try TPWebServices.request(
            for: updateOrder(["baseamount": 999, "subscriptionunit": "month", "transactionactive": 0]), config: config)
        #expect(request.http.method == .POST)
        #expect(request.http.url == "http://127.0.0.1:9101/json/")
        #expect(request.http.header("Content-Type") == "application/json")
        #expect(request.http.header("Accept") == "application/json")
        let expectedAuth = "Basic " + Data("ws@example.com:ws-password".utf8).base64EncodedString()
        #expect(request.http.header("Authorization") == expectedAuth)
        #expect(!request.http.description.contains("Basic"))
        let body = try JSONValue.parse(request.http.body)
        let expected: JSONValue = [
            "alias": "ws@example.com", "version": "1.00",
            "request": [
                [
                    "requestreference": .string(request.requestReference),
                    "requesttypedescriptions": ["TRANSACTIONUPDATE"],
                    "filter": ["sitereference": [["value": "test_site12345"]], "transactionreference": [["value": "56-9-123456"]]],
                    "updates": ["baseamount": "999", "subscriptionunit": "MONTH", "transactionactive": "0"],
                ]
            ],
        ]
        #expect(body == expected)
        #expect(TPWebServicesRequest(http: request.http) == request)
    }

    @Test func requestReferenceIsDeterministicShortAndAlphanumeric() throws {
        let a = TPWebServices.requestReference(for: OrderKey(merchant: "default", orderId: "o1"))
        #expect(a == TPWebServices.requestReference(for: OrderKey(merchant: "default", orderId: "o1")))
        #expect(a != TPWebServices.requestReference(for: OrderKey(merchant: "other", orderId: "o1")))
        #expect(a != TPWebServices.requestReference(for: OrderKey(merchant: "default", orderId: "o1"), purpose: "orderquery"))
        #expect(a.count == 18)
        #expect(a.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) })
        #expect(TPWebServices.endpoint(baseURL: "https://webservices.securetrading.net/") == "https://webservices.securetrading.net/json/")
    }

    @Test func updateRules() {
        #expect(rejection(updateOrder([:]))?.field == "params.updates")
        #expect(rejection(updateOrder("x"))?.field == "params.updates")
        #expect(rejection(updateOrder(["subscriptionbegindate": "2020-01-01"]))?.field == "params.updates.subscriptionbegindate")
        #expect(rejection(updateOrder(["subscriptionnumber": 2]))?.field == "params.updates.subscriptionnumber")
        #expect(rejection(updateOrder(["currencyiso3a": "EUR"]))?.field == "params.updates.currencyiso3a")
        // An unknown key is UNKNOWN_FIELD, as everywhere.
        #expect(rejection(updateOrder(["currencyiso3a": "EUR"]))?.code == .unknownField)
        #expect(rejection(updateOrder(["subscriptionnumber": 2]))?.code == .invalidParam)
        #expect(
            rejection(updateOrder(["baseamount": .null]))?.message == "params.updates.baseamount must be an integer or a string of digits, got null")
        #expect(rejection(updateOrder(["baseamount": 0]))?.field == "params.updates.baseamount")
        #expect(rejection(updateOrder(["baseamount": 999]))?.field == nil)
        #expect(rejection(updateOrder(["transactionactive": 2]))?.field == "params.updates.transactionactive")
        #expect(rejection(updateOrder(["subscriptionfrequency": 0]))?.field == "params.updates.subscriptionfrequency")
        #expect(rejection(updateOrder(["subscriptionunit": "YEAR"]))?.field == "params.updates.subscriptionunit")
        #expect(rejection(updateOrder(["subscriptionfinalnumber": 0]))?.field == nil)
        #expect(rejection(updateOrder(["subscriptionfinalnumber": 100_000]))?.field == "params.updates.subscriptionfinalnumber")
        #expect(rejection(updateOrder(["baseamount": 1], reference: "1-2\"}"))?.field == "params.transactionReference")
        #expect(rejection(Order(orderId: "u", operation: .transactionUpdate, params: ["updates": ["baseamount": 1]]))?.code == .missingParam)
    }

    @Test func queryRequestShapeAndOrderQuery() throws {
        let order = Order(orderId: "q-1", operation: .transactionQuery, params: ["transactionReference": "56-9-1"])
        let request = try TPWebServices.request(for: order, config: config)
        let entry = try #require(try JSONValue.parse(request.http.body)["request"]?.arrayValue?.first)
        #expect(entry["requesttypedescriptions"] == ["TRANSACTIONQUERY"])
        #expect(entry["filter"] == ["sitereference": [["value": "test_site12345"]], "transactionreference": [["value": "56-9-1"]]])
        #expect(entry["updates"] == nil)
        #expect(rejection(Order(orderId: "q", operation: .transactionQuery, params: [:]))?.field == "params.transactionReference")

        let resolve = TPWebServices.orderQuery(for: OrderKey(merchant: "default", orderId: "ord-9"), config: config)
        let filter = try #require(try JSONValue.parse(resolve.http.body)["request"]?.arrayValue?.first?["filter"])
        #expect(filter == ["sitereference": [["value": "test_site12345"]], "orderreference": [["value": "ord-9"]]])
        #expect(TPWebServicesRequest(http: resolve.http)?.kind == .orderQuery)
    }

    @Test func classificationTable() throws {
        let update = try TPWebServices.request(for: updateOrder(["baseamount": 999]), config: config)
        let query = try TPWebServices.request(
            for: Order(orderId: "q", operation: .transactionQuery, params: ["transactionReference": "1-2-3"]), config: config)
        func code(_ errorcode: String, _ request: TPWebServicesRequest) -> ProviderVerdict {
            TPWebServices.classify(
                answer(request, ["errorcode": .string(errorcode), "errormessage": "msg", "errordata": ["baseamount"]]), for: request)
        }
        guard case .succeeded(let result) = code("0", update) else {
            Issue.record("0 must succeed")
            return
        }
        #expect(result["transactionReference"] == "56-9-123456")
        if case .failed(let c, let message) = code("30000", update) {
            #expect(c == "INVALID_FIELD")
            #expect(message.contains("baseamount"))
        } else {
            Issue.record("30000 must fail")
        }
        #expect({ if case .retry = code("60010", update) { true } else { false } }())
        #expect({ if case .retry = code("50005", update) { true } else { false } }())
        #expect({ if case .failed(code: "DECLINED", _) = code("70000", update) { true } else { false } }())
        #expect({ if case .unknown = code("70001", update) { true } else { false } }())
        #expect({ if case .failed(code: "REFERENCE_NOT_FOUND", _) = code("60014", update) { true } else { false } }())
        #expect({ if case .failed(code: "NOT_UPDATABLE", _) = code("60017", update) { true } else { false } }())
        #expect({ if case .failed(code: "UNAUTHENTICATED", _) = code("60022", update) { true } else { false } }())
        #expect({ if case .failed(code: "SUBSCRIPTION_PRECONDITION", _) = code("20018", update) { true } else { false } }())
        #expect({ if case .failed(code: "SUBSCRIPTION_PRECONDITION", _) = code("20019", update) { true } else { false } }())
        #expect({ if case .failed(code: "TP_ERROR_12345", _) = code("12345", update) { true } else { false } }())

        let http500 = HTTPResponseSpec(status: 503, body: [])
        #expect({ if case .unknown = TPWebServices.classify(http500, for: update) { true } else { false } }())
        #expect({ if case .retry = TPWebServices.classify(http500, for: query) { true } else { false } }())
        #expect(
            {
                if case .failed(code: "UNAUTHORIZED", _) = TPWebServices.classify(HTTPResponseSpec(status: 401), for: update) { true } else { false }
            }())
        let html = HTTPResponseSpec(status: 200, body: Array("<html>".utf8))
        #expect({ if case .unknown = TPWebServices.classify(html, for: update) { true } else { false } }())
        #expect({ if case .retry = TPWebServices.classify(html, for: query) { true } else { false } }())
        let foreign = answer(update, ["errorcode": "0"], reference: "W00-other")
        #expect({ if case .unknown = TPWebServices.classify(foreign, for: update) { true } else { false } }())
    }

    @Test func queryResultCarriesRecords() throws {
        let query = try TPWebServices.request(
            for: Order(orderId: "q", operation: .transactionQuery, params: ["transactionReference": "1-2-3"]), config: config)
        let verdict = TPWebServices.classify(
            answer(query, ["errorcode": "0", "found": "1", "records": [["transactionreference": "1-2-3", "transactionactive": "1"]]]), for: query)
        guard case .succeeded(let result) = verdict else {
            Issue.record("expected success")
            return
        }
        #expect(result["found"] == 1)
        #expect(result["records"] == [["transactionreference": "1-2-3", "transactionactive": "1"]])
    }

    @Test func resolveUnknownUpdate() throws {
        let update = try TPWebServices.request(for: updateOrder(["baseamount": 999]), config: config)
        let query = TPWebServices.referenceQuery(
            transactionReference: "56-9-123456", for: OrderKey(merchant: "default", orderId: "upd-1"), config: config)
        let applied = answer(query, ["errorcode": "0", "found": "1", "records": [["transactionreference": "56-9-123456", "baseamount": "999"]]])
        #expect({ if case .succeeded = TPWebServices.resolveUpdate(queryResponse: applied, query: query, update: update) { true } else { false } }())
        let notApplied = answer(query, ["errorcode": "0", "found": "1", "records": [["transactionreference": "56-9-123456", "baseamount": "1050"]]])
        #expect({ if case .retry = TPWebServices.resolveUpdate(queryResponse: notApplied, query: query, update: update) { true } else { false } }())
    }

    @Test func orderQueryResolvesASubscriptionOrder() {
        let key = OrderKey(merchant: "default", orderId: "ord-000123")
        let query = TPWebServices.orderQuery(for: key, config: config)
        let expected = TPExpectedOrder(orderId: "ord-000123", siteReference: "test_site12345", amount: 1050, currency: "GBP")
        func records(_ list: [JSONValue]) -> HTTPResponseSpec {
            answer(query, ["errorcode": "0", "found": .string(String(list.count)), "records": .array(list)])
        }
        let auth: [String: JSONValue] = [
            "requesttypedescription": "AUTH", "errorcode": "0", "orderreference": "ord-000123", "sitereference": "test_site12345",
            "baseamount": "1050", "currencyiso3a": "GBP", "transactionreference": "57-9-1", "settlestatus": "100",
        ]
        guard case .succeeded(let result) = TPWebServices.classifyOrderQuery(records([.object(auth)]), for: query, expected: expected) else {
            Issue.record("expected success")
            return
        }
        #expect(result["transactionReference"] == "57-9-1")
        #expect(result["settlement"] == "settled")
        #expect(TPWebServices.classifyOrderQuery(records([]), for: query, expected: expected) == .pending(["found": 0]))
        var declined = auth
        declined["errorcode"] = "70000"
        #expect(
            {
                if case .failed(code: "DECLINED", _) = TPWebServices.classifyOrderQuery(records([.object(declined)]), for: query, expected: expected)
                {
                    true
                } else {
                    false
                }
            }())
        var other = auth
        other["baseamount"] = "1"
        #expect(
            {
                if case .failed(code: "AMOUNT_MISMATCH", _) = TPWebServices.classifyOrderQuery(
                    records([.object(other)]), for: query, expected: expected)
                {
                    true
                } else {
                    false
                }
            }())
    }
}

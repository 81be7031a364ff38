import Foundation
import PaypipeCore
import Testing
import TrustPaymentsTesting

@testable import TrustPayments

@Suite struct TPRefundTests {
    let config = TPFixtures.config

    static func refundOrder(
        _ orderId: String = "rf-1", amount: Int64 = 600,
        params: [String: JSONValue] = ["refundOf": "ord-000123", "transactionReference": "57-9-1234"]
    ) -> Order {
        Order(orderId: orderId, operation: .tpRefund, amount: amount, currency: "GBP", params: params)
    }

    func rejection(_ order: Order) -> Rejection? {
        do {
            _ = try TPWebServices.request(for: order, config: config)
            return nil
        } catch {
            return error
        }
    }

    func answer(_ request: TPWebServicesRequest, _ entry: JSONValue) -> HTTPResponseSpec {
        let body: JSONValue = ["requestreference": .string(request.requestReference), "version": "1.00", "response": [entry], "secrand": "ab"]
        return HTTPResponseSpec(status: 200, body: body.bytes)
    }

    /// PROVIDERS-MONEY §1: REFUND in the AUTH's envelope, `sitereference`, the AUTH as
    /// `parenttransactionreference`, `baseamount` for the amount; `orderreference` is the
    /// refund's own orderId so a lost answer can be looked up.
    @Test func refundRequestShape() throws {
        let request = try TPWebServices.request(for: Self.refundOrder(), config: config)
        #expect(request.kind == .refund)
        #expect(request.http.method == .POST)
        #expect(request.http.url == "http://127.0.0.1:9101/json/")
        #expect(request.http.header("Authorization") == "Basic " + Data("ws@example.com:ws-password".utf8).base64EncodedString())
        let expected: JSONValue = [
            "alias": "ws@example.com", "version": "1.00",
            "request": [
                [
                    "requestreference": .string(request.requestReference), "requesttypedescriptions": ["REFUND"],
                    "sitereference": "test_site12345", "parenttransactionreference": "57-9-1234", "orderreference": "rf-1",
                    "baseamount": "600",
                ]
            ],
        ]
        #expect(try JSONValue.parse(request.http.body) == expected)
        // The same order always gives the same request: a repeat is recognisable as one.
        #expect(try TPWebServices.request(for: Self.refundOrder(), config: config) == request)
        #expect(TPWebServicesRequest(http: request.http) == request)
    }

    @Test func refundParamRules() {
        #expect(rejection(Self.refundOrder(params: ["transactionReference": "57-9-1"]))?.field == "params.refundOf")
        #expect(rejection(Self.refundOrder(params: ["refundOf": "ord-1"]))?.field == "params.transactionReference")
        #expect(rejection(Self.refundOrder(params: ["refundOf": "ord 1", "transactionReference": "57-9-1"]))?.field == "params.refundOf")
        #expect(rejection(Self.refundOrder(params: ["refundOf": "ord-1", "transactionReference": "57\"9"]))?.field == "params.transactionReference")
        let unknown = rejection(Self.refundOrder(params: ["refundOf": "ord-1", "transactionReference": "57-9-1", "baseamount": 5]))
        #expect(unknown?.code == .unknownField)
        #expect(rejection(Self.refundOrder(amount: 10_000_000_000_000))?.field == "amount")
    }

    /// Every REFUND errorcode the brief names, read as the sources say ([TP-PYSDK]
    /// errormessages.json; [TP-REF] for 70000 on an online-authorised refund; [TP-ERR] for the
    /// codes whose outcome Trust Payments itself does not know).
    @Test(arguments: [
        ("0", "succeeded"), ("20004", "failed:REFUND_PARENT_NOT_FOUND"), ("20005", "failed:REFUND_PARENT_NOT_SETTLED"),
        ("20012", "failed:REFUND_PARENT_NOT_SETTLED"), ("20006", "failed:REFUND_PARENT_NOT_AUTH"),
        ("20007", "failed:REFUND_AMOUNT_TOO_GREAT"), ("20011", "failed:REFUND_PARENT_DECLINED"), ("20022", "failed:REFUND_BELOW_MINIMUM"),
        ("20034", "failed:REFUND_NOT_SUPPORTED"), ("40001", "failed:REFUND_NOT_PROCESSED"), ("70000", "failed:DECLINED"),
        ("30000", "failed:INVALID_FIELD"), ("60010", "unknown"), ("60034", "unknown"), ("99999", "unknown"), ("70001", "unknown"),
        ("50005", "unknown"), ("12345", "failed:TP_ERROR_12345"),
    ])
    func refundErrorcodes(errorcode: String, expected: String) throws {
        let request = try TPWebServices.request(for: Self.refundOrder(), config: config)
        let entry: JSONValue = [
            "errorcode": .string(errorcode), "errormessage": "msg", "requesttypedescription": "REFUND", "transactionreference": "57-9-777",
            "parenttransactionreference": "57-9-1234", "baseamount": "600", "settlestatus": "0",
        ]
        #expect(TPFixtures.kind(TPWebServices.classify(answer(request, entry), for: request)) == expected)
    }

    @Test func aSucceededRefundNamesItsOwnReference() throws {
        let request = try TPWebServices.request(for: Self.refundOrder(), config: config)
        let entry: JSONValue = [
            "errorcode": "0", "requesttypedescription": "REFUND", "transactionreference": "57-9-777", "parenttransactionreference": "57-9-1234",
            "baseamount": "600", "settlestatus": "0",
        ]
        guard case .succeeded(let result) = TPWebServices.classify(answer(request, entry), for: request) else {
            Issue.record("a 0 must succeed")
            return
        }
        #expect(result["transactionReference"] == "57-9-777")
        #expect(result["parentTransactionReference"] == "57-9-1234")
        #expect(result["amount"] == 600)
        #expect(result["settlement"] == "pendingSettlement")
    }

    /// The answer was lost or unreadable: never `retry`, whatever went wrong.
    @Test func anUnreadableAnswerIsUnknownNeverRetry() throws {
        let request = try TPWebServices.request(for: Self.refundOrder(), config: config)
        #expect(TPFixtures.kind(TPWebServices.classify(HTTPResponseSpec(status: 502), for: request)) == "unknown")
        #expect(TPFixtures.kind(TPWebServices.classify(HTTPResponseSpec(status: 200, body: Array("{".utf8)), for: request)) == "unknown")
        let other: JSONValue = ["requestreference": "W12-other", "version": "1.00", "response": [["errorcode": "0"]]]
        #expect(TPFixtures.kind(TPWebServices.classify(HTTPResponseSpec(status: 200, body: other.bytes), for: request)) == "unknown")
    }

    func resolve(_ records: [JSONValue], beforeResubmit: Bool) throws -> String {
        let refund = try TPWebServices.request(for: Self.refundOrder(), config: config)
        let query = TPWebServices.orderQuery(for: Self.refundOrder().key, config: config)
        let response = answer(query, ["errorcode": "0", "requesttypedescription": "TRANSACTIONQUERY", "records": .array(records)])
        return TPFixtures.kind(
            TPWebServices.resolveRefund(queryResponse: response, query: query, refund: refund, orderId: "rf-1", beforeResubmit: beforeResubmit))
    }

    static func record(_ errorcode: String, order: String = "rf-1", parent: String = "57-9-1234") -> JSONValue {
        [
            "requesttypedescription": "REFUND", "errorcode": .string(errorcode), "orderreference": .string(order),
            "parenttransactionreference": .string(parent), "transactionreference": "57-9-888", "baseamount": "600",
            "sitereference": "test_site12345",
        ]
    }

    /// The lost answer is looked for by orderreference: only "no such REFUND" before a
    /// resubmit lets the refund go again.
    @Test func aLostAnswerIsResolvedByTheOrderQuery() throws {
        #expect(try resolve([Self.record("0")], beforeResubmit: false) == "succeeded")
        #expect(try resolve([Self.record("0")], beforeResubmit: true) == "succeeded")
        #expect(try resolve([Self.record("20007")], beforeResubmit: true) == "failed:REFUND_AMOUNT_TOO_GREAT")
        #expect(try resolve([Self.record("60010")], beforeResubmit: true) == "unknown")
        #expect(try resolve([], beforeResubmit: true) == "neverSeen")
        #expect(try resolve([], beforeResubmit: false) == "unknown")
        // Another order's refund, or a refund of another AUTH, is not this one.
        #expect(try resolve([Self.record("0", order: "rf-2")], beforeResubmit: true) == "neverSeen")
        #expect(try resolve([Self.record("0", parent: "57-9-9")], beforeResubmit: true) == "neverSeen")
        // The order's own AUTH under the same orderreference is not a refund.
        let auth: JSONValue = ["requesttypedescription": "AUTH", "errorcode": "0", "orderreference": "rf-1"]
        #expect(try resolve([auth], beforeResubmit: true) == "neverSeen")
    }

    @Test func theConnectorResolvesARefundBeforeItIsSentAgain() async throws {
        let connector = await TrustPaymentsConnector(config: PaypipeConfig(merchants: ["default": MerchantConfig(TPFixtures.config)]))
        let spec = try #require(TrustPaymentsConnector.operations.first { $0.operation == .tpRefund })
        #expect(spec.movesMoney([:]))
        guard case .request(let signed) = try connector.sign(Self.refundOrder(), purpose: .submit, nowSeconds: 0) else {
            Issue.record("a refund is an HTTP request")
            return
        }
        let resolve = try #require(signed.resolve)
        let query = try #require(TPWebServicesRequest(http: resolve))
        #expect(query.kind == .orderQuery)
        #expect(try JSONValue.parse(resolve.body)["request"]?.arrayValue?.first?["filter"]?["orderreference"] == [["value": "rf-1"]])
        let exchange = Exchange(order: Self.refundOrder(), signed: signed, purpose: .submit, phase: .submitting)
        #expect(connector.redelivery(of: exchange) == .resolveFirst(resolve))
        #expect(connector.readFailure(.mayHaveBeenSent("reset"), of: signed.request, in: exchange) == .unknown(reason: "reset"))
        #expect(connector.readFailure(.notSent("refused"), of: signed.request, in: exchange) == .retry(reason: "refused"))

        var resolving = exchange
        resolving.phase = .resolving
        resolving.resolvingBeforeResubmit = true
        let empty: JSONValue = [
            "requestreference": .string(query.requestReference), "version": "1.00",
            "response": [["errorcode": "0", "requesttypedescription": "TRANSACTIONQUERY", "records": []]],
        ]
        let reading = connector.read(HTTPResponseSpec(status: 200, body: empty.bytes), to: resolve, in: resolving)
        guard case .verdict(.neverSeen) = reading else {
            Issue.record("an absent refund is never seen, got \(reading)")
            return
        }
    }

    @Test func capturesAndTargets() throws {
        let refunding = TPRefunding()
        #expect(refunding.refundTarget(of: Self.refundOrder()) == RefundTarget(originalOrderId: "ord-000123", captureReference: "57-9-1234"))
        #expect(refunding.refundTarget(of: TPFixtures.order(TPFixtures.seedParams)) == nil)
        let order = TPFixtures.order(TPFixtures.seedParams)
        func outcome(_ status: Outcome.Status, _ result: [String: JSONValue]) -> Outcome {
            Outcome(
                orderId: order.orderId, merchant: "default", provider: "trustpayments", operation: "subscriptionJwt", status: status, result: result)
        }
        let paid: [String: JSONValue] = ["transactionReference": "57-9-1234", "requestType": "AUTH", "amount": 1050, "currency": "GBP"]
        #expect(refunding.captures(of: order, outcome: outcome(.succeeded, paid)) == [Capture(reference: "57-9-1234", amount: 1050, currency: "GBP")])
        #expect(refunding.captures(of: order, outcome: outcome(.failed, paid)).isEmpty)
        var trial = paid
        trial["requestType"] = "ACCOUNTCHECK"
        #expect(refunding.captures(of: order, outcome: outcome(.succeeded, trial)).isEmpty)
        #expect(refunding.captures(of: Self.refundOrder(), outcome: outcome(.succeeded, paid)).isEmpty)
    }
}

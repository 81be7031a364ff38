import Foundation
import PaypipeCore
import Testing
import TrustPaymentsTesting

@testable import TrustPayments

/// A Trust Payments `cancel`: the SUBSCRIPTION found by the first order's orderreference,
/// stopped with TRANSACTIONUPDATE `transactionactive` "3", and confirmed by reading it back.
@Suite struct TPCancelTests {
    let config = TPFixtures.config
    static let parent = "57-9-100"
    static let subscriptionReference = "57-9-101"

    static func order(at: String = "atPeriodEnd") -> Order {
        Order(
            orderId: "cancel-1", operation: .cancelTrustPayments,
            params: ["subscription": .string(parent), "at": .string(at), "record": ["orderId": "tp-sub-1", "target": .null]])
    }

    func signed() throws -> (TPWebServicesRequest, Exchange<TrustPaymentsConnector.Context>) {
        let query = try TPCancel.query(order: Self.order(), config: config)
        let signed = SignedRequest(request: query.http, resolve: query.http, context: TrustPaymentsConnector.Context(query, query: nil))
        return (query, Exchange(order: Self.order(), signed: signed, purpose: .submit, phase: .submitting))
    }

    func answer(_ request: HTTPRequestSpec, _ entry: JSONValue) throws -> HTTPResponseSpec {
        let reference = try #require(TPWebServicesRequest(http: request)).requestReference
        let body: JSONValue = ["requestreference": .string(reference), "version": "1.00", "response": [entry], "secrand": "ab12"]
        return HTTPResponseSpec(status: 200, body: Array(body.serialized.utf8))
    }

    static func records(active: String) -> JSONValue {
        [
            "errorcode": "0", "requesttypedescription": "TRANSACTIONQUERY",
            "records": [
                [
                    "transactionreference": .string(parent), "requesttypedescription": "AUTH", "errorcode": "0",
                    "transactionstartedtimestamp": "2027-01-15 10:00:00",
                ],
                [
                    "transactionreference": "57-9-102", "parenttransactionreference": .string(parent), "requesttypedescription": "AUTH",
                    "accounttypedescription": "RECUR", "errorcode": "0", "transactionstartedtimestamp": "2027-02-15 00:00:00",
                ],
                [
                    "transactionreference": .string(subscriptionReference), "parenttransactionreference": .string(parent),
                    "requesttypedescription": "SUBSCRIPTION", "errorcode": "0", "transactionactive": .string(active),
                    "subscriptionunit": "MONTH", "subscriptionfrequency": "1",
                ],
            ],
        ]
    }

    @Test func theQueryFindsTheSubscriptionByTheFirstOrdersReference() throws {
        let (query, _) = try signed()
        let entry = try JSONValue.parse(query.http.body)["request"]?.arrayValue?.first
        #expect(entry?["requesttypedescriptions"] == ["TRANSACTIONQUERY"])
        #expect(entry?["filter"] == ["sitereference": [["value": "test_site12345"]], "orderreference": [["value": "tp-sub-1"]]])
        #expect(query.http.header("Authorization") == "Basic " + Data("ws@example.com:ws-password".utf8).base64EncodedString())
    }

    @Test func anActiveSubscriptionIsStoppedWithTransactionActive3AndConfirmedByReadingItBack() throws {
        let (query, exchange) = try signed()
        guard case .followUp(let update) = TPCancel.read(try answer(query.http, Self.records(active: "1")), to: query.http, in: exchange) else {
            Issue.record("an active subscription is updated")
            return
        }
        let entry = try JSONValue.parse(update.body)["request"]?.arrayValue?.first
        #expect(entry?["requesttypedescriptions"] == ["TRANSACTIONUPDATE"])
        let filter: JSONValue = [
            "sitereference": [["value": "test_site12345"]], "transactionreference": [["value": .string(Self.subscriptionReference)]],
        ]
        #expect(entry?["filter"] == filter)
        #expect(entry?["updates"] == ["transactionactive": "3"])
        #expect(update.header("Authorization") == query.http.header("Authorization"))

        var updated = exchange
        updated.followUps = 1
        let accepted = try answer(update, ["errorcode": "0", "requesttypedescription": "TRANSACTIONUPDATE"])
        #expect(TPCancel.read(accepted, to: update, in: updated) == .followUp(query.http))
        // The read-back shows it stopped: the order succeeds, paid up to the month after the last payment.
        updated.followUps = 2
        guard case .verdict(.succeeded(let result)) = TPCancel.read(try answer(query.http, Self.records(active: "3")), to: query.http, in: updated)
        else {
            Issue.record("stopped is success")
            return
        }
        #expect(result["subscriptionReference"] == .string(Self.subscriptionReference))
        #expect(result[SubscriptionCancel.periodEndsAtResult] == .integer(CivilDate(year: 2027, month: 3, day: 15)!.daysSinceEpoch * 86_400_000))
        // Not in place after an accepted update: not sent blind again.
        guard case .verdict(.unknown) = TPCancel.read(try answer(query.http, Self.records(active: "1")), to: query.http, in: updated) else {
            Issue.record("an update accepted but not in place is unknown")
            return
        }
    }

    @Test func aRefusedUpdateFailsAndAnAlreadyStoppedSubscriptionSucceedsWithoutOne() throws {
        let (query, exchange) = try signed()
        guard case .verdict(.succeeded) = TPCancel.read(try answer(query.http, Self.records(active: "3")), to: query.http, in: exchange) else {
            Issue.record("already stopped is success without an update")
            return
        }
        let update = try #require(TPCancel.update(following: query.http, subscriptionReference: Self.subscriptionReference, key: exchange.order.key))
        let refused = try answer(
            update, ["errorcode": "60017", "errormessage": "Field not updatable", "requesttypedescription": "TRANSACTIONUPDATE"])
        guard case .verdict(.failed) = TPCancel.read(refused, to: update, in: exchange) else {
            Issue.record("a refused update fails")
            return
        }
        // No SUBSCRIPTION under the order: nothing to stop, nothing sent.
        let none: JSONValue = ["errorcode": "0", "requesttypedescription": "TRANSACTIONQUERY", "records": []]
        guard case .verdict(.failed(let code, _)) = TPCancel.read(try answer(query.http, none), to: query.http, in: exchange) else {
            Issue.record("no subscription fails")
            return
        }
        #expect(code == .referenceNotFound)
    }

    /// A lost answer: the query tells. Not in place before a resubmit means never seen; in
    /// place is the order's success.
    @Test func aLostAnswerIsResolvedByTheQuery() throws {
        let (query, exchange) = try signed()
        var resolving = exchange
        resolving.phase = .resolving
        resolving.resolvingBeforeResubmit = true
        guard case .verdict(.neverSeen) = TPCancel.read(try answer(query.http, Self.records(active: "1")), to: query.http, in: resolving) else {
            Issue.record("not in place before a resubmit is never seen")
            return
        }
        resolving.resolvingBeforeResubmit = false
        guard case .verdict(.retry) = TPCancel.read(try answer(query.http, Self.records(active: "0")), to: query.http, in: resolving) else {
            Issue.record("not in place is sent again: the update sets an absolute, final value")
            return
        }
        guard case .verdict(.succeeded) = TPCancel.read(try answer(query.http, Self.records(active: "3")), to: query.http, in: resolving) else {
            Issue.record("in place is success")
            return
        }
    }
}

import Foundation
import PaypipeCore
import Testing
import TrustPaymentsTesting

@testable import TrustPayments

/// A response JWT or notification is bound to its order and its
/// operation, the SUBSCRIPTION entry must be what was requested, and an undecided verdict
/// leaves the event key for the final notification.
@Suite struct TPCallbackBindingTests {
    static let params: [String: JSONValue] = [
        "subscriptionType": "RECURRING", "unit": "MONTH", "frequency": 1, "finalNumber": 12, "beginDate": "2030-01-31",
    ]
    static let order = TPFixtures.order(params, orderId: "tp-bind-1")

    /// The orders a connector may look up, by orderId.
    typealias Orders = TPStoredOrders

    static func entries(
        orderId: String = "tp-bind-1", auth: [String: JSONValue?] = [:], subscription: [String: JSONValue?] = [:]
    ) -> [[String: JSONValue]] {
        var authEntry: [String: JSONValue] = [
            "requesttypedescription": "AUTH", "errorcode": "0", "sitereference": "test_site12345", "orderreference": .string(orderId),
            "baseamount": "1050", "currencyiso3a": "GBP", "transactionreference": "57-9-100", "settlestatus": "0",
        ]
        var subscriptionEntry: [String: JSONValue] = [
            "requesttypedescription": "SUBSCRIPTION", "errorcode": "0", "sitereference": "test_site12345", "orderreference": .string(orderId),
            "baseamount": "1050", "currencyiso3a": "GBP", "transactionreference": "57-9-101", "transactionactive": "2",
            "subscriptiontype": "RECURRING", "subscriptionunit": "MONTH", "subscriptionfrequency": "1", "subscriptionnumber": "1",
            "subscriptionfinalnumber": "12", "subscriptionbegindate": "2030-01-31",
        ]
        for (key, value) in auth { authEntry[key] = value }
        for (key, value) in subscription { subscriptionEntry[key] = value }
        return [
            ["requesttypedescription": "THREEDQUERY", "errorcode": "0", "sitereference": "test_site12345", "orderreference": .string(orderId)],
            authEntry, subscriptionEntry,
        ]
    }

    func connector() async -> TrustPaymentsConnector {
        await TrustPaymentsConnector(config: PaypipeConfig(merchants: ["default": MerchantConfig(TPFixtures.config)]))
    }

    func forward(
        _ entries: [[String: JSONValue]], orderId: String = "tp-bind-1", stored: [Order] = [order]
    ) async throws(CallbackRejection) -> CallbackDecision {
        let jwt = TPResponseJWT.build(
            entries: entries, requestReference: "W1", issuedAt: Timestamp.nowMilliseconds() / 1000, secret: Secret(TPFixtures.jwtSecret))
        return try await connector().responseJWT(Array(#"{"orderId":"\#(orderId)","jwt":"\#(jwt)"}"#.utf8), orders: Orders(stored: stored))
    }

    func refusal(_ entries: [[String: JSONValue]], orderId: String = "tp-bind-1", stored: [Order] = [order]) async -> CallbackRejection? {
        do {
            let decision = try await forward(entries, orderId: orderId, stored: stored)
            Issue.record("expected a refusal, got \(TPFixtures.kind(decision.verdict))")
            return nil
        } catch {
            return error
        }
    }

    // MARK: - Bound to the order

    @Test func aResponseJWTWithoutOrderReferenceIsRefused() async {
        let missing = await refusal(Self.entries(auth: ["orderreference": nil]))
        #expect(missing?.status == 400)
        #expect(missing?.code == "MISSING_ORDERREFERENCE")
        #expect(await refusal(Self.entries(auth: ["orderreference": ""]))?.code == "MISSING_ORDERREFERENCE")
    }

    @Test func anotherOrdersAuthenticJWTIsRefused() async {
        // Same amount, same site, genuinely signed: only the orderreference says it is another order's.
        let other = TPFixtures.order(Self.params, orderId: "tp-bind-2")
        let refused = await refusal(Self.entries(orderId: "tp-bind-2"), orderId: "tp-bind-1", stored: [Self.order, other])
        #expect(refused?.status == 409)
        #expect(refused?.code == "ORDERREFERENCE_MISMATCH")
        #expect(await refusal(Self.entries(subscription: ["orderreference": "tp-bind-2"]))?.code == "ORDERREFERENCE_MISMATCH")
        #expect(await refusal(Self.entries(auth: ["orderreference": 7]))?.code == "INVALID_FIELD")
    }

    @Test func onlyASubscriptionJwtOrderIsSettledByAJWTOrANotification() async throws {
        let query = Order(orderId: "tp-bind-1", operation: .transactionQuery, params: ["transactionReference": "57-9-100"])
        let refused = await refusal(Self.entries(), stored: [query])
        #expect(refused?.status == 409)
        #expect(refused?.code == "OPERATION_MISMATCH")

        let form = TPNotification.formBody(fields: Self.notification(orderId: "tp-bind-1", errorcode: "0"), password: Secret("PASSWORD"))
        do {
            _ = try await connector().notification(form, orders: Orders(stored: [query]))
            Issue.record("a notification must not settle a transactionQuery order")
        } catch {
            #expect(error.code == "OPERATION_MISMATCH")
        }
    }

    // MARK: - The SUBSCRIPTION entry

    @Test func aSubscriptionEntryUnlikeTheRequestFailsTheOrderAndKeepsThePayment() async throws {
        let changes: [(String, JSONValue?)] = [
            ("subscriptionfrequency", "2"), ("subscriptionunit", "DAY"), ("subscriptionfinalnumber", "0"), ("baseamount", "1051"),
            ("subscriptionbegindate", "2030-02-01"), ("subscriptionfrequency", nil), ("subscriptionbegindate", nil),
        ]
        for (field, value) in changes {
            let decision = try await forward(Self.entries(subscription: [field: value]))
            guard case .failed(let code, let message)? = decision.verdict else {
                Issue.record("\(field) = \(String(describing: value)) must fail the order, got \(TPFixtures.kind(decision.verdict))")
                continue
            }
            #expect(code == "SUBSCRIPTION_MISMATCH", "\(field)")
            #expect(message.contains(field), "\(message)")
            #expect(decision.failureResult?["transactionReference"] == "57-9-100")
            #expect(decision.failureResult?["amount"] == 1050)
            #expect(decision.event == "57-9-100")
        }
        // Numbers are compared as numbers; the echo of what was requested succeeds.
        #expect(TPFixtures.kind(try await forward(Self.entries(subscription: ["subscriptionfinalnumber": "012"])).verdict) == "succeeded")
        #expect(TPFixtures.kind(try await forward(Self.entries()).verdict) == "succeeded")
    }

    @Test func withoutARequestedBeginDateTheProvidersOwnIsAccepted() async throws {
        var params = Self.params
        params.removeValue(forKey: "beginDate")
        let order = TPFixtures.order(params, orderId: "tp-bind-1")
        let decision = try await forward(Self.entries(subscription: ["subscriptionbegindate": "2031-05-05"]), stored: [order])
        #expect(TPFixtures.kind(decision.verdict) == "succeeded")
    }

    @Test func anUnscheduledSubscriptionFailsTheOrderWithThePaymentsResult() async throws {
        let decision = try await forward(Self.entries(subscription: ["errorcode": "20018", "errormessage": "Invalid subscription"]))
        guard case .failed(let code, let message)? = decision.verdict else {
            Issue.record("expected failed, got \(TPFixtures.kind(decision.verdict))")
            return
        }
        #expect(code == "SUBSCRIPTION_NOT_SCHEDULED")
        #expect(message.contains("20018"))
        #expect(decision.failureResult?["transactionReference"] == "57-9-100")
        #expect(decision.failureResult?["amount"] == 1050)
        #expect(decision.failureResult?["subscriptionScheduled"] == false)

        let noEntry = TPResponseCheck.read(
            Array(Self.entries().prefix(2)), expected: TPExpectedOrder(order: Self.order, config: TPFixtures.config))
        #expect(TPFixtures.kind(noEntry.verdict) == "failed:SUBSCRIPTION_NOT_SCHEDULED")
        #expect(noEntry.failureResult?["transactionReference"] == "57-9-100")
    }

    // MARK: - Undecided verdicts leave the event key

    static func notification(orderId: String, errorcode: String) -> [TPNotification.Field] {
        [
            ("errorcode", errorcode), ("orderreference", orderId), ("requesttypedescription", "AUTH"), ("sitereference", "test_site12345"),
            ("transactionreference", "57-9-100"), ("baseamount", "1050"), ("currencyiso3a", "GBP"),
        ]
    }

    @Test func anUncertainAuthRecordsNoEventSoTheFinalNotificationSettles() async throws {
        let uncertain = try await forward(Self.entries(auth: ["errorcode": "70001"]))
        #expect(TPFixtures.kind(uncertain.verdict) == "unknown")
        #expect(uncertain.event == nil)

        let connector = await connector()
        let orders = Orders(stored: [Self.order])
        let pendingNote = TPNotification.formBody(fields: Self.notification(orderId: "tp-bind-1", errorcode: "70001"), password: Secret("PASSWORD"))
        #expect(try await connector.notification(pendingNote, orders: orders).event == nil)

        let final = TPNotification.formBody(fields: Self.notification(orderId: "tp-bind-1", errorcode: "0"), password: Secret("PASSWORD"))
        let settled = try await connector.notification(final, orders: orders)
        #expect(TPFixtures.kind(settled.verdict) == "succeeded")
        #expect(settled.event == "57-9-100")
    }

    // MARK: - The first AUTH's settlement

    /// A notification of the first AUTH settled is the order's result while it is open (a site
    /// whose rule notifies only on settlement) and the subscription's `subscription.activated`;
    /// once the order is gone, the subscription's alone. An engine payment is never an order's.
    @Test func theFirstAuthsSettlementIsTheOrdersResultAndTheSubscriptionsEvent() async throws {
        let connector = await connector()
        var fields = Self.notification(orderId: "tp-bind-1", errorcode: "0")
        fields.append(("settlestatus", "100"))
        let settled = TPNotification.formBody(fields: fields, password: Secret("PASSWORD"))
        let open = try await connector.notification(settled, orders: Orders(stored: [Self.order]))
        #expect(TPFixtures.kind(open.verdict) == "succeeded" && open.order?.orderId == "tp-bind-1")
        #expect(open.subscriptionEvents.map(\.kind) == [.subscriptionActivated] && open.subscriptionEvents.first?.subscription == "57-9-100")
        let gone = try await connector.notification(settled, orders: Orders(stored: []))
        #expect(gone.order == nil && gone.subscriptionEvents.map(\.kind) == [.subscriptionActivated])

        var recurring = Self.notification(orderId: "tp-bind-1", errorcode: "0")
        recurring += [("accounttypedescription", "RECUR"), ("parenttransactionreference", "57-9-100"), ("subscriptionnumber", "2")]
        let engine = try await connector.notification(
            TPNotification.formBody(fields: recurring, password: Secret("PASSWORD")), orders: Orders(stored: [Self.order]))
        #expect(engine.order == nil && engine.subscriptionEvents.map(\.kind) == [.renewalSucceeded] && engine.subscriptionEvents.first?.cycle == 2)
    }
}

import PaypipeCore
import Testing

@testable import TrustPayments

/// An engine payment found by TRANSACTIONQUERY is reported as its URL notifications report it:
/// the same events under the same ids, so whichever comes second is a duplicate.
@Suite struct TPEngineReconcilingTests {
    let reconciling = TPEngineReconciling(timers: PaypipeConfig.Timers())

    func notified(_ fields: [String: String]) throws -> SubscriptionEvent? {
        let event = TPNotificationEvent(fields: fields, orderReference: fields["orderreference"] ?? "", errorcode: fields["errorcode"] ?? "")
        return try event.subscriptionEvent(merchant: "default")
    }

    func query(_ payment: Int64) -> Order {
        reconciling.query(
            orderId: "rcn-0123456789abcdef0123-\(payment)-1", merchant: "default", subscription: "57-9-100", payment: payment,
            plan: ["orderReference": "tp-sub-1"])
    }

    func answer(_ records: [JSONValue]) -> Outcome {
        Outcome(order: query(2), status: .succeeded, result: ["records": .array(records)])
    }

    static let payment: [String: String] = [
        "accounttypedescription": "RECUR", "baseamount": "1050", "currencyiso3a": "GBP", "errorcode": "0", "orderreference": "tp-sub-1",
        "parenttransactionreference": "57-9-100", "requesttypedescription": "AUTH", "settlestatus": "100", "subscriptionnumber": "2",
        "transactionreference": "57-9-200",
    ]

    @Test func aSettledPaymentIsReportedAsItsTwoNotificationsWere() throws {
        var record = Self.payment.mapValues(JSONValue.string)
        // Fields a query answer carries that no notification did are not read.
        record["maskedpan"] = "411111######1111"
        record["authcode"] = "TEST12"
        let events = reconciling.events(of: query(2), outcome: answer([.object(record)]))
        var authorised = Self.payment
        authorised["settlestatus"] = "0"
        let expected = try [notified(authorised), notified(Self.payment)].compactMap { $0 }
        #expect(events.map(\.kind) == [.renewalSucceeded, .renewalSettled])
        #expect(events.map(\.eventId) == expected.map(\.eventId))
        #expect(events.map(\.cycle) == [2, 2] && events.first?.amount == 1050)
    }

    @Test func aDeclinedPaymentIsOneFailureAndOtherTransactionsAreNotTheSubscriptions() throws {
        var declined = Self.payment
        declined["errorcode"] = "70000"
        declined["settlestatus"] = "3"
        var otherSeries = Self.payment
        otherSeries["parenttransactionreference"] = "57-9-999"
        var first = Self.payment
        first["accounttypedescription"] = "ECOM"
        let events = reconciling.events(
            of: query(2), outcome: answer([declined, otherSeries, first].map { .object($0.mapValues(JSONValue.string)) }))
        #expect(events.map(\.kind) == [.renewalFailed] && events.first?.reason == "70000")
        #expect(events.map(\.eventId) == [try notified(declined)].compactMap { $0?.eventId })
        #expect(reconciling.events(of: query(2), outcome: Outcome(order: query(2), status: .failed)).isEmpty)
    }

    /// Payment 2 of a monthly series from 31 January falls due on the last day of February, the
    /// fourth (its last) in April; there is no fifth.
    @Test func paymentsFallDueOnTheEnginesSchedule() throws {
        let order = Order(
            orderId: "tp-sub-1", merchant: "default", operation: .subscriptionJwt, amount: 1050, currency: "GBP",
            params: ["subscriptionType": "RECURRING", "unit": "MONTH", "frequency": 1, "finalNumber": 4])
        let openedAt = CivilDate(iso8601: "2027-01-31")!.daysSinceEpoch * 86_400_000 + 3_600_000
        let (plan, first) = try #require(reconciling.plan(for: order, opening: SubscriptionOpening(reference: "57-9-100"), openedAt: openedAt))
        #expect(first == 2)
        func day(_ payment: Int64) -> String? {
            reconciling.dueAt(payment: payment, plan: plan).map { CivilDate(daysSinceEpoch: $0 / 86_400_000).iso8601 }
        }
        #expect(day(2) == "2027-02-28" && day(3) == "2027-03-31" && day(4) == "2027-04-30")
        #expect(day(5) == nil && day(1) == nil)
        #expect(query(2).params["orderReference"] == "tp-sub-1")
    }
}

import Foundation
import PaypipeCore
import Testing
import TrustPayments

@testable import Sandbox
@testable import TrustPaymentsEmulation

/// The sandbox's subscription engine signs with its own code; what it sends must be what the
/// pipeline reads as Trust Payments' URL notifications (its field rules, its signature), and
/// each must read as the event it stands for.
@Suite struct TrustPaymentsEngineTests {
    static let password = Secret("engine-notify-password")

    static func series(unit: String, finalNumber: Int64) -> TrustPaymentsEmulator.Series {
        TrustPaymentsEmulator.Series(
            merchant: "default", parent: "57-9-11112222", orderReference: "tp-engine-1", amount: 1050, currency: "GBP", unit: unit,
            frequency: 1, number: 1, finalNumber: finalNumber, nextDue: 86_400_000)
    }

    @Test(arguments: [("MONTH", Int64(3)), ("DAY", Int64(0))])
    func engineNotificationsVerifyAndReadAsTheirEvents(unit: String, finalNumber: Int64) throws {
        var series = Self.series(unit: unit, finalNumber: finalNumber)
        var store = TrustPaymentsEmulator.Store()
        series.declineNext = false
        var sent = TrustPaymentsEmulator.run(&series, until: 86_400_000, siteReference: "test_site12345", store: &store).sent
        series.declineNext = true
        sent += TrustPaymentsEmulator.run(&series, until: 200 * 86_400_000, siteReference: "test_site12345", store: &store).sent
        var kinds: [SubscriptionEvent.Kind] = []
        for fields in sent {
            let body = TPSandboxNotification.formBody(fields: fields, password: Self.password)
            let event = try TPNotification.verify(fields: try TPNotification.parseForm(body), password: Self.password)
            let reported = try #require(try event.subscriptionEvent(merchant: "default"))
            #expect(reported.subscription == "57-9-11112222")
            kinds.append(reported.kind)
        }
        // The first AUTH settles, payment 2 is taken and settled, payment 3 is declined.
        #expect(Array(kinds.prefix(4)) == [.subscriptionActivated, .renewalSucceeded, .renewalSettled, .renewalFailed])
        if finalNumber > 0 {
            // Payment 3 was the last: the series stops by itself.
            #expect(kinds.count == 4)
        } else {
            // No end: a payment a day for the 199 days after, each taken and settled.
            #expect(kinds.count == 4 + 2 * 198)
        }
    }
}

import FixtureCorpus
import Foundation
import PaypipeCore
import TestSupport
import Testing
import TrustPayments
import TrustPaymentsTesting

/// Messages in the form the providers publish them (their `Fixtures/`), through the real ledger,
/// signer and callback validator processes.
@Suite(.serialized) struct PublishedMessagesTests {
    /// Trust Payments' own `requestreference` form (`W57-aubk3dr3`) was once refused as not
    /// alphanumeric, losing a notification of money taken.
    @Test func aTrustPaymentsNotificationInItsPublishedFormEndsItsOrder() async throws {
        let fixture = TrustPaymentsCorpus.all.named("url-notification--auth-requestreference-w-form")
        #expect(fixture.form.contains { $0.name == "requestreference" && $0.value == "W57-aubk3dr3" })
        let orderId = try #require(fixture.meaningText("orderId"))
        let h = try await PipelineHarness()
        defer { Task { await h.shutdown() } }
        try h.startSigner()
        try h.startCallbacks()
        try await h.send(
            #"{"v":1,"orderId":"\#(orderId)","provider":"trustpayments","operation":"subscriptionJwt","amount":1050,"currency":"GBP","params":{"subscriptionType":"RECURRING","unit":"MONTH","frequency":1,"finalNumber":12}}"#
        )
        _ = try await h.collect { $0.contains { $0.orderId == orderId && $0.status == .pending } }

        let password = try #require(try demoConfig().merchants["default"]?.trustpayments?.notificationPassword)
        let answer = try #require(
            await h.postCallback(
                "/callbacks/trustpayments/notification", headers: [("Content-Type", "application/x-www-form-urlencoded")],
                body: TPNotification.formBody(fields: fixture.form, password: password)))
        #expect(answer.0 == 200, "\(answer.1)")
        let outcomes = try await h.collect { $0.contains { $0.orderId == orderId && $0.status == .succeeded } }
        let succeeded = try #require(outcomes.first { $0.orderId == orderId && $0.status == .succeeded })
        #expect(succeeded.result?["transactionReference"]?.stringValue == fixture.meaningText("transactionReference"))
        await h.shutdown()
    }
}

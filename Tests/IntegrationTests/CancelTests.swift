import Foundation
import Glibc
import PaypipeCore
import Sandbox
import StageRuntime
import Supervision
import TestSupport
import Testing

/// Cancelling a subscription through real processes (docs/protocol.md, "Cancelling a
/// subscription"): the provider stops charging (Trust Payments' engine takes no more payments,
/// PhonePe refuses the mandate's debits, Nets' schedule makes no more charges), the ledger says
/// `cancelled` with `paidThrough`, and upstream gets one `subscription.cancelled`, also when the
/// ledger is killed while the cancel is under way.
@Suite("Cancels through real processes", .serialized)
struct CancelTests {
    static func events(in messages: [JSONValue], _ type: String) -> [JSONValue] {
        messages.filter { $0["kind"] == "event" && $0["type"]?.stringValue == type }
    }

    /// Every message seen until the cancel's success and one `subscription.cancelled` arrived;
    /// fails when they did not, so no test moves the provider's clock past a cancel not yet made.
    static func cancelled(_ h: PipelineHarness, orderId: String, timeout: Duration = .seconds(60)) async throws -> [JSONValue] {
        func done(_ messages: [JSONValue]) -> Bool {
            messages.contains { $0["orderId"]?.stringValue == orderId && $0["status"] == "succeeded" }
                && !events(in: messages, "subscription.cancelled").isEmpty
        }
        let messages = try await h.collectMessages(timeout: timeout, until: done)
        try #require(done(messages), "no succeeded \(orderId) and subscription.cancelled within \(timeout): \(messages.map(\.serialized))")
        return messages
    }

    enum Victim: String, CaseIterable {
        case ledger, submitter, signer, callbacks
    }

    @Test(arguments: Victim.allCases)
    func trustPaymentsEngineTakesNoPaymentAfterTheCancelEvenWithARoleKilledDuringIt(victim: Victim) async throws {
        try await cancelTrustPayments(killing: victim)
    }

    func cancelTrustPayments(killing victim: Victim) async throws {
        // A cancel lost with a killed role comes back after the ledger's redelivery interval,
        // kept short here; `cancelled` waits for it before the clock moves.
        let h = try await PipelineHarness(redeliverAfterMilliseconds: 3000)
        defer { Task { await h.shutdown() } }
        var signer = try h.startSigner()
        var submitter = try h.startSubmitter()
        var callbacks = try h.startCallbacks()
        try await h.send(
            #"{"v":1,"orderId":"tp-sub-1","provider":"trustpayments","operation":"subscriptionJwt","amount":1050,"currency":"GBP","params":{"subscriptionType":"RECURRING","unit":"MONTH","frequency":1,"finalNumber":0}}"#
        )
        let pending = try await h.collect { $0.contains { $0.orderId == "tp-sub-1" && $0.status == .pending } }
        let jwt = try #require(pending.first?.result?["jwt"]?.stringValue)
        let paid = try #require(await h.sandboxPost("/trustpayments/sdk/payment", ["jwt": .string(jwt)]))
        let form = try #require(try JSONValue.parse(Array(paid.1.utf8))["notification"]?.stringValue)
        let settled = await h.postCallback(
            "/callbacks/trustpayments/notification", headers: [("Content-Type", "application/x-www-form-urlencoded")], body: Array(form.utf8))
        #expect(settled?.0 == 200)
        let succeeded = try await h.collect { $0.contains { $0.orderId == "tp-sub-1" && $0.status == .succeeded } }
        let reference = try #require(succeeded.first { $0.status == .succeeded }?.result?["transactionReference"]?.stringValue)
        // A month on: the engine takes payment 2.
        #expect(await h.sandboxPost("/_sandbox/clock", ["advanceDays": 31])?.0 == 200)
        let renewed = try await h.collectMessages { !Self.events(in: $0, "renewal.succeeded").isEmpty }
        #expect(Self.events(in: renewed, "renewal.succeeded").count == 1)

        try await h.send(
            #"{"v":1,"orderId":"tp-cancel-1","provider":"trustpayments","operation":"cancel","params":{"subscription":"\#(reference)"}}"#)
        // One role killed while the cancel is under way, and started again (the ledger over the
        // same store).
        func restart(_ process: ChildProcess, _ start: () throws -> ChildProcess) async throws -> ChildProcess {
            process.signal(SIGKILL)
            _ = await process.waitForExit(within: .seconds(10))
            return try start()
        }
        switch victim {
        case .ledger:
            h.ledgerProcess.signal(SIGKILL)
            _ = await h.ledgerProcess.waitForExit(within: .seconds(10))
            try await h.restartLedger()
        case .submitter: submitter = try await restart(submitter) { try h.startSubmitter() }
        case .signer: signer = try await restart(signer) { try h.startSigner() }
        case .callbacks: callbacks = try await restart(callbacks) { try h.startCallbacks() }
        }
        // Sent again by an at-least-once upstream.
        try await h.send(
            #"{"v":1,"orderId":"tp-cancel-1","provider":"trustpayments","operation":"cancel","params":{"subscription":"\#(reference)"}}"#)
        var messages = try await Self.cancelled(h, orderId: "tp-cancel-1")
        // Two months on: no engine payment is taken.
        #expect(await h.sandboxPost("/_sandbox/clock", ["advanceDays": 62])?.0 == 200)
        messages += try await h.collectMessages(timeout: .seconds(3)) { _ in false }
        let cancel = try #require(messages.first { $0["orderId"]?.stringValue == "tp-cancel-1" && $0["status"] == "succeeded" })
        #expect(cancel["result"]?["transactionactive"] == "3")
        let cancelled = Self.events(in: messages, "subscription.cancelled")
        #expect(cancelled.count == 1, "\(cancelled.map(\.serialized))")
        // Paid through the day payment 3 would have been taken: a month after payment 2.
        #expect(cancelled.first?["paidThrough"]?.stringValue?.isEmpty == false)
        #expect(
            Self.events(in: messages, "renewal.succeeded").isEmpty,
            "the engine took a payment after the cancel: \((renewed + messages).map(\.serialized).joined(separator: "\n"))")
        let record = try #require(try await SubscriptionEventsTests.subscriptionRecord(h, provider: "trustpayments", reference: reference))
        #expect(record["state"] == "cancelled" && record["paidThrough"] == cancelled.first?["paidThrough"])

        // Cancelling it again is refused before anything is sent.
        try await h.send(
            #"{"v":1,"orderId":"tp-cancel-2","provider":"trustpayments","operation":"cancel","params":{"subscription":"\#(reference)"}}"#)
        let again = try #require(try await AsyncFlowTests.outcome(h, "tp-cancel-2", .rejected))
        #expect(again.error?.code == "SUBSCRIPTION_ENDED")
        await h.shutdown()
    }

    @Test func phonePeMandateIsCancelledAtPhonePeAndItsConfirmationMakesNoSecondEvent() async throws {
        let h = try await PipelineHarness(sandboxConfiguration: SandboxConfiguration(port: 0).with { $0.phonePe.callbackDelayMilliseconds = 100 })
        defer { Task { await h.shutdown() } }
        try h.startSigner()
        try h.startSubmitter()
        try h.startCallbacks()
        try await h.send(AsyncFlowTests.phonePeOrder("pp-sub-1"))
        _ = try await AsyncFlowTests.outcome(h, "pp-sub-1", .succeeded)
        try await h.send(
            #"{"v":1,"orderId":"pp-cancel-1","provider":"phonepe","operation":"cancel","params":{"subscription":"SUB-pp-sub-1","at":"now"}}"#)
        var messages = try await Self.cancelled(h, orderId: "pp-cancel-1")
        // PhonePe's SUBSCRIPTION callback (CANCELLED) confirms it: no second event.
        messages += try await h.collectMessages(timeout: .seconds(3)) { _ in false }
        let cancel = try #require(messages.first { $0["orderId"]?.stringValue == "pp-cancel-1" && $0["status"] == "succeeded" })
        #expect(cancel["result"]?["state"] == "CANCEL_IN_PROGRESS")
        #expect(Self.events(in: messages, "subscription.cancelled").count == 1)
        // The mandate is over at PhonePe: a debit on it is refused there.
        let debit = await h.sandboxPost("/_sandbox/subscriptions/phonepe/debit", ["subscription": "SUB-pp-sub-1", "amount": 39900])
        #expect(debit?.0 == 400 && debit?.1.contains("INVALID_SUBSCRIPTION_STATE") == true, "\(String(describing: debit))")
        let record = try #require(try await SubscriptionEventsTests.subscriptionRecord(h, provider: "phonepe", reference: "SUB-pp-sub-1"))
        #expect(record["state"] == "cancelled" && record["paidThrough"]?.stringValue?.isEmpty == false)
        await h.shutdown()
    }

    @Test func netsScheduleStopsWithoutAProviderCall() async throws {
        let h = try await ScheduleTests.harness()
        defer { Task { await h.shutdown() } }
        try h.startSigner()
        try h.startSubmitter()
        try h.startCallbacks()
        var year = ScheduleTests.Year(h, nets: 1, phonePe: 0, months: 3)
        try await year.create()
        let reference = year.references[0].reference
        try await h.send(#"{"v":1,"orderId":"nets-cancel-1","provider":"nets","operation":"cancel","params":{"subscription":"\#(reference)"}}"#)
        var messages = try await Self.cancelled(h, orderId: "nets-cancel-1")
        let cancelled = Self.events(in: messages, "subscription.cancelled")
        #expect(cancelled.count == 1, "\(messages.filter { $0["orderId"] == "nets-cancel-1" || $0["kind"] == "event" }.map(\.serialized))")
        // Paid through the first charge date: nothing was charged yet, and nothing will be.
        #expect(cancelled.first?["paidThrough"]?.stringValue == year.firstDate.iso8601 + "T00:00:00.000Z")
        try await year.advance(to: Int64(year.firstDate.addingMonths(2).daysSinceEpoch) * ScheduleTests.day + ScheduleTests.day / 2)
        messages += try await h.collectMessages(timeout: .seconds(3)) { _ in false }
        // The first payment's charge (`-first`) came before the cancel; no cycle is charged after it.
        #expect(
            !messages.contains {
                $0["orderId"]?.stringValue.map { $0.hasPrefix(ScheduledAttempt.orderIdPrefix) && !$0.hasSuffix("-first") } == true
            }, "a charge after the cancel")
        await h.shutdown()
    }
}

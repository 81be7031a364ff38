import Foundation
import Glibc
import PaypipeCore
import Sandbox
import StageRuntime
import TestSupport
import Testing

/// A PhonePe mandate charged on schedule through real processes, against the sandbox on a clock
/// the test moves (docs/protocol.md, "Schedules"): a mandate the customer pauses is neither
/// notified nor debited until PhonePe reports it unpaused, and a notification or debit refused
/// as a duplicate is resolved by its status, never taken for a decline nor sent as a new attempt.
@Suite("PhonePe mandates through real processes", .serialized)
struct PhonePeMandateTests {
    static let day = ScheduleTests.day
    static let hour: Int64 = 3_600_000

    /// When `cycle` falls due (the debit's day), on the sandbox's clock.
    static func due(_ year: ScheduleTests.Year, _ cycle: Int64) -> Int64 {
        year.firstDate.addingMonths(Int(cycle - 1)).daysSinceEpoch * day
    }

    /// Reads the live stream until an event of `type` has arrived; every event read is kept.
    static func awaitEvent(_ type: String, _ year: inout ScheduleTests.Year) async throws {
        let messages = try await year.h.collectMessages(timeout: .seconds(30)) { $0.contains { $0["type"]?.stringValue == type } }
        year.events += messages.filter { $0["kind"] == "event" }
        try #require(year.events.contains { $0["type"]?.stringValue == type }, "no \(type) event in \(messages.map { $0.serialized.prefix(300) })")
    }

    static func record(_ year: ScheduleTests.Year) async -> JSONValue? {
        try? await SubscriptionEventsTests.subscriptionRecord(year.h, provider: "phonepe", reference: year.references[0].reference)
    }

    @Test func aPausedMandateIsNeitherNotifiedNorDebitedAndResumesPastTheCyclesItMissed() async throws {
        let h = try await ScheduleTests.harness()
        defer { Task { await h.shutdown() } }
        try h.startSigner()
        try h.startSubmitter()
        try h.startCallbacks()
        var year = ScheduleTests.Year(h, nets: 0, phonePe: 1, months: 4)
        try await year.create()
        let subscription: JSONValue = ["subscription": .string(year.references[0].reference)]
        let cycle1 = year.attempt(0, cycle: 1, attempt: 1)

        // Cycle 1 is notified a day ahead; then the customer pauses the mandate.
        try await year.advance(to: Self.due(year, 1) - Self.day + Self.hour)
        try await year.waitFor([cycle1.orderId(step: 0)])
        #expect(await h.sandboxPost("/_sandbox/subscriptions/phonepe/pause", subscription)?.0 == 200)
        try await Self.awaitEvent("mandate.paused", &year)
        #expect(await Self.record(year)?["state"] == "paused")

        // Its debit falls due: the schedule holds it, and waits for no time.
        try await year.advance(to: Self.due(year, 1) + Self.hour)
        #expect(await eventually(within: .seconds(20)) { await Self.record(year)?["schedule"]?["dueAt"] == .null })
        // Cycle 2 falls due too while paused; two days after, the customer unpauses.
        try await year.advance(to: Self.due(year, 2) + 2 * Self.day)
        #expect(await h.sandboxPost("/_sandbox/subscriptions/phonepe/unpause", subscription)?.0 == 200)
        try await Self.awaitEvent("renewal.skipped", &year)
        let resumed = year.events.filter { ["mandate.resumed", "renewal.skipped"].contains($0["type"]?.stringValue) }
        #expect(resumed.compactMap { $0["type"]?.stringValue } == ["mandate.resumed", "renewal.skipped"], "\(year.events.map(\.serialized))")
        #expect(resumed.last?["cycle"] == 1 && resumed.last?["lastCycle"] == 2 && resumed.last?["subscription"]?["state"] == "active")

        // Cycle 3 is notified and debited on its dates.
        let cycle3 = year.attempt(0, cycle: 3, attempt: 1)
        try await year.advance(to: Self.due(year, 3) - Self.day + Self.hour)
        try await year.waitFor([cycle3.orderId(step: 0)])
        try await year.advance(to: Self.due(year, 3) + Self.hour)
        try await year.waitFor([cycle3.orderId(step: 1)])
        #expect(year.finals.values.allSatisfy { $0 == "succeeded" }, "\(year.finals)")

        // The sandbox saw no debit of cycle 1 and no notification of cycle 2, and took one debit.
        let ledger = h.sandbox.ledger
        #expect(ledger.requests("phonepe:debit:" + cycle1.attemptReference) == 0)
        #expect(ledger.requests("phonepe:notify:" + year.attempt(0, cycle: 2, attempt: 1).attemptReference) == 0)
        let taken = ledger.document()["effects"]?.objectValue?.keys.filter { $0.hasPrefix("phonepe:debit:") } ?? []
        #expect(taken == ["phonepe:debit:" + cycle3.attemptReference])
        #expect(await Self.record(year)?["state"] == "active")
        await h.shutdown()
    }

    /// The request's answer is lost with the submitter (killed while the request is held in front
    /// of PhonePe); the redelivered order asks the status first, which knows nothing yet, so it
    /// is sent again, and the held copy reaches PhonePe first: PhonePe refuses the second as a
    /// duplicate. The status call then resolves it, for the notification and for the debit: each
    /// ends succeeded, one debit is taken, and nothing is declined or retried.
    @Test func aNotificationOrDebitRefusedAsADuplicateIsResolvedByItsStatusNotDeclined() async throws {
        let h = try await PipelineHarness(
            sandboxConfiguration: SandboxConfiguration(port: 0, outboundAttempts: 12).with { $0.phonePe.callbackDelayMilliseconds = 100 },
            // The submitter waits for the held request's answer until it is killed.
            timers: ["phonepeCallbackWaitMs": 3000, "httpRequestTimeoutMs": 5000, "leaseMs": 8000],
            redeliverAfterMilliseconds: 3000, schedules: ["retryAfterDays": [1, 3]])
        defer { Task { await h.shutdown() } }
        try h.startSigner()
        var submitter = try h.startSubmitter()
        try h.startCallbacks()
        var year = ScheduleTests.Year(h, nets: 0, phonePe: 1, months: 2)
        try await year.create()
        let reference = year.references[0].reference
        let attempt = year.attempt(0, cycle: 1, attempt: 1)

        for (step, request, at) in [(0, "notify", Self.due(year, 1) - Self.day + Self.hour), (1, "debit", Self.due(year, 1) + Self.hour)] {
            let key = "phonepe:\(request):" + attempt.attemptReference
            #expect(
                await h.sandboxPost("/_sandbox/subscriptions/phonepe/holdNext", ["subscription": .string(reference), "request": .string(request)])?.0
                    == 200)
            try await year.advance(to: at)
            #expect(await eventually(within: .seconds(60)) { h.sandbox.ledger.requests(key) == 1 }, "\(request) sent")
            submitter.signal(SIGKILL)
            let killed = submitter
            #expect(await eventually(within: .seconds(10)) { !killed.isRunning })
            submitter = try h.startSubmitter()
            try await year.waitFor([attempt.orderId(step: step)], timeout: .seconds(90))
            #expect(year.finals[attempt.orderId(step: step)] == "succeeded", "\(request)")
            // Sent twice, each seen: the held request and the copy PhonePe refused.
            #expect(h.sandbox.ledger.requests(key) == 2, "\(request)")
        }
        #expect(h.sandbox.ledger.effects("phonepe:debit:" + attempt.attemptReference) == 1)
        try await Self.awaitEvent("renewal.succeeded", &year)
        try await year.drain()
        let types = year.events.compactMap { $0["type"]?.stringValue }
        #expect(!types.contains("renewal.failed") && !types.contains("renewal.retrying"), "\(types)")
        #expect(types.filter { $0 == "renewal.succeeded" }.count == 1, "\(types)")
        let record = await Self.record(year)
        #expect(record?["state"] == "active" && record?["schedule"]?["cycle"] == 2 && record?["schedule"]?["attempt"] == 1)
        await h.shutdown()
    }
}

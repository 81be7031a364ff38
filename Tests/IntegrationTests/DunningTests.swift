import Foundation
import PaypipeCore
import Sandbox
import TestSupport
import Testing

/// Dunning through real processes (docs/protocol.md, "Declines"): a Nets subscription charged
/// monthly against the sandbox, whose card the test makes decline with chosen Nexi codes. A
/// soft decline (51, insufficient funds) is retried; a hard one (41 lost, 43 stolen) is not;
/// after the merchant's two unpaid cycles in a row its schedule is cancelled.
@Suite("Dunning through real processes", .serialized)
struct DunningTests {
    @Test func aHardDeclineIsNotRetriedASoftOneIsAndTwoUnpaidCyclesCancel() async throws {
        // A lease long enough for a loaded machine: one that lapses before a declined charge's
        // outcome is recorded has the charge sent again, and the sandbox's decline, good for
        // one charge, lets that one through.
        let h = try await PipelineHarness(
            sandboxConfiguration: SandboxConfiguration(port: 0, outboundAttempts: 12).with { $0.nets.completeCheckoutAfterMilliseconds = 50 },
            timers: ["httpRequestTimeoutMs": 2000, "leaseMs": 20_000], redeliverAfterMilliseconds: 3000,
            schedules: ["retryAfterDays": [1, 3]],
            dunning: ["default": ["retryAfterDays": [2], "onExhausted": "cancel", "afterUnpaidCycles": 2]])
        defer { Task { await h.shutdown() } }
        try h.startSigner()
        try h.startSubmitter()
        try h.startCallbacks()
        var year = ScheduleTests.Year(h, nets: 1, phonePe: 0, months: 6)
        try await year.create()
        let subscription: JSONValue = .string(year.references[0].reference)
        let hour: Int64 = 3_600_000
        func due(_ cycle: Int) -> Int64 { year.firstDate.addingMonths(cycle - 1).daysSinceEpoch * ScheduleTests.day }
        func decline(_ code: String) async {
            #expect(await h.sandboxPost("/_sandbox/subscriptions/nets/declineNext", ["subscription": subscription, "code": .string(code)])?.0 == 200)
        }
        func charge(cycle: Int64, attempt: Int64, at time: Int64) async throws -> String? {
            try await year.advance(to: time)
            let id = year.attempt(0, cycle: cycle, attempt: attempt).orderId(step: 0)
            try await year.waitFor([id])
            return year.finals[id]
        }

        // Cycle 1: insufficient funds, retried after the merchant's two days, and paid.
        await decline("51")
        #expect(try await charge(cycle: 1, attempt: 1, at: due(1) + hour) == "failed")
        #expect(try await charge(cycle: 1, attempt: 2, at: due(1) + 2 * ScheduleTests.day + 2 * hour) == "succeeded")
        // Cycle 2: a lost card, given up at once (1 of 2 unpaid cycles).
        await decline("41")
        #expect(try await charge(cycle: 2, attempt: 1, at: due(2) + hour) == "failed")
        // Cycle 3, after any retry of cycle 2 would have been due: a stolen card, the second
        // unpaid cycle in a row: the subscription is cancelled.
        await decline("43")
        #expect(try await charge(cycle: 3, attempt: 1, at: due(3) + hour) == "failed")
        // Cycle 4's date passes with nothing charged; the events tell why.
        try await year.advance(to: due(4) + hour)
        let reference = year.references[0].reference
        let cancelled = await eventually(within: .seconds(30)) {
            let record = try? await SubscriptionEventsTests.subscriptionRecord(h, provider: "nets", reference: reference)
            return record?["state"] == "cancelled" && record?["schedule"]?["state"] == "cancelled"
        }
        #expect(cancelled, "the subscription and its schedule cancelled")
        try await year.drain()
        let events = year.events.filter { $0["subscription"]?["reference"]?.stringValue == reference }
        let kinds = events.compactMap { $0["type"]?.stringValue }
        #expect(kinds.filter { $0 == "renewal.retrying" }.count == 1, "\(kinds)")
        let abandoned = events.filter { $0["type"] == "renewal.abandoned" }
        #expect(abandoned.map { $0["cycle"] } == [2, 3])
        #expect(abandoned.allSatisfy { $0["reason"]?.stringValue?.contains("a hard decline, not retried") == true })
        #expect(abandoned.first?["reason"]?.stringValue?.hasPrefix("NETS_DECLINED_41") == true)
        #expect(kinds.contains("subscription.cancelled"))
        // The scheduled orders: the declined ones, the retry that paid, and nothing else.
        #expect(
            Set(year.finals.keys) == Set([(1, 1), (1, 2), (2, 1), (3, 1)].map { year.attempt(0, cycle: $0.0, attempt: $0.1).orderId(step: 0) }),
            "\(year.finals)")
        await h.shutdown()
    }
}

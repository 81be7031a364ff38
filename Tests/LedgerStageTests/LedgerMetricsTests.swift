import StageRuntime
import TestSupport
import Testing

@testable import LedgerStage

struct LedgerMetricsTests {
    static let accepted = OutcomeLabels(status: "accepted", provider: "nets", operation: "createSubscription")

    /// The ledger performs its turns concurrently, so the counters of an earlier turn can be
    /// exported after a later one's: nothing may be counted twice or lost.
    @Test func snapshotsExportedOutOfOrderCountEveryEventOnce() {
        let metrics = StageMetrics()
        let exported = LedgerMetrics(metrics)
        var first = LedgerCore.Counters()
        first.ordersIn = 10
        first.outcomesOut[Self.accepted] = 4
        var second = first
        second.ordersIn = 25
        second.outcomesOut[Self.accepted] = 9
        second.dropped["not_json"] = 1
        var third = second
        third.ordersIn = 30
        third.duplicates = 2

        exported.update(second)
        exported.update(first)
        exported.update(third)

        let text = String(decoding: metrics.registry.emitToBuffer(), as: UTF8.self)
        #expect(text.contains("paypipe_orders_in_total 30\n"), "\(text)")
        #expect(text.contains("paypipe_orders_duplicate_total 2\n"))
        #expect(text.contains(#"paypipe_outcomes_out_total{status="accepted",provider="nets",operation="createSubscription"} 9"#))
        #expect(text.contains(#"paypipe_frames_dropped_total{reason="not_json"} 1"#))
    }
}

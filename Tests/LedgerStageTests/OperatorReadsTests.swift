import Foundation
import PaypipeCore
import StageWire
import TestSupport
import Testing

@testable import LedgerStage

@Suite("Operators' reads: their own connection, the log's index")
struct OperatorReadsTests {
    /// `order show` finds an order's outcomes by the log's index on the order's key, not by
    /// reading the whole log: the database's own plan for the statement says so.
    @Test func anOrdersOutcomesAreFoundByTheLogsIndex() throws {
        let store = try TestStores.open(TestStores.location())
        let plan = try store.outcomesOfOrderPlan()
        #expect(!plan.isEmpty)
        #expect(plan.contains { $0.contains("outcome_log_order") }, "\(plan)")
        // SQLite: "SCAN outcome_log"; PostgreSQL: "Seq Scan on outcome_log".
        #expect(!plan.contains { $0.contains("SCAN outcome_log") || $0.contains("Seq Scan on outcome_log") }, "\(plan)")
    }

    /// A connection of its own, that only reads, tells an order's story as the ledger's core
    /// does while the ledger's store is open, with every outcome logged for the order and no
    /// other order's.
    @Test func aReadOnlyConnectionTellsAnOrdersStoryWhileTheLedgerHasTheStoreOpen() async throws {
        let location = TestStores.location()
        var core = LedgerCore(store: try TestStores.open(location), registry: await testRegistry())
        _ = try core.intake([Array(rejectedOrder("story-1").utf8), Array(rejectedOrder("story-10").utf8)], now: 1000)
        _ = try core.intake([Array(phonePeOrder.utf8)], now: 1000)
        let o = try order(phonePeOrder)
        _ = core.handle(.claim([core.lease(o.key)]), now: 2000)
        let pending = Outcome(order: o, status: .pending, result: ["redirectURL": "ppe://x"], at: "2026-11-21T05:00:00.000Z")
        _ = try core.results([core.frame(pending)], now: 2000)
        _ = try core.results([core.frame(Outcome(order: o, status: .succeeded, at: "2026-11-21T05:00:01.000Z"))], now: 3000)

        let reader = try StoreReader(TestStores.settings(location))
        let story = try LedgerCore.answer(reading: .show(o.key), from: reader, now: 4000)["order"]
        let ownCore = try core.administer(.show(o.key), operatorKey: nil, now: 4000).reply["order"]
        #expect(story != nil && story == ownCore)
        #expect(story?["outcomes"]?.arrayValue?.compactMap { $0["outcome"]?["status"]?.stringValue } == ["pending", "succeeded"])
        let rejected = try LedgerCore.answer(reading: .show(OrderKey(merchant: "default", orderId: "story-1")), from: reader, now: 4000)
        #expect(rejected["order"]?["outcomes"]?.arrayValue?.compactMap { $0["outcome"]?["orderId"]?.stringValue } == ["story-1"])
        // It writes nothing: the database refuses it a write.
        #expect(throws: (any Error).self) { try reader.db.execute("DELETE FROM outcome_log") }
        #expect(try core.store.outcomes(after: 0, limit: 10).outcomes.count == 4)
    }

    /// A store of the schema before the log was keyed by order (version 8) is migrated: what it
    /// logged then is keyed from its own text, and found by the index like what it logs now.
    @Test func aStoreLoggedBeforeTheIndexIsKeyedWhenMigrated() async throws {
        let location = TestStores.location()
        let registry = await testRegistry()
        do {
            var core = LedgerCore(store: try TestStores.open(location), registry: registry)
            _ = try core.intake([Array(rejectedOrder("old-1").utf8), Array(rejectedOrder("old-2").utf8)], now: 1000)
            // As a store of version 8 was.
            try core.store.db.execute(
                """
                DROP INDEX outcome_log_order; ALTER TABLE outcome_log DROP COLUMN merchant; ALTER TABLE outcome_log DROP COLUMN order_id;
                UPDATE meta SET value='8' WHERE name='schema_version'
                """)
        }
        var core = LedgerCore(store: try TestStores.open(location), registry: registry)
        #expect(try core.store.storedSchemaVersion() == LedgerStore.schemaVersion)
        _ = try core.intake([Array(rejectedOrder("new-1").utf8)], now: 2000)
        let reader = try StoreReader(TestStores.settings(location))
        for id in ["old-1", "old-2", "new-1"] {
            let story = try LedgerCore.answer(reading: .show(OrderKey(merchant: "default", orderId: id)), from: reader, now: 3000)
            #expect(story["order"]?["outcomes"]?.arrayValue?.compactMap { $0["outcome"]?["orderId"]?.stringValue } == [id], "\(id)")
        }
    }
}

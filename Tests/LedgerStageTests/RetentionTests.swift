import CSQLite
import Connectors
import Foundation
import PaypipeCore
import StageRuntime
import StageWire
import TestSupport
import Testing

@testable import LedgerStage

/// Running per-state counts, and retention of terminal orders.
@Suite("Ledger store: running counts and retention")
struct RetentionTests {
    static func isDispatch(_ effect: LedgerCore.Effect) -> Bool { if case .dispatch = effect { true } else { false } }

    /// Runs SQL on a store file from outside the ledger (to build a store as older versions left it).
    static func execute(_ sql: String, on path: String) throws {
        var db: OpaquePointer?
        defer { sqlite3_close(db) }
        guard sqlite3_open(path, &db) == SQLITE_OK, sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK else {
            throw HarnessError("sql failed: \(String(cString: sqlite3_errmsg(db)))")
        }
    }

    /// The names of the tables, indexes and triggers stored in a store file.
    static func schemaNames(on path: String) throws -> Set<String> {
        var db: OpaquePointer?, statement: OpaquePointer?
        defer {
            sqlite3_finalize(statement)
            sqlite3_close(db)
        }
        guard sqlite3_open(path, &db) == SQLITE_OK,
            sqlite3_prepare_v2(db, "SELECT name FROM sqlite_master", -1, &statement, nil) == SQLITE_OK
        else { throw HarnessError("sql failed: \(String(cString: sqlite3_errmsg(db)))") }
        var names: Set<String> = []
        while sqlite3_step(statement) == SQLITE_ROW { names.insert(String(cString: sqlite3_column_text(statement, 0))) }
        return names
    }

    @Test func countsFollowEveryStateChangeIncludingReview() async throws {
        var core = LedgerCore(store: try temporaryStore(), registry: await testRegistry())
        let viva = try order(vivaOrder), phonepe = try order(phonePeOrder)
        _ = try core.intake([Array(vivaOrder.utf8), Array(phonePeOrder.utf8), Array(rejectedOrder("r-1").utf8)], now: 1000)
        #expect(try core.store.counts() == [.open: 2])
        _ = try core.submitted(Outcome(order: phonepe, status: .pending, result: ["authRequestId": "AR1"]), now: 2000)
        #expect(try core.store.counts() == [.open: 1, .pending: 1])
        let review = Outcome(order: phonepe, status: .unknown, error: .init(code: Outcome.ErrorInfo.needsReviewCode, message: "cannot tell"))
        _ = try core.submitted(review, now: 3000)
        _ = try core.submitted(Outcome(order: viva, status: .succeeded, result: [:]), now: 3000)
        // A second terminal outcome changes nothing.
        _ = try core.submitted(Outcome(order: viva, status: .failed, error: .init(code: "X", message: "m")), now: 3100)
        #expect(try core.store.counts() == [.review: 1])
    }

    /// The review gauge's age is that of the outcome that sent the longest-waiting order to
    /// review, not of the order itself; none once no order waits there.
    @Test func theOldestReviewIsTheEarliestOutcomeThatSentAnOrderThere() async throws {
        var core = LedgerCore(store: try temporaryStore(), registry: await testRegistry())
        let viva = try order(vivaOrder), phonepe = try order(phonePeOrder)
        _ = try core.intake([Array(vivaOrder.utf8), Array(phonePeOrder.utf8)], now: 1000)
        #expect(try core.store.oldestInReview() == nil)
        func review(_ order: Order, at: Int64) -> Outcome {
            Outcome(
                order: order, status: .unknown, error: .init(code: Outcome.ErrorInfo.needsReviewCode, message: "cannot tell"),
                at: Timestamp.iso8601(milliseconds: at))
        }
        _ = try core.submitted(review(phonepe, at: 1_795_237_200_123), now: 5000)
        _ = try core.submitted(review(viva, at: 1_795_237_100_000), now: 6000)
        #expect(try core.store.oldestInReview() == 1_795_237_100_000)
        _ = try core.submitted(Outcome(order: viva, status: .succeeded, result: [:]), now: 7000)
        #expect(try core.store.oldestInReview() == 1_795_237_200_123, "the order resolved no longer counts")
    }

    @Test func theRunningCountsAreWhatAStoreCountsWhenOpened() async throws {
        let path = TestStores.location()
        var core = LedgerCore(store: try TestStores.open(path), registry: await testRegistry())
        func sale(_ id: String) throws -> Order { try order(String(decoding: vivaSale(id), as: UTF8.self)) }
        let frames = (1...6).map { vivaSale("count-\($0)") }
        let keys = try (1...6).map { try sale("count-\($0)") }
        func results(_ outcomes: [Outcome], at now: Int64) throws {
            _ = core.handle(.claim(outcomes.map { core.lease(OrderKey(merchant: $0.merchant, orderId: $0.orderId)) }), now: now)
            _ = try core.results(outcomes.map { core.frame($0) }, now: now)
        }
        func review(_ order: Order) -> Outcome {
            Outcome(order: order, status: .unknown, error: .init(code: Outcome.ErrorInfo.needsReviewCode, message: "cannot tell"))
        }
        _ = try core.intake(frames + [frames[0], Array(rejectedOrder("count-r").utf8)], now: 1000)
        try results(
            [
                Outcome(order: keys[0], status: .unknown, error: .init(code: "TIMEOUT", message: "m")),
                Outcome(order: keys[1], status: .pending, result: ["checkoutUrl": "u"]),
                Outcome(order: keys[2], status: .succeeded, result: [:]),
                review(keys[3]),
            ], at: 2000)
        try results(
            [
                Outcome(order: keys[0], status: .pending, result: ["checkoutUrl": "u"]),
                // Pending again, unknown while pending, a second terminal outcome: the state stays.
                Outcome(order: keys[1], status: .pending, result: ["checkoutUrl": "u"]),
                Outcome(order: keys[1], status: .unknown, error: .init(code: "TIMEOUT", message: "m")),
                Outcome(order: keys[2], status: .failed, error: .init(code: "X", message: "m")),
                Outcome(order: keys[4], status: .failed, error: .init(code: "X", message: "m")),
                review(keys[1]),
                // An order the store never took.
                Outcome(order: try sale("count-unknown"), status: .succeeded, result: [:]),
            ], at: 3000)
        #expect(try core.store.counts() == [.open: 1, .pending: 1, .review: 2])
        try await reopen(&core, path: path)
        #expect(try core.store.counts() == [.open: 1, .pending: 1, .review: 2])
        try results([review(keys[0]), Outcome(order: keys[3], status: .succeeded, result: [:])], at: 4000)
        #expect(try core.store.counts() == [.open: 1, .review: 2])
        try await reopen(&core, path: path)
        #expect(try core.store.counts() == [.open: 1, .review: 2])
    }

    /// `core` with its store at `path` opened anew: the one it holds is closed first, since a
    /// SQLite store has one ledger at a time.
    private func reopen(_ core: inout LedgerCore, path: String) async throws {
        let registry = await testRegistry()
        core = LedgerCore(store: try temporaryStore(), registry: registry)
        core = LedgerCore(store: try TestStores.open(path), registry: registry)
    }

    @Test func aStoreFromBeforeGainsItsCountsAndEndTimesOnOpening() async throws {
        let path = TestStores.path()
        do {
            var core = LedgerCore(store: try LedgerStore(path: path), registry: await testRegistry())
            _ = try core.intake([Array(vivaOrder.utf8), Array(phonePeOrder.utf8), Array(rejectedOrder("r-1").utf8)], now: 1000)
        }
        // As a store of earlier versions: no end times; full indexes over every order, and the
        // partial index of every order in flight by lease; counts in a durable table kept by
        // triggers (here wrong, so that reading them would show).
        try Self.execute(
            """
            CREATE INDEX outcome_log_at ON outcome_log(at);
            DROP INDEX orders_to_compact; DROP INDEX orders_ended;
            ALTER TABLE orders DROP COLUMN ended_at;
            DROP INDEX orders_in_flight; DROP INDEX orders_held; DROP INDEX orders_pending; DROP INDEX orders_in_review;
            CREATE INDEX orders_leased ON orders(state, lease_until) WHERE state IN ('open','unknown');
            CREATE INDEX orders_redelivery ON orders(state, dispatched_at);
            CREATE INDEX orders_lease ON orders(state, lease_until);
            CREATE INDEX orders_async ON orders(provider, state, pending_at);
            CREATE TABLE state_counts(state TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID;
            INSERT INTO state_counts VALUES('open', 7), ('terminal', 9);
            CREATE TRIGGER orders_count_insert AFTER INSERT ON orders BEGIN UPDATE state_counts SET n=n+1 WHERE state=NEW.state; END;
            CREATE TRIGGER orders_count_update AFTER UPDATE OF state ON orders BEGIN UPDATE state_counts SET n=n+1 WHERE state=NEW.state; END;
            CREATE TRIGGER orders_count_delete AFTER DELETE ON orders BEGIN UPDATE state_counts SET n=n-1 WHERE state=OLD.state; END;
            \(Self.unversioned)
            """, on: path)
        let before = Timestamp.nowMilliseconds()
        var reopened = LedgerCore(store: try LedgerStore(path: path), registry: await testRegistry())
        #expect(try reopened.store.counts() == [.open: 2])
        let schema = try Self.schemaNames(on: path)
        #expect(Set(["orders_in_flight", "orders_held", "orders_pending", "orders_in_review"]).isSubset(of: schema))
        #expect(
            schema.isDisjoint(with: [
                "orders_redelivery", "orders_lease", "orders_leased", "orders_async", "state_counts", "orders_count_insert", "orders_count_update",
                "orders_count_delete",
            ]))
        #expect(schema.isDisjoint(with: ["orders_ended_on_insert", "orders_ended_on_update", "outcome_log_at"]))
        // The rejection ended "now" as far as retention knows: nothing older is compacted early.
        #expect(try reopened.store.transaction { try reopened.store.forgetOrders(endedBefore: before - 1, limit: 10) } == 0)
        _ = try reopened.submitted(Outcome(order: try order(vivaOrder), status: .succeeded, result: [:]), now: 2000)
        #expect(try reopened.store.counts() == [.open: 1])
    }

    /// Redelivery and a restart's lease extension search the partial indexes of orders in
    /// flight and of held leases; neither reads every order in flight.
    @Test func theStatementsThatFindWorkByTimeSearchTheirPartialIndexes() throws {
        let plans = try LedgerStore(path: TestStores.path()).queryPlans()
        let stalled = plans["stalled"] ?? [], extend = plans["extendHeldLeases"] ?? []
        #expect(stalled.contains { $0.contains("USING INDEX orders_in_flight (state=? AND dispatched_at<?)") })
        #expect(stalled.contains { $0.contains("USING INDEX orders_held (lease_until<?)") })
        #expect(extend.contains { $0.contains("USING INDEX orders_held") })
        #expect((plans["shiftHeldLeases"] ?? []).contains { $0.contains("USING INDEX orders_held") })
        #expect((stalled + extend).allSatisfy { !$0.hasPrefix("SCAN") })
    }

    @Test func compactionKeepsTheKeyAndOutcomeAndForgettingMakesTheKeyNew() async throws {
        let registry = await testRegistry()
        var core = LedgerCore(store: try temporaryStore(), registry: registry)
        let store = core.store
        let phonepe = try order(phonePeOrder)
        let reference = try #require(registry.connector(for: .phonepe)?.callbackReferences(for: phonepe).first)
        _ = try core.intake([Array(phonePeOrder.utf8)], now: 1000)
        _ = try core.submitted(Outcome(order: phonepe, status: .pending, result: ["authRequestId": .string(reference)]), now: 2000)
        let done = Outcome(order: phonepe, status: .succeeded, result: ["state": "COMPLETED"])
        #expect(
            core.handle(.settle(phonepe.key, event: "phonepe|AR1|COMPLETED", outcome: done), now: 3000).0 == .settled(applied: true, duplicate: false)
        )
        #expect(try store.lookup(provider: .phonepe, ref: reference, merchant: phonepe.merchant) != nil)
        // Still open: never compacted, however old.
        _ = try core.intake([Array(vivaOrder.utf8)], now: 1000)
        let ended: Int64 = 3000

        #expect(try store.transaction { try store.compactOrders(endedBefore: ended, limit: 10) } == 0)
        #expect(try store.transaction { try store.compactOrders(endedBefore: ended + 1, limit: 10) } == 1)
        #expect(try store.transaction { try store.compactOrders(endedBefore: .max, limit: 10) } == 0)
        #expect(try store.lookup(phonepe.key) == nil)
        #expect(try store.lookup(provider: .phonepe, ref: reference, merchant: phonepe.merchant) == nil)
        #expect(try store.lookup(try order(vivaOrder).key)?.state == .open)
        // The callback event went too; the repeated order is still answered with its outcome.
        let repeated = try core.intake([Array(phonePeOrder.utf8)], now: 4000)
        guard repeated.count == 1, case .emit(let bytes) = repeated[0], let outcome = try? Outcome.parse(bytes) else {
            Issue.record("expected the stored outcome, got \(repeated)")
            return
        }
        #expect(outcome.status == .succeeded && outcome.orderId == phonepe.orderId)
        #expect(try store.counts() == [.open: 1])

        #expect(try store.transaction { try store.forgetOrders(endedBefore: ended, limit: 10) } == 0)
        #expect(try store.transaction { try store.forgetOrders(endedBefore: ended + 1, limit: 10) } == 1)
        #expect(try store.lookup(phonepe.key) == nil)
        #expect(try core.intake([Array(phonePeOrder.utf8)], now: 5000).contains(where: Self.isDispatch))
    }

    @Test func anOrderEndsWhenItsTerminalOutcomeIsRecordedOrItIsRejected() async throws {
        var core = LedgerCore(store: try temporaryStore(), registry: await testRegistry())
        let store = core.store
        let viva = try order(vivaOrder), phonepe = try order(phonePeOrder)
        _ = try core.intake([Array(vivaOrder.utf8), Array(phonePeOrder.utf8)], now: 1000)
        _ = try core.intake([Array(rejectedOrder("r-1").utf8)], now: 2000)
        _ = try core.submitted(Outcome(order: phonepe, status: .pending, result: ["authRequestId": "AR1"]), now: 3000)
        _ = try core.submitted(Outcome(order: viva, status: .succeeded, result: [:]), now: 4000)
        // A second terminal outcome is dropped, and so is its time.
        _ = try core.submitted(Outcome(order: viva, status: .failed, error: .init(code: "X", message: "m")), now: 9000)
        // The rejection ended at 2000, the Viva order at 4000; the pending order has not ended.
        #expect(try store.transaction { try store.forgetOrders(endedBefore: 2000, limit: 10) } == 0)
        #expect(try store.transaction { try store.forgetOrders(endedBefore: 2001, limit: 10) } == 1)
        #expect(try store.transaction { try store.compactOrders(endedBefore: 4000, limit: 10) } == 0)
        #expect(try store.transaction { try store.forgetOrders(endedBefore: 4001, limit: 10) } == 1)
        #expect(try store.lookup(phonepe.key)?.state == .pending)
        #expect(try store.transaction { try store.forgetOrders(endedBefore: .max, limit: 10) } == 0)
    }

    /// Stores of the releases before schema versions record none, and have no epochs.
    static let unversioned = "DELETE FROM meta WHERE name='schema_version'; DROP TABLE epochs;"

    @Test func aStoreWhoseTriggersSetTheEndTimeLosesThemOnOpening() async throws {
        let path = TestStores.path()
        _ = try LedgerStore(path: path)
        // As stores of an earlier release left them: the end time set by triggers, on SQLite's
        // clock.
        let now = "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)"
        try Self.execute(
            """
            CREATE TRIGGER orders_ended_on_insert AFTER INSERT ON orders WHEN NEW.state='terminal' BEGIN
              UPDATE orders SET ended_at=\(now) WHERE merchant=NEW.merchant AND order_id=NEW.order_id;
            END;
            CREATE TRIGGER orders_ended_on_update AFTER UPDATE OF state ON orders WHEN NEW.state='terminal' AND OLD.state!='terminal' BEGIN
              UPDATE orders SET ended_at=\(now) WHERE merchant=NEW.merchant AND order_id=NEW.order_id;
            END;
            \(Self.unversioned)
            """, on: path)
        var core = LedgerCore(store: try LedgerStore(path: path), registry: await testRegistry())
        #expect(try Self.schemaNames(on: path).isDisjoint(with: ["orders_ended_on_insert", "orders_ended_on_update"]))
        _ = try core.intake([Array(vivaOrder.utf8)], now: 1000)
        _ = try core.submitted(Outcome(order: try order(vivaOrder), status: .succeeded, result: [:]), now: 2000)
        #expect(try core.store.transaction { try core.store.forgetOrders(endedBefore: 2000, limit: 10) } == 0)
        #expect(try core.store.transaction { try core.store.forgetOrders(endedBefore: 2001, limit: 10) } == 1)
    }

    @Test func retentionIsBoundedPerCall() async throws {
        var core = LedgerCore(store: try temporaryStore(), registry: await testRegistry())
        let store = core.store
        _ = try core.intake((1...25).map { Array(rejectedOrder("old-\($0)").utf8) }, now: 1000)
        // Rejections keep no order contents: nothing to compact, only keys to forget.
        #expect(try store.transaction { try store.compactOrders(endedBefore: .max, limit: 10) } == 0)
        #expect(try store.transaction { try store.forgetOrders(endedBefore: .max, limit: 10) } == 10)
        #expect(try store.transaction { try store.forgetOrders(endedBefore: .max, limit: 10) } == 10)
        #expect(try store.transaction { try store.forgetOrders(endedBefore: .max, limit: 10) } == 5)
        #expect(try store.transaction { try store.forgetOrders(endedBefore: .max, limit: 10) } == 0)
    }

    @Test func configReadsOrderRetentionAndRefusesKeysKeptShorterThanOrders() throws {
        let defaults = try demoConfig()
        #expect(defaults.retention.ordersDays == 90 && defaults.retention.orderKeysDays == 400)
        func config(_ retention: String) throws -> PaypipeConfig {
            let text = DemoConfig.text(sandboxURL: "http://127.0.0.1:9")
                .replacingOccurrences(of: #""endpoints":"#, with: #""retention": \#(retention), "endpoints":"#)
            return try PaypipeConfig.parse(Array(text.utf8))
        }
        let set = try config(#"{"ordersDays": 7, "orderKeysDays": 30}"#)
        #expect(set.retention.ordersDays == 7 && set.retention.orderKeysDays == 30)
        #expect(throws: ConfigError(path: "retention.orderKeysDays", reason: "must be at least retention.ordersDays (120)")) {
            try config(#"{"ordersDays": 120, "orderKeysDays": 100}"#)
        }
        #expect(throws: ConfigError.self) { try config(#"{"ordersDays": 0}"#) }
        #expect(throws: ConfigError.self) { try config(#"{"orderDays": 7}"#) }
    }
}

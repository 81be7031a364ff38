import CSQLite
import Foundation
import PaypipeCore
import StageRuntime
import StageWire
import TestSupport
import Testing

@testable import LedgerStage

/// New stores key orders by (order_id, merchant) and references by (ref, provider); stores created
/// by earlier releases keep (merchant, order_id) and (provider, ref). Both must serve every order's
/// whole life the same way.
@Suite("Ledger store: either key order")
struct StoreKeyOrderTests {
    enum Layout: String, CaseIterable, CustomTestStringConvertible {
        case created, fromBefore
        var testDescription: String { rawValue }
    }

    /// The key columns of `table`, in key order.
    static func keyColumns(_ table: String, on path: String) throws -> [String] {
        var db: OpaquePointer?, statement: OpaquePointer?
        defer {
            sqlite3_finalize(statement)
            sqlite3_close(db)
        }
        guard sqlite3_open(path, &db) == SQLITE_OK,
            sqlite3_prepare_v2(db, "SELECT name FROM pragma_table_info('\(table)') WHERE pk > 0 ORDER BY pk", -1, &statement, nil) == SQLITE_OK
        else { throw HarnessError("sql failed: \(String(cString: sqlite3_errmsg(db)))") }
        var names: [String] = []
        while sqlite3_step(statement) == SQLITE_ROW { names.append(String(cString: sqlite3_column_text(statement, 0))) }
        return names
    }

    @Test(arguments: Layout.allCases)
    func everyOrderLivesTheSameUnderEitherKeyOrder(_ layout: Layout) async throws {
        let path = TestStores.path()
        if layout == .fromBefore {
            // The tables as stores of earlier versions created them; opening adds the rest.
            try RetentionTests.execute(
                """
                CREATE TABLE orders(
                  merchant TEXT NOT NULL, order_id TEXT NOT NULL, order_json TEXT,
                  state TEXT NOT NULL, outcome TEXT, accepted_at INTEGER NOT NULL,
                  dispatched_at INTEGER NOT NULL, dispatches INTEGER NOT NULL,
                  PRIMARY KEY(merchant, order_id)) WITHOUT ROWID;
                CREATE TABLE refs(provider TEXT NOT NULL, ref TEXT NOT NULL, merchant TEXT NOT NULL,
                  order_id TEXT NOT NULL, PRIMARY KEY(provider, ref)) WITHOUT ROWID;
                """, on: path)
        }
        let registry = await testRegistry()
        var core = LedgerCore(store: try LedgerStore(path: path), registry: registry)
        let store = core.store
        switch layout {
        case .created:
            #expect(try Self.keyColumns("orders", on: path) == ["order_id", "merchant"])
            #expect(try Self.keyColumns("refs", on: path) == ["ref", "provider", "merchant"])
        case .fromBefore:
            #expect(try Self.keyColumns("orders", on: path) == ["merchant", "order_id"])
            // References gain the merchant in their key when the store is opened.
            #expect(try Self.keyColumns("refs", on: path) == ["ref", "provider", "merchant"])
        }

        // Enough orders for the keys to span several B-tree pages, taken in a shuffled order.
        let count = 400
        let ids = (0..<count).map { "key-order-\($0)" }.shuffled()
        let frames = ids.map { Array(phonePeAuthInit($0, authRequestId: "AR\($0.split(separator: "-").last!)").utf8) }
        let dispatched = try core.intake(frames, now: 1000).filter(RetentionTests.isDispatch)
        #expect(dispatched.count == count)
        #expect(try core.intake(Array(frames.prefix(10)), now: 1100).isEmpty)
        // The same orderId under two merchants is two orders, each answered with its own outcome.
        let rejections = [
            Array(rejectedOrder("key-order-7", merchant: #""m-a""#).utf8), Array(rejectedOrder("key-order-7", merchant: #""m-b""#).utf8),
        ]
        _ = try core.intake(rejections, now: 1200)
        let replayed = try core.intake(rejections, now: 1300).compactMap { effect -> Outcome? in
            guard case .emit(let bytes) = effect else { return nil }
            return try? Outcome.parse(bytes)
        }
        #expect(replayed.map(\.merchant) == ["m-a", "m-b"] && replayed.allSatisfy { $0.status == .rejected && $0.orderId == "key-order-7" })

        let orders = try ids.map { id in try order(phonePeAuthInit(id, authRequestId: "AR\(id.split(separator: "-").last!)")) }
        #expect(core.handle(.claim(orders.map { core.lease($0.key) }), now: 1500).0 == .claimed(Array(repeating: true, count: count)))
        let pending = orders.map {
            Outcome(order: $0, status: .pending, result: ["authRequestId": .string("AR\($0.orderId.split(separator: "-").last!)")])
        }
        _ = try core.results(pending.map { core.frame($0) }, now: 2000)
        #expect(try store.counts() == [.pending: count])
        for order in orders {
            let reference = try #require(registry.connector(for: .phonepe)?.callbackReferences(for: order).first)
            let found = try #require(try store.lookup(provider: .phonepe, ref: reference, merchant: order.merchant), "no order for \(reference)")
            #expect(found.state == .pending)
        }

        // Half of them settled by their callbacks; the rest stay pending.
        for order in orders.prefix(count / 2) {
            let done = Outcome(order: order, status: .succeeded, result: ["state": "COMPLETED"])
            #expect(
                core.handle(.settle(order.key, event: "phonepe|\(order.orderId)|COMPLETED", outcome: done), now: 3000).0
                    == .settled(applied: true, duplicate: false))
        }
        #expect(try store.counts() == [.pending: count - count / 2])
        let repeated = try core.intake([frames[ids.firstIndex(of: orders[0].orderId)!]], now: 4000)
        guard repeated.count == 1, case .emit(let bytes) = repeated[0], let outcome = try? Outcome.parse(bytes) else {
            Issue.record("expected the stored outcome, got \(repeated)")
            return
        }
        #expect(outcome.status == .succeeded && outcome.orderId == orders[0].orderId)

        // Retention forgets the ended orders, their references with them.
        #expect(try store.transaction { try store.forgetOrders(endedBefore: .max, limit: 1000) } == count / 2 + 2)
        for order in orders.prefix(count / 2) {
            #expect(try store.lookup(order.key) == nil)
            let reference = try #require(registry.connector(for: .phonepe)?.callbackReferences(for: order).first)
            #expect(try store.lookup(provider: .phonepe, ref: reference, merchant: order.merchant) == nil)
        }
        #expect(try orders.suffix(count - count / 2).allSatisfy { try store.lookup($0.key)?.state == .pending })
    }
}

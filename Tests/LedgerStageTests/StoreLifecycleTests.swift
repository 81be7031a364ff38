import Foundation
import PaypipeCore
import StageWire
import TestSupport
import Testing

@testable import LedgerStage

/// What a store does as a whole, on SQLite and on PostgreSQL (`PAYPIPE_TEST_STORE`): its
/// schema's version, its epochs, a restore from an older copy, one ledger per SQLite file.
@Suite("The store: schema versions, epochs, restores, one writer")
struct StoreLifecycleTests {
    @Test func aStoreRecordsItsSchemaVersionAndRefusesANewerOne() async throws {
        let location = TestStores.location()
        do {
            let store = try TestStores.open(location)
            #expect(try store.storedSchemaVersion() == LedgerStore.schemaVersion)
            try store.db.query("UPDATE meta SET value='99' WHERE name='schema_version'", [])
        }
        do {
            _ = try TestStores.open(location)
            Issue.record("a store of schema version 99 must not open")
        } catch {
            #expect("\(error)".contains("version 99, newer than this paypipe knows (\(LedgerStore.schemaVersion))"))
        }
    }

    /// Each opening is an epoch that begins after the last seq handed out: an upstream that saw
    /// every seq of an earlier epoch goes on from it; one that claims more than the epoch held,
    /// or names an epoch the store never had, is told.
    @Test func everyOpeningIsAnEpochAndReplayChecksItsHighWaterMark() async throws {
        let location = TestStores.location()
        let first: String
        do {
            var core = LedgerCore(store: try TestStores.open(location), registry: await testRegistry())
            first = core.store.epoch
            let emitted = try core.intake([Array(rejectedOrder("e-1").utf8), Array(rejectedOrder("e-2").utf8)], now: 1000)
            #expect(
                emitted.allSatisfy { effect in
                    guard case .emit(let bytes) = effect else { return false }
                    return (try? JSONValue.parse(bytes))?["epoch"]?.stringValue == first
                })
        }
        var core = LedgerCore(store: try TestStores.open(location), registry: await testRegistry())
        let second = core.store.epoch
        #expect(second != first && second.utf8.count == 16)
        _ = try core.intake([Array(rejectedOrder("e-3").utf8)], now: 2000)
        #expect(try core.store.replayContinues(epoch: first, after: 2))
        #expect(try core.store.replayContinues(epoch: first, after: 0))
        #expect(try !core.store.replayContinues(epoch: first, after: 3))
        #expect(try core.store.replayContinues(epoch: second, after: 3))
        #expect(try !core.store.replayContinues(epoch: second, after: 4))
        #expect(try !core.store.replayContinues(epoch: "0123456789abcdef", after: 0))
    }

    /// The must-show of a restore: upstream held seq 3 of the epoch in which the store was
    /// copied; the store is put back to the copy (which ended at seq 2) and reopened. Upstream's
    /// replay from its mark is answered `diverged`, not with the copy's new seq 3.
    @Test func aStoreRestoredFromAnOlderCopyIsDetectedByReplayFromTheHighWaterMark() async throws {
        let location = TestStores.location()
        let registry = await testRegistry()
        var upstreamMark: (epoch: String, seq: Int64)?
        let copy: StoreCopy
        do {
            var core = LedgerCore(store: try TestStores.open(location), registry: registry)
            _ = try core.intake([Array(rejectedOrder("r-1").utf8), Array(rejectedOrder("r-2").utf8)], now: 1000)
            copy = try StoreCopy(of: core.store, at: location)
            let effects = try core.intake([Array(rejectedOrder("r-3").utf8)], now: 2000)
            if case .emit(let bytes)? = effects.first, case .object(let o)? = try? JSONValue.parse(bytes),
                let epoch = o["epoch"]?.stringValue, let seq = o["seq"]?.integerValue
            {
                upstreamMark = (epoch, seq)
            }
        }
        let mark = try #require(upstreamMark)
        #expect(mark.seq == 3)
        try copy.restore(at: location)

        var restored = LedgerCore(store: try TestStores.open(location), registry: registry)
        let other = try restored.intake([Array(rejectedOrder("r-9").utf8)], now: 3000)
        #expect(seqs(other) == [3])
        let epoch = restored.store.epoch
        // Read as a running ledger answers replay: through a connection of its own.
        let service = LedgerService.Reads(reader: try StoreReader(TestStores.settings(location)), revealer: nil, epoch: restored.store.currentEpoch)
        let request = OutcomeReplay.Request(since: mark.seq, limit: 10, epoch: mark.epoch)
        let answer = LedgerService.answer(replayRequest: [Array("client".utf8), request.bytes], reads: service, logger: .init(label: "test"))
        let reply = try #require(answer.first?.frames.last.flatMap { try? JSONValue.parse($0) })
        #expect(reply["diverged"] == .bool(true))
        #expect(reply["epoch"]?.stringValue == epoch)
        #expect(answer.count == 1)
        // From 0 of the new epoch, upstream reads what the restored store holds.
        let fromZero = LedgerService.answer(
            replayRequest: [Array("client".utf8), OutcomeReplay.Request(since: 0, limit: 10).bytes], reads: service, logger: .init(label: "test"))
        #expect(fromZero.count == 4)
        #expect(fromZero.last?.frames.last.flatMap(OutcomeReplay.Trailer.parse)?.epoch == epoch)
    }

    @Test(.enabled(if: TestStores.postgres == nil)) func aSecondLedgerOnOneSQLiteFileRefusesToStart() throws {
        let path = TestStores.path()
        var first: LedgerStore? = try LedgerStore(path: path)
        #expect(first != nil)
        do {
            _ = try LedgerStore(path: path)
            Issue.record("a second store on one file must not open")
        } catch {
            #expect("\(error)".contains("is open in another ledger"))
        }
        first = nil
        _ = try LedgerStore(path: path)
    }
}

/// A copy of a store as a backup holds it: the SQLite file, or the PostgreSQL schema's tables.
struct StoreCopy {
    let files: [String: Data]
    let schema: String?

    init(of store: LedgerStore, at location: String) throws {
        if TestStores.postgres == nil {
            // SQLite's online copy: VACUUM INTO writes the committed state to a new file.
            let copy = location + ".copy"
            try store.db.execute("VACUUM INTO '\(copy)'")
            files = [location: try Data(contentsOf: URL(fileURLWithPath: copy))]
            schema = nil
            return
        }
        let backup = location + "_copy"
        var script = "CREATE SCHEMA \(backup);"
        for table in ["meta", "orders", "refs", "callback_events", "outcome_log", "log_head", "epochs"] {
            script += "CREATE TABLE \(backup).\(table) (LIKE \(location).\(table) INCLUDING ALL);"
            script += "INSERT INTO \(backup).\(table) SELECT * FROM \(location).\(table);"
        }
        try store.db.execute(script)
        files = [:]
        schema = backup
    }

    /// Puts the store back to the copy; the store must be closed.
    func restore(at location: String) throws {
        guard let schema else {
            for suffix in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: location + suffix) }
            for (path, data) in files { try data.write(to: URL(fileURLWithPath: path)) }
            return
        }
        let db = try PostgresDatabase(settings: TestStores.postgres!, logger: .init(label: "test"))
        try db.execute("DROP SCHEMA \(location) CASCADE; ALTER SCHEMA \(schema) RENAME TO \(location)")
    }
}

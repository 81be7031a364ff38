import Foundation
import PaypipeCore
import Synchronization
import TestSupport
import Testing

@testable import LedgerStage

/// `paypipe store backup` and `restore` on SQLite: a copy taken while the ledger writes is one
/// committed state of the store, and a restore never replaces a store a ledger holds nor loses
/// the store it replaces.
@Suite("SQLite backups and restores")
struct StoreBackupTests {
    static func count(_ table: StaticString, in store: LedgerStore) throws -> Int64 {
        try store.db.query(table, []).first?[0].integer ?? -1
    }

    @Test func aCopyTakenWhileTheLedgerWritesIsOneCommittedState() async throws {
        let path = TestStores.path()
        var core = LedgerCore(store: try LedgerStore(path: path), registry: await testRegistry())
        // More pages than one step copies, so the ledger writes between the steps.
        for batch in 0..<20 {
            _ = try core.intake((0..<1000).map { Array(rejectedOrder("b-\(batch)-\($0)").utf8) }, now: 1000)
        }
        let destination = path + ".backup"
        let copied = Mutex<Result<SQLiteStoreCopy, StoreError>?>(nil)
        Thread.detachNewThread {
            let result = Result { () throws(StoreError) in try SQLiteBackup.backup(storePath: path, to: destination) }
            copied.withLock { $0 = result }
        }
        var written = 0
        while copied.withLock({ $0 == nil }) {
            _ = try core.intake([Array(rejectedOrder("during-\(written)").utf8)], now: 2000)
            written += 1
        }
        let copy = try #require(copied.withLock { $0 }).get()
        #expect(written > 0)
        #expect(copy.schemaVersion == LedgerStore.schemaVersion)
        #expect(copy.epoch == core.store.epoch)
        #expect(copy.lastSeq >= 20_000 && copy.lastSeq <= 20_000 + Int64(written))
        // Recorded in the store for the backup-age check, as taken before the copy began.
        let recorded = try #require(try core.store.db.lastBackupTakenAt())
        #expect(recorded <= Timestamp.nowMilliseconds() && recorded > Timestamp.nowMilliseconds() - 600_000)
        let attributes = try FileManager.default.attributesOfItem(atPath: destination)
        #expect((attributes[.posixPermissions] as? Int) == 0o600)
        #expect(!FileManager.default.fileExists(atPath: destination + ".partial-\(getpid())"))

        // Every outcome the copy's log handed out is in it, and its epoch reached exactly there.
        let reopened = try LedgerStore(path: destination)
        #expect(try Self.count("SELECT COUNT(*) FROM outcome_log", in: reopened) == copy.lastSeq)
        #expect(try Self.count("SELECT COUNT(*) FROM orders", in: reopened) == copy.lastSeq)
        #expect(try reopened.replayContinues(epoch: core.store.epoch, after: copy.lastSeq))
        #expect(try !reopened.replayContinues(epoch: core.store.epoch, after: copy.lastSeq + 1))
    }

    @Test func aRestoreRefusesAHeldStoreAndForeignOrNewerCopiesAndKeepsTheStoreItReplaces() async throws {
        let path = TestStores.path()
        let copyPath = path + ".backup"
        var store: LedgerStore? = try LedgerStore(path: path)
        var core = LedgerCore(store: store!, registry: await testRegistry())
        _ = try core.intake([Array(rejectedOrder("before").utf8)], now: 1000)
        _ = try SQLiteBackup.backup(storePath: path, to: copyPath)
        _ = try core.intake([Array(rejectedOrder("after").utf8)], now: 2000)

        do {
            _ = try SQLiteBackup.restore(storePath: path, from: copyPath, now: 3000)
            Issue.record("a store a ledger holds must not be replaced")
        } catch {
            #expect("\(error)".contains("is open in a ledger: stop the ledger before restoring its store"))
        }
        core = LedgerCore(store: try LedgerStore(path: TestStores.path()), registry: await testRegistry())
        store = nil

        let foreign = path + ".foreign"
        try Data("not a database at all, but long enough to be read as one".utf8).write(to: URL(fileURLWithPath: foreign))
        do {
            _ = try SQLiteBackup.restore(storePath: path, from: foreign, now: 3000)
            Issue.record("a file that is not a store must not be restored")
        } catch {
            #expect("\(error)".contains("fails SQLite's integrity check"))
        }
        let newer = path + ".newer"
        _ = try SQLiteBackup.backup(storePath: copyPath, to: newer)
        try SQLiteConnection(path: newer).execute("UPDATE meta SET value='99' WHERE name='schema_version'")
        do {
            _ = try SQLiteBackup.restore(storePath: path, from: newer, now: 3000)
            Issue.record("a copy of a newer schema must not be restored")
        } catch {
            #expect("\(error)".contains("schema version 99, newer than this paypipe knows"))
        }

        let (restored, keptAt) = try SQLiteBackup.restore(storePath: path, from: copyPath, now: 1_796_000_000_000)
        #expect(restored.lastSeq == 1)
        let aside = try #require(keptAt)
        #expect(aside.hasPrefix(path + ".replaced-") && aside.hasSuffix("Z"))
        // The replaced store, with what its WAL held, opens as it was.
        let replaced = try LedgerStore(path: aside)
        #expect(try Self.count("SELECT COUNT(*) FROM outcome_log", in: replaced) == 2)
        let back = try LedgerStore(path: path)
        #expect(try Self.count("SELECT COUNT(*) FROM outcome_log", in: back) == 1)
        #expect(try back.db.query("SELECT order_id FROM orders", []).map { $0[0].text } == ["before"])
    }
}

import Foundation
import PaypipeCore
import TestSupport
import Testing

@testable import LedgerStage

/// `paypipe-ledger migrate`'s store side, on SQLite and on PostgreSQL (`PAYPIPE_TEST_STORE`): a
/// store with steps to run and orders to lose is migrated only after a recent backup, and a
/// ledger that leaves migrations to it opens only a store at its schema.
@Suite("The store's migrations as a step of their own: backups first")
struct StoreMigrationTests {
    static let hour: Int64 = 3_600_000
    static let now: Int64 = 1_900_000_000_000

    /// A store with an order in it, put back to schema 10: before the step that records backups.
    static func storeAtVersion10() async throws -> String {
        let location = TestStores.location()
        var core = LedgerCore(store: try TestStores.open(location), registry: await testRegistry())
        _ = try core.intake([Array(rejectedOrder("kept-1").utf8)], now: 1000)
        try core.store.db.execute("DROP TABLE store_backups; UPDATE meta SET value='10' WHERE name='schema_version'")
        return location
    }

    static func migrate(_ location: String, within limit: Int64?) throws -> SchemaMigration {
        try LedgerStore.migrate(TestStores.settings(location), maxBackupAgeMilliseconds: limit, now: now, logger: .init(label: "test"))
    }

    /// A plain connection, as `paypipe store backup` has beside a running ledger.
    static func database(_ location: String) throws -> any StoreDatabase {
        switch TestStores.settings(location) {
        case .sqlite(let path): try SQLiteConnection(path: path)
        case .postgres(let settings): try PostgresDatabase(settings: settings, logger: .init(label: "test"))
        }
    }

    @Test func aStoreWithStepsToRunAndNoBackupIsNotMigrated() async throws {
        let location = try await Self.storeAtVersion10()
        #expect {
            try Self.migrate(location, within: 24 * Self.hour)
        } throws: { error in
            let refused = error as? MigrationNeedsBackup
            return refused?.ageMilliseconds == nil
                && refused?.description.contains("no backup of the store is recorded") == true
                && refused?.description.contains("--without-backup") == true
        }
        #expect(try Self.database(location).recordedSchemaVersion() == 10, "nothing changed")
    }

    @Test func aBackupOlderThanTheLimitIsRefusedWithItsAgeAndTheLimit() async throws {
        let location = try await Self.storeAtVersion10()
        // Recorded by a release that knows the table, on a store that does not have it yet.
        try Self.database(location).recordBackup(takenAt: Self.now - 30 * Self.hour, kind: "test", location: "/backups/old")
        #expect {
            try Self.migrate(location, within: 24 * Self.hour)
        } throws: { error in
            let refused = error as? MigrationNeedsBackup
            return refused?.ageMilliseconds == 30 * Self.hour
                && refused?.description.contains("taken 1d 6h ago") == true
                && refused?.description.contains("within 1d (store.maxBackupAgeMinutes, or --max-backup-age)") == true
        }
        #expect(try Self.database(location).recordedSchemaVersion() == 10)
    }

    @Test func aRecentBackupLetsTheMigrationRunAndItKeepsTheRecord() async throws {
        let location = try await Self.storeAtVersion10()
        let db = try Self.database(location)
        try db.recordBackup(takenAt: Self.now - 30 * Self.hour, kind: "test", location: "/backups/old")
        try db.recordBackup(takenAt: Self.now - Self.hour, kind: "test", location: "/backups/new")
        #expect(try db.lastBackupTakenAt() == Self.now - Self.hour)
        #expect(try Self.migrate(location, within: 24 * Self.hour) == SchemaMigration(before: 10, after: LedgerStore.schemaVersion))
        #expect(try Self.database(location).lastBackupTakenAt() == Self.now - Self.hour)
        // Again: nothing to run, nothing asked.
        #expect(try Self.migrate(location, within: 1) == SchemaMigration(before: LedgerStore.schemaVersion, after: LedgerStore.schemaVersion))
        #expect(try Self.database(location).query("SELECT COUNT(*) FROM orders").first?[0].integer == 1, "the order is kept")
    }

    @Test func withoutTheCheckAStoreWithNoBackupIsMigrated() async throws {
        let location = try await Self.storeAtVersion10()
        #expect(try Self.migrate(location, within: nil) == SchemaMigration(before: 10, after: LedgerStore.schemaVersion))
    }

    /// A new store has nothing to lose: the first migration asks for no backup.
    @Test func anEmptyStoreNeedsNoBackup() throws {
        let location = TestStores.location()
        #expect(try Self.migrate(location, within: Self.hour) == SchemaMigration(before: 0, after: LedgerStore.schemaVersion))
    }

    @Test func aLedgerLeavingMigrationsToTheJobOpensOnlyAStoreAtItsSchema() async throws {
        let location = try await Self.storeAtVersion10()
        #expect(try LedgerStore.schemaVersion(of: TestStores.settings(location), logger: .init(label: "test")) == 10)
        #expect {
            try LedgerStore(TestStores.settings(location), opening: .atSchema)
        } throws: { error in
            "\(error)".contains("schema is version 10; this paypipe needs \(LedgerStore.schemaVersion) and store.migrations is job")
        }
        _ = try Self.migrate(location, within: nil)
        let store = try LedgerStore(TestStores.settings(location), opening: .atSchema)
        #expect(try store.storedSchemaVersion() == LedgerStore.schemaVersion)
    }
}

import Logging
import PaypipeCore
import TestSupport
import Testing

@testable import LedgerStage

/// A PostgreSQL connection lost and opened again, as a server restart or a failover makes the
/// ledger do: what each new connection needs (its session settings, a new epoch) is set up
/// again at the next try when the first try at it fails, never skipped.
@Suite("The store sets up every new connection whole", .serialized, .enabled(if: TestStores.postgres != nil))
struct StoreReconnectTests {
    /// Loses `db`'s connection, as a server restart or a failover does; the next try opens one.
    static func loseConnection(of db: any StoreDatabase) throws {
        try #require(db as? PostgresDatabase).abandonConnection()
    }

    /// Tries `body`, a few times, until it fails with a lock timeout.
    static func failsOnALock(_ body: () throws -> Void) -> Bool {
        for _ in 0..<3 {
            do {
                try body()
            } catch {
                if "\(error)".contains("55P03") { return true }
            }
        }
        return false
    }

    /// A database of the test's own (`TestStores.privateDatabase`), dropped by `body`'s end.
    static func withPrivateDatabase(_ body: (PostgresSettings) throws -> Void) throws {
        let (settings, drop) = try TestStores.privateDatabase()
        defer { drop() }
        try body(settings)
    }

    @Test func aConnectionWhoseSetUpFailedIsOpenedAgainNotUsedHalfSetUp() throws {
        try Self.withPrivateDatabase(Self.setUpFailsOnce)
    }

    static func setUpFailsOnce(_ settings: PostgresSettings) throws {
        let db = try PostgresDatabase(settings: settings, logger: Logger(label: "test"))
        let other = try PostgresDatabase(settings: settings, logger: Logger(label: "test"))
        // Held, a new connection cannot create its schema (under this lock) within its lock timeout.
        try other.execute("SELECT pg_advisory_lock(7027566457)")
        try Self.loseConnection(of: db)
        #expect(Self.failsOnALock { _ = try db.connectIfNeeded() })
        try other.execute("SELECT pg_advisory_unlock(7027566457)")
        var schema: String?
        for _ in 0..<2 where schema == nil {
            schema = try? db.transaction { try db.query("SELECT current_schema()", []).first?[0].text }
        }
        #expect(schema == settings.schema)
    }

    @Test func aNewConnectionWhoseEpochCouldNotBeOpenedOpensItAtTheNextTransaction() throws {
        let location = TestStores.location()
        let store = try TestStores.open(location)
        let first = store.epoch
        guard case .postgres(let settings) = TestStores.settings(location) else { return }
        let other = try PostgresDatabase(settings: settings, logger: Logger(label: "test"))
        try other.execute("BEGIN; LOCK TABLE epochs IN ACCESS EXCLUSIVE MODE")
        try Self.loseConnection(of: store.db)
        #expect(Self.failsOnALock { try store.transaction {} })
        try other.execute("ROLLBACK")
        try store.transaction {}
        #expect(store.epoch != first, "the new connection goes on in a new epoch")
        #expect(try store.db.query("SELECT COUNT(*) FROM epochs", []).first?[0].integer == 2)
    }
}

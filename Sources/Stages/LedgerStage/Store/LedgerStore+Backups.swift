import Logging
import PaypipeCore

/// A migration changes the store in place and cannot be undone, so `paypipe-ledger migrate`
/// first asks for a recent backup: the store records each one (`recordBackup`), and on
/// PostgreSQL a WAL archive that keeps up counts as a continuous one.
extension StoreDatabase {
    /// Schema step 11, also run by `recordBackup` so that a backup taken before the step (the
    /// one the step's migration asks for) is recorded.
    func createStoreBackups() throws {
        let integer = dialect == .postgres ? "BIGINT" : "INTEGER"
        try execute("CREATE TABLE IF NOT EXISTS store_backups(taken_at_ms \(integer) NOT NULL, kind TEXT NOT NULL, location TEXT NOT NULL)")
    }

    /// Records a backup of this store: when its copy was taken (ms since the Unix epoch, the
    /// copy's own time rather than when it finished), a word for how (`sqlite-file`,
    /// `pg_dump`, …) and where it went. Neither may hold a secret: both are read back in plain.
    package func recordBackup(takenAt: Int64, kind: String, location: String) throws {
        try transaction {
            try takeStoreLock()
            try createStoreBackups()
            try query(
                "INSERT INTO store_backups(taken_at_ms, kind, location) VALUES(?,?,?)", [.integer(takenAt), .text(kind), .text(location)])
        }
    }

    /// When the newest backup was taken (ms since the Unix epoch): the newest recorded one or,
    /// on PostgreSQL, the last WAL segment archived, while archiving is on and has not failed
    /// since; nil when there is neither.
    package func lastBackupTakenAt() throws -> Int64? {
        var newest = try hasTable("store_backups") ? query("SELECT MAX(taken_at_ms) FROM store_backups").first?[0].integer : nil
        if dialect == .postgres,
            let archived = try query(
                """
                SELECT CAST(EXTRACT(EPOCH FROM last_archived_time) * 1000 AS BIGINT) FROM pg_stat_archiver
                WHERE current_setting('archive_mode') <> 'off' AND last_archived_time IS NOT NULL
                  AND (last_failed_time IS NULL OR last_failed_time <= last_archived_time)
                """
            ).first?[0].integer
        {
            newest = max(newest ?? archived, archived)
        }
        return newest
    }
}

/// `paypipe-ledger migrate` refused: the store has steps to run and no backup recent enough.
package struct MigrationNeedsBackup: Error, CustomStringConvertible {
    /// EX_NOPERM (sysexits.h): not done, and running it again changes nothing until a backup
    /// is taken or the check is waived.
    package static let exitStatus: Int32 = 77
    /// The newest backup's age; nil when none is recorded.
    package let ageMilliseconds: Int64?
    package let limitMilliseconds: Int64

    package var description: String {
        let found =
            ageMilliseconds.map { "the newest backup of the store was taken \(Self.words($0)) ago" }
            ?? "no backup of the store is recorded (`paypipe store backup` records one; on PostgreSQL a working WAL archive counts)"
        return
            "store: \(found), and a migration needs one taken within \(Self.words(limitMilliseconds)) (store.maxBackupAgeMinutes, or --max-backup-age): take a backup first, or run again with --without-backup"
    }

    /// A span as days, hours and minutes, as an operator reads it.
    static func words(_ milliseconds: Int64) -> String {
        let minutes = max(milliseconds, 0) / 60_000
        let (days, hours, rest) = (minutes / 1440, minutes % 1440 / 60, minutes % 60)
        let parts = [(days, "d"), (hours, "h"), (rest, "m")].filter { $0.0 > 0 }.map { "\($0.0)\($0.1)" }
        return parts.isEmpty ? "under 1m" : parts.joined(separator: " ")
    }
}

/// What `paypipe-ledger migrate` found and left: the schema versions before and after.
package struct SchemaMigration: Sendable, Equatable {
    package let before: Int
    package let after: Int
}

extension LedgerStore {
    /// `paypipe-ledger migrate`: brings the store `settings` name to this release's schema, under
    /// the lock ledgers take turns with. With `maxBackupAgeMilliseconds`, a store with steps to
    /// run and data to lose (it has orders' table) is changed only if its newest backup is that
    /// recent (`MigrationNeedsBackup`); a store already at the schema is not checked.
    package static func migrate(
        _ settings: StoreSettings, maxBackupAgeMilliseconds: Int64?, now: Int64 = Timestamp.nowMilliseconds(), logger: Logger
    ) throws -> SchemaMigration {
        let store = try LedgerStore(settings, opening: .forMigration, logger: logger)
        let before = try store.db.recordedSchemaVersion()
        try refuseNewer(before)
        if before < schemaVersion, let limit = maxBackupAgeMilliseconds, try store.db.hasTable("orders") {
            let age = try store.db.lastBackupTakenAt().map { now - $0 }
            if age.map({ $0 > limit }) ?? true { throw MigrationNeedsBackup(ageMilliseconds: age, limitMilliseconds: limit) }
        }
        try store.migrate()
        return SchemaMigration(before: before, after: try store.storedSchemaVersion())
    }
}

import CSQLite
import PaypipeCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What a copy of a SQLite store holds, read back from the copy itself.
package struct SQLiteStoreCopy: Sendable {
    package let path: String
    package let bytes: Int64
    package let schemaVersion: Int
    /// The last epoch the copy knows, and the highest seq it logged in it.
    package let epoch: String?
    package let epochLastSeq: Int64
    /// The highest seq the copy's outcome log handed out.
    package let lastSeq: Int64

    package var description: String {
        "\(path): \(bytes) bytes, schema version \(schemaVersion), epoch \(epoch ?? "none") to seq \(epochLastSeq), last seq \(lastSeq)"
    }
}

/// Online copies of a SQLite store and their restore (`paypipe store backup` and `restore`).
///
/// The copy is made with SQLite's backup API from a read-only connection that holds one read
/// transaction for the whole copy: in WAL mode that snapshot never blocks the ledger's writes,
/// and since it does not move, the copy is one committed state of the store and never restarts
/// however busy the ledger is. Pages go over in small steps, so that the copy takes a share of
/// the disk rather than all of it.
package enum SQLiteBackup {
    /// Pages copied per step of the backup API.
    static let pagesPerStep: Int32 = 256

    /// Copies the store at `storePath` (which a ledger may be writing) to `destination`: into
    /// a file beside it first, checked, then renamed into place, readable by its owner only. The
    /// store then records it (`recordBackup`), for `paypipe-ledger migrate`'s backup-age check.
    package static func backup(storePath: String, to destination: String) throws(StoreError) -> SQLiteStoreCopy {
        guard access(storePath, F_OK) == 0 else { throw StoreError(message: "\(storePath): no such store") }
        _ = try inspect(storePath, at: "the store")
        // Before the copy's read begins: the copy holds at least what the store held then.
        let takenAt = Timestamp.nowMilliseconds()
        let copied = try copy(from: storePath, to: destination)
        // A ledger writing without pause can hold the store's lock past one busy timeout (each
        // try waits that long): the record, one small write, is tried again a bounded number of times.
        var failure: (any Error)?
        for _ in 0..<Self.recordTries {
            do {
                try SQLiteConnection(path: storePath).recordBackup(takenAt: takenAt, kind: "paypipe store backup", location: copied.path)
                return copied
            } catch {
                failure = error
            }
        }
        throw StoreError(
            message:
                "the copy \(copied.path) is complete, but the store could not record it for paypipe-ledger migrate's backup-age check: \(failure.map { "\($0)" } ?? "")"
        )
    }

    /// How many times a copy's record is tried while the ledger holds the store's lock.
    static let recordTries = 10

    /// Puts the copy at `copyPath` in place of the store at `storePath`, which no ledger may
    /// have open. The store it replaces (with its `-wal` and `-shm` files) is renamed beside it,
    /// never deleted; its new name is returned (nil when there was no store).
    package static func restore(
        storePath: String, from copyPath: String, now: Int64
    ) throws(StoreError) -> (
        restored: SQLiteStoreCopy, keptAt: String?
    ) {
        let copied = try inspect(copyPath, at: "the copy")
        guard copied.schemaVersion <= LedgerStore.schemaVersion else {
            throw StoreError(
                message:
                    "\(copyPath) is a store of schema version \(copied.schemaVersion), newer than this paypipe knows (\(LedgerStore.schemaVersion)): restore it with the paypipe release that wrote it, or a later one"
            )
        }
        let exists = access(storePath, F_OK) == 0
        // Held until the copy is in place, so that no ledger opens the store meanwhile.
        let lock: StoreWriterLock?
        do {
            lock = exists ? try StoreWriterLock(storePath: storePath) : nil
        } catch {
            throw StoreError(message: "\(storePath) is open in a ledger: stop the ledger before restoring its store")
        }
        defer { withExtendedLifetime(lock) {} }
        let incoming = storePath + ".restoring-\(getpid())"
        let restored = try copy(from: copyPath, to: incoming)
        var keptAt: String?
        if exists {
            let aside = storePath + ".replaced-" + Timestamp.iso8601(milliseconds: now).prefix(19).filter { $0.isNumber || $0 == "T" } + "Z"
            for suffix in ["", "-wal", "-shm"] where access(storePath + suffix, F_OK) == 0 {
                guard rename(storePath + suffix, aside + suffix) == 0 else {
                    let reason = String(cString: strerror(errno))
                    unlink(incoming)
                    throw StoreError(message: "rename \(storePath + suffix) to \(aside + suffix): \(reason)")
                }
            }
            keptAt = aside
        }
        guard rename(incoming, storePath) == 0 else {
            let reason = String(cString: strerror(errno))
            throw StoreError(message: "rename \(incoming) to \(storePath): \(reason); the copy is at \(incoming)")
        }
        try syncDirectory(of: storePath)
        return (
            SQLiteStoreCopy(
                path: storePath, bytes: restored.bytes, schemaVersion: restored.schemaVersion, epoch: restored.epoch,
                epochLastSeq: restored.epochLastSeq, lastSeq: restored.lastSeq),
            keptAt
        )
    }

    /// Copies `source` to `destination` through a file beside it, checks the file and renames it.
    private static func copy(from source: String, to destination: String) throws(StoreError) -> SQLiteStoreCopy {
        let partial = destination + ".partial-\(getpid())"
        unlink(partial)
        let fd = open(partial, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw StoreError(message: "create \(partial): \(String(cString: strerror(errno)))") }
        close(fd)
        do throws(StoreError) {
            try copyPages(from: source, to: partial)
            let copied = try inspect(partial, at: "the copy")
            try syncFile(partial)
            guard rename(partial, destination) == 0 else {
                throw StoreError(message: "rename \(partial) to \(destination): \(String(cString: strerror(errno)))")
            }
            try syncDirectory(of: destination)
            return SQLiteStoreCopy(
                path: destination, bytes: copied.bytes, schemaVersion: copied.schemaVersion, epoch: copied.epoch,
                epochLastSeq: copied.epochLastSeq, lastSeq: copied.lastSeq)
        } catch {
            unlink(partial)
            throw error
        }
    }

    private static func copyPages(from source: String, to destination: String) throws(StoreError) {
        let from = try Handle(path: source, readOnly: true)
        let to = try Handle(path: destination, readOnly: false)
        // One snapshot for the whole copy (see the type's comment).
        try from.execute("BEGIN")
        try from.execute("SELECT COUNT(*) FROM sqlite_master")
        defer { try? from.execute("COMMIT") }
        guard let backup = sqlite3_backup_init(to.db, "main", from.db, "main") else {
            throw StoreError(message: "backup of \(source): \(to.lastError)")
        }
        var result: Int32
        repeat {
            result = sqlite3_backup_step(backup, pagesPerStep)
            if result == SQLITE_BUSY || result == SQLITE_LOCKED { usleep(10_000) }
        } while result == SQLITE_OK || result == SQLITE_BUSY || result == SQLITE_LOCKED
        sqlite3_backup_finish(backup)
        guard result == SQLITE_DONE else { throw StoreError(message: "backup of \(source): \(String(cString: sqlite3_errstr(result)))") }
        // A file of its own: no `-wal` beside it to lose. The ledger puts its store in WAL mode
        // again when it opens it.
        try to.execute("PRAGMA journal_mode=DELETE")
    }

    /// Reads what the file at `path` holds, after SQLite's integrity check; throws unless it is
    /// an intact paypipe store. `name` says which file in a refusal.
    package static func inspect(_ path: String, at name: String) throws(StoreError) -> SQLiteStoreCopy {
        let handle = try Handle(path: path, readOnly: true)
        let check = (try? handle.rows("PRAGMA integrity_check").map { $0.first ?? nil }) ?? ["not a database"]
        guard check == ["ok"] else {
            throw StoreError(
                message: "\(name) (\(path)) fails SQLite's integrity check: \(check.compactMap { $0 }.prefix(3).joined(separator: "; "))")
        }
        let tables = Set(try handle.rows("SELECT name FROM sqlite_master WHERE type='table'").compactMap { $0.first ?? nil })
        guard ["meta", "orders", "outcome_log"].allSatisfy(tables.contains),
            let version = try handle.rows("SELECT value FROM meta WHERE name='schema_version'").first?.first?.flatMap({ Int($0) })
        else {
            throw StoreError(message: "\(name) (\(path)) is not a paypipe store: it has no orders, outcome log or schema version")
        }
        var epoch: String?
        var epochLastSeq: Int64 = 0
        if tables.contains("epochs") {
            let last = try handle.rows("SELECT epoch, COALESCE(last_seq, opened_after) FROM epochs ORDER BY number DESC LIMIT 1").first
            epoch = last?[0]
            epochLastSeq = last?[1].flatMap { Int64($0) } ?? 0
        }
        let lastSeq = try handle.rows("SELECT seq FROM sqlite_sequence WHERE name='outcome_log'").first?.first.flatMap { $0 }.flatMap { Int64($0) }
        var status = stat()
        guard stat(path, &status) == 0 else { throw StoreError(message: "stat \(path): \(String(cString: strerror(errno)))") }
        return SQLiteStoreCopy(
            path: path, bytes: Int64(status.st_size), schemaVersion: version, epoch: epoch, epochLastSeq: epochLastSeq,
            lastSeq: lastSeq ?? 0)
    }

    private static func syncFile(_ path: String) throws(StoreError) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0, fsync(fd) == 0 else {
            let reason = String(cString: strerror(errno))
            if fd >= 0 { close(fd) }
            throw StoreError(message: "fsync \(path): \(reason)")
        }
        close(fd)
    }

    /// A rename is durable once its directory is synced.
    private static func syncDirectory(of path: String) throws(StoreError) {
        let directory = path.contains("/") ? String(path[..<path.lastIndex(of: "/")!]) : "."
        try syncFile(directory.isEmpty ? "/" : directory)
    }

    /// A connection of its own to one file, with the default VFS, closed when released.
    private final class Handle {
        let db: OpaquePointer

        init(path: String, readOnly: Bool) throws(StoreError) {
            var db: OpaquePointer?
            let flags = (readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE) | SQLITE_OPEN_NOMUTEX
            guard sqlite3_open_v2(path, &db, flags, nil) == SQLITE_OK, let db else {
                let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open"
                sqlite3_close(db)
                throw StoreError(message: "open \(path): \(message)")
            }
            sqlite3_busy_timeout(db, 2000)
            self.db = db
        }

        deinit { sqlite3_close(db) }

        var lastError: String { String(cString: sqlite3_errmsg(db)) }

        func execute(_ sql: String) throws(StoreError) {
            _ = try rows(sql)
        }

        /// Every row of `sql`, each column as text (nil for NULL).
        func rows(_ sql: String) throws(StoreError) -> [[String?]] {
            var statement: OpaquePointer?
            guard sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK, let statement else {
                throw StoreError(message: lastError)
            }
            defer { sqlite3_finalize(statement) }
            var rows: [[String?]] = []
            while true {
                let result = sqlite3_step(statement)
                if result == SQLITE_DONE { return rows }
                guard result == SQLITE_ROW else { throw StoreError(message: lastError) }
                rows.append(
                    (0..<sqlite3_column_count(statement)).map { column in
                        sqlite3_column_text(statement, column).map { String(cString: $0) }
                    })
            }
        }
    }
}

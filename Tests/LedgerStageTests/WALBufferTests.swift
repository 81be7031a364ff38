import CSQLite
import Foundation
import SQLiteWALBuffer
import TestSupport
import Testing

@testable import LedgerStage

/// The ledger's VFS (`wal_buffer.c`) through real SQLite files: a commit's WAL frames reach the
/// file in a few writes, before the commit returns, and nothing is lost or reordered on the way.
@Suite("The WAL buffer under the ledger's store")
struct WALBufferTests {
    /// A connection like the ledger's (WAL, `synchronous=FULL`), through the buffer, or through
    /// SQLite's default VFS when `vfs` is nil.
    final class Connection {
        let db: OpaquePointer

        init(_ path: String, vfs: String?) throws {
            #expect(sqlite_wal_buffer_register() == SQLITE_OK)
            var db: OpaquePointer?
            guard sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, vfs) == SQLITE_OK, let db else {
                throw HarnessError("cannot open \(path)")
            }
            self.db = db
            sqlite3_busy_timeout(db, 5000)
            try execute("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL")
        }

        deinit { sqlite3_close(db) }

        func execute(_ sql: String) throws {
            guard sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK else {
                throw HarnessError("\(sql.prefix(60)): \(String(cString: sqlite3_errmsg(db)))")
            }
        }

        func integer(_ sql: String) throws -> Int64 {
            var statement: OpaquePointer?
            guard sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK else { throw HarnessError(String(cString: sqlite3_errmsg(db))) }
            defer { sqlite3_finalize(statement) }
            guard sqlite3_step(statement) == SQLITE_ROW else { throw HarnessError(String(cString: sqlite3_errmsg(db))) }
            return sqlite3_column_int64(statement, 0)
        }

        var walWrites: Int64 { sqlite_wal_buffer_writes(db) }
    }

    static func freshPath() throws -> String {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("paypipe-wal-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return directory.appendingPathComponent("store.sqlite").path
    }

    /// `rows` rows of `bytes` random bytes each, as hex, in one transaction.
    static func insert(_ c: Connection, rows: Int, bytes: Int) throws {
        try c.execute(
            """
            BEGIN IMMEDIATE;
            INSERT INTO t(b) SELECT hex(randomblob(\(bytes))) FROM
              (WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < \(rows)) SELECT x FROM n);
            COMMIT
            """)
    }

    @Test func aCommitsFramesReachTheFileInAFewWritesAndAnotherConnectionSeesThemAtOnce() throws {
        let path = try Self.freshPath()
        let writer = try Connection(path, vfs: SQLITE_WAL_BUFFER_VFS)
        try writer.execute("CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT NOT NULL)")
        let reader = try Connection(path, vfs: nil)
        var expectedRows: Int64 = 0
        for _ in 0..<5 {
            let before = writer.walWrites
            // 40 rows of 1,200 hex characters: some 12 pages, 24 writes without the buffer.
            try Self.insert(writer, rows: 40, bytes: 600)
            expectedRows += 40
            #expect(writer.walWrites - before <= 2)
            #expect(try reader.integer("SELECT COUNT(*) FROM t") == expectedRows)
            #expect(try reader.integer("SELECT SUM(LENGTH(b)) FROM t") == expectedRows * 1200)
        }
        #expect(reader.walWrites == -1)
    }

    /// A transaction larger than the buffer (and than the 128 KiB the unix VFS writes per
    /// call) reaches the file whole, in order.
    @Test func aTransactionLargerThanTheBufferIsWrittenWhole() throws {
        let path = try Self.freshPath()
        let writer = try Connection(path, vfs: SQLITE_WAL_BUFFER_VFS)
        try writer.execute("CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT NOT NULL)")
        let before = writer.walWrites
        try Self.insert(writer, rows: 1000, bytes: 1000)
        let writes = writer.walWrites - before
        // About 2 MB of frames: at least 17 writes of at most 120 KiB, far fewer than one per page.
        #expect(writes >= 17 && writes <= 40)
        let reader = try Connection(path, vfs: nil)
        #expect(try reader.integer("SELECT COUNT(*) FROM t") == 1000)
        #expect(try reader.integer("SELECT SUM(LENGTH(b)) FROM t") == 2_000_000)
        var statement: OpaquePointer?
        sqlite3_prepare_v2(reader.db, "PRAGMA integrity_check", -1, &statement, nil)
        defer { sqlite3_finalize(statement) }
        #expect(sqlite3_step(statement) == SQLITE_ROW)
        #expect(String(cString: sqlite3_column_text(statement, 0)) == "ok")
    }

    /// A rolled-back transaction leaves nothing behind, and the next one commits.
    @Test func aRollbackLeavesNothingAndTheNextCommitLands() throws {
        let path = try Self.freshPath()
        let writer = try Connection(path, vfs: SQLITE_WAL_BUFFER_VFS)
        // A small page cache, so the transaction spills frames into the WAL before it ends.
        try writer.execute("PRAGMA cache_size=16; CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT NOT NULL)")
        try Self.insert(writer, rows: 10, bytes: 100)
        try writer.execute(
            """
            BEGIN IMMEDIATE;
            INSERT INTO t(b) SELECT hex(randomblob(2000)) FROM
              (WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 300) SELECT x FROM n);
            """)
        #expect(try writer.integer("SELECT COUNT(*) FROM t") == 310)
        try writer.execute("ROLLBACK")
        #expect(try writer.integer("SELECT COUNT(*) FROM t") == 10)
        try Self.insert(writer, rows: 5, bytes: 100)
        let reader = try Connection(path, vfs: nil)
        #expect(try reader.integer("SELECT COUNT(*) FROM t") == 15)
        #expect(try reader.integer("SELECT SUM(LENGTH(b)) FROM t") == 15 * 200)
    }
}

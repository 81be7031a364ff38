import CSQLite
import SQLiteWALBuffer

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A minimal SQLite connection: only what the ledger store needs. Not thread-safe: owned by
/// one actor.
package final class SQLiteConnection: StoreDatabase {
    package let dialect = StoreDialect.sqlite

    private var db: OpaquePointer?
    /// Prepared statements by their SQL literal's address, so a query does not hash and compare
    /// its SQL text on every call.
    private var statements: [UnsafeRawPointer: OpaquePointer] = [:]

    /// `readOnly`: a connection beside the ledger's that only reads a store the ledger has open
    /// (its WAL lets it read while the ledger writes); it writes nothing, not even the file's mode.
    package init(path: String, readOnly: Bool = false) throws(StoreError) {
        let flags = (readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) | SQLITE_OPEN_NOMUTEX
        if !readOnly { try Self.keepPrivate(path) }
        guard sqlite_wal_buffer_register() == SQLITE_OK else { throw StoreError(message: "open \(path): cannot register the WAL buffer") }
        // The WAL buffer only gathers writes.
        if sqlite3_open_v2(path, &db, flags, readOnly ? nil : SQLITE_WAL_BUFFER_VFS) != SQLITE_OK {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open"
            sqlite3_close(db)
            throw StoreError(message: "open \(path): \(message)")
        }
        // Short: the ledger retries a failed transaction after a pause (StoreRetry), which keeps
        // the whole wait for a store locked from outside bounded.
        sqlite3_busy_timeout(db, 2000)
    }

    /// The store holds every order and outcome: it is created readable by its owner only, and an
    /// existing one readable by others is made so. SQLite gives its WAL and shared-memory files
    /// the database file's mode.
    static func keepPrivate(_ path: String) throws(StoreError) {
        guard !path.isEmpty, path != ":memory:", !path.hasPrefix("file:") else { return }
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw StoreError(message: "open \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var status = stat()
        guard fstat(fd, &status) == 0 else { throw StoreError(message: "stat \(path): \(String(cString: strerror(errno)))") }
        if status.st_mode & 0o077 != 0, fchmod(fd, 0o600) != 0 {
            throw StoreError(message: "chmod \(path) to 0600: \(String(cString: strerror(errno)))")
        }
        for suffix in ["-wal", "-shm"] { _ = chmod(path + suffix, 0o600) }
    }

    deinit {
        for statement in statements.values { sqlite3_finalize(statement) }
        sqlite3_close(db)
        textBindings.deallocate()
    }

    /// Local: one connection for the store's life.
    package func connectIfNeeded() throws(StoreError) -> Bool { false }

    package func execute(_ sql: String) throws(StoreError) {
        var error: UnsafeMutablePointer<CChar>?
        if sqlite3_exec(db, sql, nil, nil, &error) != SQLITE_OK {
            let message = error.map { String(cString: $0) } ?? "error"
            sqlite3_free(error)
            throw StoreError(message: message)
        }
    }

    /// Runs a cached prepared statement with text/integer bindings, returning its rows.
    @discardableResult
    package func query(_ sql: StaticString, _ bindings: [StoreValue]) throws(StoreError) -> [[StoreValue]] {
        let statement = try prepared(sql)
        defer {
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
        }
        bind(bindings, to: statement)
        var rows: [[StoreValue]] = []
        while true {
            let result = sqlite3_step(statement)
            if result == SQLITE_DONE { break }
            guard result == SQLITE_ROW else { throw StoreError(message: String(cString: sqlite3_errmsg(db))) }
            var row: [StoreValue] = []
            for column in 0..<sqlite3_column_count(statement) {
                switch sqlite3_column_type(statement, column) {
                case SQLITE_INTEGER: row.append(.integer(sqlite3_column_int64(statement, column)))
                case SQLITE_NULL: row.append(.null)
                default:
                    // By byte count, not up to the first NUL.
                    let count = Int(sqlite3_column_bytes(statement, column))
                    let text = sqlite3_column_text(statement, column).map {
                        String(decoding: UnsafeBufferPointer(start: $0, count: count), as: UTF8.self)
                    }
                    row.append(.text(text ?? ""))
                }
            }
            rows.append(row)
        }
        return rows
    }

    /// Text bindings are copied here and bound where they lie (SQLITE_STATIC): bound as
    /// SQLITE_TRANSIENT, SQLite would make a copy of its own, and free it when the bindings are
    /// cleared, for every text of every statement. The statement's bindings are cleared
    /// before the next query overwrites this buffer.
    private var textBindings = UnsafeMutableRawBufferPointer.allocate(byteCount: 4096, alignment: 1)

    private func bind(_ bindings: [StoreValue], to statement: OpaquePointer) {
        var total = 0
        for case .text(let s) in bindings { total += s.utf8.count }
        if total > textBindings.count {
            textBindings.deallocate()
            textBindings = .allocate(byteCount: max(total, 2 * textBindings.count), alignment: 1)
        }
        var offset = 0
        for (index, value) in bindings.enumerated() {
            let position = Int32(index + 1)
            switch value {
            case .null, .texts, .integers: sqlite3_bind_null(statement, position)
            case .integer(let i): sqlite3_bind_int64(statement, position, i)
            case .text(var s):
                // With its byte length: -1 would end the text at an embedded NUL; and never a nil
                // pointer, which would bind NULL, so an empty text points into the buffer too.
                let count = s.withUTF8 { utf8 in
                    UnsafeMutableRawBufferPointer(rebasing: textBindings[offset...]).copyMemory(from: UnsafeRawBufferPointer(utf8))
                    return utf8.count
                }
                let start = textBindings.baseAddress!.advanced(by: offset).assumingMemoryBound(to: CChar.self)
                sqlite3_bind_text(statement, position, start, Int32(count), SQLITE_STATIC_PTR)
                offset += count
            }
        }
    }

    @discardableResult
    package func write(_ sql: StaticString, _ bindings: [StoreValue]) throws(StoreError) -> Int {
        try query(sql, bindings)
        return Int(sqlite3_changes(db))
    }

    /// EXPLAIN QUERY PLAN's lines for `sql` ("SEARCH orders USING INDEX ...").
    func queryPlan(_ sql: StaticString) throws(StoreError) -> [String] {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(db, "EXPLAIN QUERY PLAN \(sql)", -1, &statement, nil) == SQLITE_OK, let statement else {
            throw StoreError(message: String(cString: sqlite3_errmsg(db)))
        }
        defer { sqlite3_finalize(statement) }
        var lines: [String] = []
        while sqlite3_step(statement) == SQLITE_ROW {
            if let detail = sqlite3_column_text(statement, 3) { lines.append(String(cString: detail)) }
        }
        return lines
    }

    private func prepared(_ sql: StaticString) throws(StoreError) -> OpaquePointer {
        precondition(sql.hasPointerRepresentation, "SQL is a string literal")
        let key = UnsafeRawPointer(sql.utf8Start)
        if let statement = statements[key] { return statement }
        var statement: OpaquePointer?
        let prepared = sql.utf8Start.withMemoryRebound(to: CChar.self, capacity: sql.utf8CodeUnitCount) {
            sqlite3_prepare_v2(db, $0, Int32(sql.utf8CodeUnitCount), &statement, nil)
        }
        guard prepared == SQLITE_OK, let statement else {
            throw StoreError(message: String(cString: sqlite3_errmsg(db)))
        }
        statements[key] = statement
        return statement
    }

    package func transaction<T>(_ body: () throws -> T) throws -> T {
        try execute("BEGIN IMMEDIATE")
        do {
            let value = try body()
            try execute("COMMIT")
            return value
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }
}

// SQLITE_STATIC is a macro casting 0 to a destructor pointer; Swift cannot import it.
let SQLITE_STATIC_PTR: sqlite3_destructor_type? = nil

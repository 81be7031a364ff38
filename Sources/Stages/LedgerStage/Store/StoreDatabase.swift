/// The database under the ledger's store: SQLite on the ledger's own disk, or PostgreSQL.
///
/// `LedgerStore` writes each statement once for both, in the SQL they share: `?` placeholders,
/// `ON CONFLICT DO NOTHING`, `IS [NOT] DISTINCT FROM`, `CASE` rather than the scalar `MIN`/`MAX`.
/// SQLite's `INDEXED BY` hints stay in the text, and PostgreSQL's side drops them; what
/// the two keep differently (the log's seq counter, the schema) is chosen by `dialect`.
///
/// Not `Sendable`, like the store: one owner at a time.
package protocol StoreDatabase: AnyObject {
    var dialect: StoreDialect { get }

    /// Runs one statement with its bindings and returns its rows.
    @discardableResult
    func query(_ sql: StaticString, _ bindings: [StoreValue]) throws -> [[StoreValue]]

    /// Runs one statement that returns no rows, and returns how many rows it inserted,
    /// changed or deleted.
    @discardableResult
    func write(_ sql: StaticString, _ bindings: [StoreValue]) throws -> Int

    /// Runs a script of statements without bindings (schema changes).
    func execute(_ sql: String) throws

    /// `body` in one transaction: committed when it returns, rolled back when it throws.
    func transaction<T>(_ body: () throws -> T) throws -> T

    /// Opens a connection when the last one was lost; true when it did. What the store keeps in
    /// memory about the database (the running counts, the epoch) has to be read anew then: the
    /// database may have been restored or replaced while no connection was open.
    func connectIfNeeded() throws -> Bool
}

extension StoreDatabase {
    @discardableResult
    func query(_ sql: StaticString) throws -> [[StoreValue]] { try query(sql, []) }
}

package enum StoreDialect: String, Sendable {
    case sqlite
    case postgres
}

/// A value bound to a statement or read from a row: the ledger stores only text and integers.
package enum StoreValue: Equatable {
    case null
    case integer(Int64)
    case text(String)
    /// Arrays, bound only to PostgreSQL's set-wise statements (`unnest`).
    case texts([String])
    case integers([Int64])

    var text: String? { if case .text(let s) = self { s } else { nil } }
    var integer: Int64? { if case .integer(let i) = self { i } else { nil } }
}

/// A failure of the store's database, with the database's own message (never a bound value).
package struct StoreError: Error, CustomStringConvertible {
    let message: String
    package var description: String { "store: \(message)" }
}

import Logging
import PaypipeCore
import Synchronization

/// The store's reads that need no transaction and nothing the ledger's writer keeps in memory:
/// the same statements serve the ledger's own connection (`LedgerStore`) and the connection
/// operators' reads and upstream's replay have to themselves (`StoreReader`).
package protocol StoreReads: AnyObject {
    var db: any StoreDatabase { get }

    /// `body`'s statements outside a transaction, on a connection opened again if the last one
    /// was lost.
    func read<T>(_ body: () throws -> T) throws -> T
}

/// A connection of its own to the ledger's store, that only reads: operators' reads and
/// upstream's replay go through it, off the ledger's loop and never under the ledger's store
/// lock, so that a long read holds up no payment. SQLite's WAL lets it read while the ledger
/// writes; on PostgreSQL it is a session of its own, read-only.
///
/// Not `Sendable`, like the store: one owner at a time (`LedgerService.Reads`, behind a lock of
/// its own).
package final class StoreReader: StoreReads {
    package let db: any StoreDatabase

    /// The store `settings` name, which a ledger has opened (and so migrated) already.
    package init(_ settings: StoreSettings, logger: Logger = Logger(label: "paypipe-ledger.reads")) throws {
        switch settings {
        case .sqlite(let path): db = try SQLiteConnection(path: path, readOnly: true)
        case .postgres(let postgres): db = try PostgresDatabase(settings: postgres, logger: logger, readOnly: true)
        }
    }

    package func read<T>(_ body: () throws -> T) throws -> T {
        _ = try db.connectIfNeeded()
        return try body()
    }
}

/// The epoch the ledger's store is in, for the threads that answer replay without the store.
package final class CurrentEpoch: Sendable {
    private let value = Mutex("")

    package var epoch: String {
        get { value.withLock { $0 } }
        set { value.withLock { $0 = newValue } }
    }
}

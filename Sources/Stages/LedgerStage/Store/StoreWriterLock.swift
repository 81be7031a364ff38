#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One ledger at a time per SQLite file: two would hand out the same seqs and grant two claims
/// on one order. An exclusive `flock` on the file, held while the store is open and released by
/// the kernel however the process ends, so a ledger killed with -9 leaves no stale lock.
final class StoreWriterLock {
    private let descriptor: Int32

    init(storePath path: String) throws(StoreError) {
        guard !path.isEmpty, path != ":memory:", !path.hasPrefix("file:") else {
            descriptor = -1
            return
        }
        try SQLiteConnection.keepPrivate(path)
        let fd = open(path, O_RDWR | O_CLOEXEC)
        guard fd >= 0 else { throw StoreError(message: "open \(path): \(String(cString: strerror(errno)))") }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let reason = errno == EWOULDBLOCK ? "" : ": \(String(cString: strerror(errno)))"
            close(fd)
            throw StoreError(
                message:
                    "\(path) is open in another ledger\(reason): a SQLite store has one ledger; for several ledgers use a PostgreSQL store (docs/configuration.md)"
            )
        }
        descriptor = fd
    }

    deinit {
        if descriptor >= 0 { close(descriptor) }
    }
}

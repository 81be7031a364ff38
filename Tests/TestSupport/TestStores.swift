import Foundation

/// Where the tests' ledger stores go: one directory per test process, removed when the process
/// exits. A process that died before its exit handler ran leaves its directory behind; the next
/// run removes it (its pid is gone). So the stores of dead runs do not pile up in the temporary
/// directory.
package enum TestStores {
    private static let prefix = "paypipe-test-stores-"

    private static func directory(of pid: pid_t) -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)\(pid)")
    }

    private static let created: URL = {
        let files = FileManager.default
        for name in (try? files.contentsOfDirectory(atPath: files.temporaryDirectory.path)) ?? [] where name.hasPrefix(prefix) {
            if let pid = pid_t(name.dropFirst(prefix.count)), kill(pid, 0) != 0, errno == ESRCH {
                remove(directory(of: pid))
            }
        }
        let mine = directory(of: getpid())
        try? files.createDirectory(at: mine, withIntermediateDirectories: true)
        atexit { TestStores.remove(TestStores.directory(of: getpid())) }
        return mine
    }()

    /// Removes each file on its own: a store still open while the process exits may delete its
    /// own WAL meanwhile, and `removeItem` on the directory gives up at the first vanished file.
    private static func remove(_ directory: URL) {
        let files = FileManager.default
        for name in (try? files.contentsOfDirectory(atPath: directory.path)) ?? [] {
            try? files.removeItem(at: directory.appendingPathComponent(name))
        }
        try? files.removeItem(at: directory)
    }

    /// A new store path (the file does not exist yet).
    package static func path() -> String {
        created.appendingPathComponent("ledger-\(UUID().uuidString).sqlite").path
    }
}

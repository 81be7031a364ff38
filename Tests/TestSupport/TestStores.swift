import Foundation
import LedgerStage
import Logging
import PaypipeCore

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

/// The suites that keep orders run on SQLite, or on PostgreSQL when `PAYPIPE_TEST_STORE` is
/// `postgres` (`.ci/run` runs them both ways): `PAYPIPE_TEST_POSTGRES_URL` names the server, and
/// each store is a schema of its own there, so tests never see each other's orders.
extension TestStores {
    /// The PostgreSQL server the tests use, or nil for SQLite.
    package static let postgres: PostgresSettings? = {
        let environment = ProcessInfo.processInfo.environment
        guard environment["PAYPIPE_TEST_STORE"] == "postgres" else { return nil }
        let url = environment["PAYPIPE_TEST_POSTGRES_URL"] ?? "postgres://paypipe@127.0.0.1:5432/paypipe"
        do {
            return try PostgresSettings(url: url, at: "PAYPIPE_TEST_POSTGRES_URL")
        } catch {
            fatalError("PAYPIPE_TEST_POSTGRES_URL: \(error)")
        }
    }()

    /// Where a new store goes: a SQLite file's path, or a new PostgreSQL schema's name.
    package static func location() -> String {
        postgres == nil ? path() : "t_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
    }

    /// The store at `location` (`location()`), opened.
    package static func open(_ location: String) throws -> LedgerStore {
        try LedgerStore(settings(location))
    }

    /// A ledger's `--store` for a pipeline whose files are in `directory`: its SQLite file there,
    /// or a schema named after the directory.
    package static func ledgerArgument(directory: URL) -> String {
        guard var settings = postgres else { return directory.appendingPathComponent("ledger.sqlite").path }
        settings.schema = schema(of: directory)
        return url(settings)
    }

    /// A second connection to the store of the pipeline in `directory`, from the test process.
    package static func database(directory: URL) throws -> any StoreDatabase {
        guard var settings = postgres else { return try SQLiteConnection(path: directory.appendingPathComponent("ledger.sqlite").path) }
        settings.schema = schema(of: directory)
        return try PostgresDatabase(settings: settings, logger: Logger(label: "test"))
    }

    /// A database of its own on the suites' server, for a test that holds the store's advisory
    /// lock: such locks are per database, so holding it there holds up no other test's store.
    /// `drop` removes it.
    package static func privateDatabase() throws -> (settings: PostgresSettings, drop: () -> Void) {
        guard let server = postgres else { throw HarnessError("no PostgreSQL server for the tests") }
        let admin = try PostgresDatabase(settings: server, logger: Logger(label: "test"))
        let name = location()
        try admin.execute("CREATE DATABASE \(name)")
        var settings = server
        settings.database = name
        settings.schema = "paypipe"
        return (settings, { try? admin.execute("DROP DATABASE \(name) WITH (FORCE)") })
    }

    /// The settings that open the store at `location` (`location()`).
    package static func settings(_ location: String) -> StoreSettings {
        guard var settings = postgres, !location.hasPrefix("/") else { return .sqlite(path: location) }
        settings.schema = location
        return .postgres(settings)
    }

    package static func schema(of directory: URL) -> String {
        "p_" + String(directory.lastPathComponent.lowercased().unicodeScalars.filter { CharacterSet.alphanumerics.contains($0) }.prefix(40))
    }

    package static func url(_ s: PostgresSettings) -> String {
        let password = s.password.map { ":" + $0.reveal() } ?? ""
        let place = s.socketDirectory == nil ? "\(s.host):\(s.port)" : ":\(s.port)"
        let socket = s.socketDirectory.map { "&host=\($0)" } ?? ""
        return "postgres://\(s.user)\(password)@\(place)/\(s.database)?schema=\(s.schema)\(socket)&sslmode=\(s.tls.rawValue)"
    }
}

import Foundation
import Supervision

/// `paypipe up --store postgres`: a PostgreSQL cluster of the demo's own under the state
/// directory, made with `initdb` on first use, started with `pg_ctl`, listening on a Unix socket
/// there only, and stopped when the pipeline stops. PostgreSQL refuses to run as root, so under
/// root the cluster belongs to the `postgres` user that Debian's package creates.
struct PrivatePostgres {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    let directory: String
    let binaries: String

    init(stateDirectory: String) throws {
        directory = URL(fileURLWithPath: stateDirectory).appendingPathComponent("postgres").standardizedFileURL.path
        guard let binaries = Self.findBinaries() else {
            throw Failure(description: "no PostgreSQL server programs (initdb, pg_ctl): install postgresql-15, or pass --store postgres=URL")
        }
        self.binaries = binaries
    }

    /// The connection, as the ledger's `--store` takes it.
    var url: String { "postgres://paypipe@:5432/paypipe?host=\(directory)" }

    private var data: String { directory + "/data" }

    func start() throws {
        let files = FileManager.default
        try files.createDirectory(atPath: directory, withIntermediateDirectories: true)
        if getuid() == 0 {
            guard let owner = getpwnam("postgres") else { throw Failure(description: "running as root needs the postgres user to own the cluster") }
            chown(directory, owner.pointee.pw_uid, owner.pointee.pw_gid)
        }
        chmod(directory, 0o700)
        if !files.fileExists(atPath: data + "/PG_VERSION") {
            try run("initdb", ["-D", data, "-U", "paypipe", "-A", "trust", "-E", "UTF8", "--no-locale"], log: "initdb.log")
        }
        // Still running after a pipeline that was killed rather than stopped: taken as it is.
        if (try? run("pg_ctl", ["-D", data, "status"], log: "pg_ctl.log")) != nil { return }
        try run(
            "pg_ctl",
            [
                "-D", data, "-l", directory + "/server.log", "-w", "-t", "60", "-o",
                "-k \(directory) -p 5432 -c listen_addresses='' -c max_connections=100", "start",
            ], log: "pg_ctl.log")
        // The database exists after the first start; createdb then fails, harmlessly.
        _ = try? run("createdb", ["-h", directory, "-p", "5432", "-U", "paypipe", "paypipe"], log: "createdb.log")
    }

    func stop() {
        _ = try? run("pg_ctl", ["-D", data, "-m", "fast", "-w", "stop"], log: "pg_ctl.log")
    }

    /// Runs one of the server's programs to its end, as the cluster's owner, its output to
    /// `log` in the cluster's directory.
    private func run(_ program: String, _ arguments: [String], log: String) throws {
        let command = getuid() == 0 ? ["/usr/sbin/runuser", "-u", "postgres", "--", binaries + "/" + program] : [binaries + "/" + program]
        let logPath = directory + "/" + log
        let exited = try ChildProcess(command + arguments, stdout: .file(logPath), stderr: .standardOutput).waitForExitBlocking()
        guard exited == 0 else { throw Failure(description: "\(program) failed with status \(exited ?? -1): see \(logPath)") }
    }

    /// Debian keeps the server's programs out of PATH, one directory per major version.
    private static func findBinaries() -> String? {
        let root = "/usr/lib/postgresql"
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).compactMap(Int.init).sorted()
        if let newest = versions.last, FileManager.default.isExecutableFile(atPath: "\(root)/\(newest)/bin/pg_ctl") {
            return "\(root)/\(newest)/bin"
        }
        for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":")
        where FileManager.default.isExecutableFile(atPath: "\(directory)/pg_ctl") {
            return String(directory)
        }
        return nil
    }
}

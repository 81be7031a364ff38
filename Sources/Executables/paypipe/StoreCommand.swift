import ArgumentParser
import LedgerStage
import PaypipeCore
import StageRuntime

/// `paypipe store backup` and `restore`: copies of a SQLite store, taken while the ledger runs,
/// and put back while it is stopped (docs/operations.md, "Backups and restore"). A PostgreSQL
/// store is backed up by its server.
struct StoreCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "store", abstract: "Back up and restore the ledger's SQLite store.", subcommands: [Backup.self, Restore.self])

    /// Exit status of a command that does not apply to the configured store.
    static let notForThisStore: Int32 = 2

    struct Backup: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Copy the ledger's SQLite store to --to while the ledger runs.",
            discussion: """
                The copy is one committed state of the store, checked with SQLite's integrity check, written beside --to and \
                renamed into place, readable by its owner only. A PostgreSQL store is backed up by its server \
                (pg_basebackup, CloudNativePG): this exits 2.
                """)

        @Option(help: "Config file whose store section names the store; default $PAYPIPE_CONFIG.") var config: String?
        @Option(help: "Where the ledger keeps orders, instead of the config's store section (as paypipe-ledger --store).") var store: String?
        @Option(help: "Where to write the copy.") var to: String

        func run() async throws {
            let path = sqlitePath(config: config, store: store, doing: "backups")
            let copy: SQLiteStoreCopy
            do {
                copy = try SQLiteBackup.backup(storePath: path, to: to)
            } catch {
                StageProcess.fail("\(error)")
            }
            printText("backed up \(path) to \(copy.description)")
        }
    }

    struct Restore: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Put a copy made by `paypipe store backup` in place of the ledger's SQLite store; the ledger must be stopped.",
            discussion: """
                The copy must be an intact paypipe store whose schema this paypipe knows. The store it replaces is kept \
                beside it (<store>.replaced-<time>, with its -wal and -shm files), never deleted. After the restore, \
                upstream's replay with its last epoch and seq is answered diverged: see docs/operations.md, \
                "Backups and restore", for what upstream does then.
                """)

        @Option(help: "Config file whose store section names the store; default $PAYPIPE_CONFIG.") var config: String?
        @Option(help: "Where the ledger keeps orders, instead of the config's store section (as paypipe-ledger --store).") var store: String?
        @Option(help: "The copy to restore.") var from: String

        func run() async throws {
            let path = sqlitePath(config: config, store: store, doing: "restores")
            do {
                let (restored, keptAt) = try SQLiteBackup.restore(storePath: path, from: from, now: Timestamp.nowMilliseconds())
                printText("restored \(restored.description) from \(from)")
                if let keptAt { printText("the replaced store is kept at \(keptAt)") }
                printText(
                    "start the ledger: upstream's replay from its last epoch and seq is answered diverged (docs/operations.md, \"Backups and restore\")"
                )
            } catch {
                StageProcess.fail("\(error)")
            }
        }
    }
}

/// The SQLite file of `--store`, else of the config's store section. A PostgreSQL store ends
/// the command with status 2: its backups and restores are its server's.
private func sqlitePath(config: String?, store: String?, doing what: String) -> String {
    let settings: StoreSettings
    do {
        settings =
            try store.map { try StoreSettings.parse(commandLine: $0) } ?? configuredConfig(config)?.store
            ?? .sqlite(path: StoreSettings.defaultSQLitePath)
    } catch {
        StageProcess.fail("\(error)")
    }
    switch settings {
    case .sqlite(let path): return path
    case .postgres:
        StageProcess.fail(
            "the store is PostgreSQL: its \(what) are the server's (pg_basebackup, pg_dump, CloudNativePG's backups), see docs/operations.md, \"Backups and restore\"",
            status: StoreCommand.notForThisStore)
    }
}

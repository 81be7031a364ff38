import Connectors
import Foundation
import Logging
import PaypipeCore
import StageRuntime
import Supervision
import TestSupport
import Testing

@testable import LedgerStage

/// `paypipe-ledger migrate` and ledgers with `store.migrations` job, as real processes over the
/// suite's store (SQLite, or PostgreSQL with `PAYPIPE_TEST_STORE`), probed over real HTTP.
@Suite("Migrations as a step of their own: paypipe-ledger migrate, ledgers that wait for it", .serialized)
struct StoreMigrationFlowTests {
    /// A directory with a config whose addresses are free loopback ports, and the ledger's
    /// `--store` for it.
    static func pipelineFiles(store section: [String: JSONValue] = [:]) throws -> (directory: URL, config: String, store: String) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("paypipe-migrate-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var endpoints: [String: String] = [:]
        for name in ["intake", "outcomes", "signQueue", "signedIn", "signedOut", "results", "ledgerRPC", "pollQueue", "outcomesReplay", "admin"] {
            endpoints[name] = "tcp://127.0.0.1:\(try freeLoopbackPort())"
        }
        let text = DemoConfig.text(sandboxURL: "http://127.0.0.1:9", callbacks: "127.0.0.1:\(try freeLoopbackPort())", endpoints: endpoints)
        guard case .object(var document) = try JSONValue.parse(Array(text.utf8)) else { throw HarnessError("the demo config is no object") }
        if !section.isEmpty { document["store"] = .object(section) }
        let config = directory.appendingPathComponent("config.json").path
        try JSONValue.object(document).serialized.write(toFile: config, atomically: true, encoding: .utf8)
        return (directory, config, TestStores.ledgerArgument(directory: directory))
    }

    static func migrate(_ arguments: [String]) async throws -> (status: Int32, output: String, errors: String) {
        var environment = ProcessInfo.processInfo.environment
        environment["PAYPIPE_CONFIG"] = nil
        return try await runCapturing(
            PipelineHarness.buildDirectory().appendingPathComponent("paypipe-ledger").path, ["migrate"] + arguments, environment: environment,
            within: .seconds(60))
    }

    /// A store holding an order, put back to schema 10 (before the table of backups).
    static func storeAtVersion10(_ store: String) async throws {
        var core = LedgerCore(store: try LedgerStore(try StoreSettings.parse(commandLine: store)), registry: await testRegistry())
        _ = try core.intake([Array(rejectedOrder("kept-1").utf8)], now: 1000)
        try core.store.db.execute("DROP TABLE store_backups; UPDATE meta SET value='10' WHERE name='schema_version'")
    }

    /// The must-show of a rollout: a new ledger whose store is not at its schema yet answers 503
    /// on both its probe addresses, saying why, for as long as it waits; once `paypipe-ledger
    /// migrate` has run, it opens the store and answers 200.
    @Test func aLedgerLeavingMigrationsToTheJobIsNotReadyUntilTheStoreIsMigrated() async throws {
        let (directory, config, store) = try Self.pipelineFiles(store: ["migrations": "job"])
        defer { try? FileManager.default.removeItem(at: directory) }
        let (metrics, scrape) = (try freeLoopbackPort(), try freeLoopbackPort())
        let ((ledger, log), _) = try PipelineHarness.spawn(
            "paypipe-ledger",
            ["--config", config, "--store", store, "--metrics", "127.0.0.1:\(metrics)", "--scrape", "127.0.0.1:\(scrape)"],
            in: directory, index: 0, waitForLine: nil)
        defer { ledger.signal(SIGKILL) }
        func readiness(_ port: Int) -> (Int, String)? { httpExchange(port: port, method: "GET", path: "/readyz", receiveTimeoutSeconds: 3) }

        for port in [metrics, scrape] {
            #expect(await eventually(within: .seconds(20)) { readiness(port)?.0 == 503 }, "port \(port): \(String(describing: readiness(port)))")
            let answer = readiness(port)
            #expect(
                answer?.1.contains("schema is version 0 and this ledger needs \(LedgerStore.schemaVersion)") == true, "\(String(describing: answer))")
            #expect(answer?.1.contains("waiting for `paypipe-ledger migrate`") == true)
        }
        #expect(ledger.isRunning)
        #expect((try? String(contentsOf: log, encoding: .utf8))?.contains("waiting for the store's migration") == true)

        let migrated = try await Self.migrate(["--config", config, "--store", store])
        #expect(migrated.status == 0, "\(migrated.errors)")
        #expect(migrated.output.contains("migrated from version 0 to \(LedgerStore.schemaVersion)"), "\(migrated.output)")
        for port in [metrics, scrape] {
            #expect(await eventually(within: .seconds(20)) { readiness(port)?.0 == 200 }, "port \(port): \(String(describing: readiness(port)))")
        }
        ledger.signal(SIGTERM)
        #expect(await waitForExit(ledger, within: .seconds(30)))
        #expect(ledger.exitStatus == 0)
    }

    /// A ledger that migrates its store as it starts is not ready while it cannot: here the
    /// store is held from outside (SQLite's write lock, or on PostgreSQL the lock migrations
    /// take turns with) for longer than one try waits. On SQLite it exits; on PostgreSQL it tries
    /// again until the lock is released, then answers ready, the same process.
    @Test func aLedgerIsNotReadyWhileItsStoreCannotBeOpenedAndMigrated() async throws {
        var (directory, config, store) = try Self.pipelineFiles()
        defer { try? FileManager.default.removeItem(at: directory) }
        // On PostgreSQL the lock is the store's advisory lock, per database: held in a database
        // of the test's own, it holds up no other test's store.
        let server = try TestStores.postgres.map { _ in try TestStores.privateDatabase() }
        defer { server?.drop() }
        if let server { store = TestStores.url(server.settings) }
        let holder: any StoreDatabase =
            try server.map { try PostgresDatabase(settings: $0.settings, logger: Logger(label: "test")) }
            ?? TestStores.database(directory: directory)
        try holder.execute(server == nil ? "BEGIN EXCLUSIVE" : "BEGIN; SELECT pg_advisory_xact_lock(7027566457)")
        let metrics = try freeLoopbackPort()
        let ((ledger, _), _) = try PipelineHarness.spawn(
            "paypipe-ledger", ["--config", config, "--store", store, "--metrics", "127.0.0.1:\(metrics)"], in: directory, index: 0,
            waitForLine: nil)
        defer { ledger.signal(SIGKILL) }
        var answers: [Int] = []
        // SQLite's file is no better a moment later: the ledger exits. A database server is tried
        // again for the retry window: the ledger waits, not ready, until the lock is released.
        let waited = await eventually(within: .seconds(20)) {
            if let answer = httpExchange(port: metrics, method: "GET", path: "/readyz", receiveTimeoutSeconds: 3) {
                answers.append(answer.0)
                #expect(answer.1.contains(LedgerService.storeNotOpen), "\(answer.1)")
            }
            return server == nil ? !ledger.isRunning : answers.count >= 3
        }
        try holder.execute("ROLLBACK")
        #expect(waited, "\(answers)")
        #expect(!answers.isEmpty && answers.allSatisfy { $0 == 503 }, "\(answers)")
        if server == nil {
            #expect(ledger.exitStatus == 1)
        } else {
            let ready = await eventually(within: .seconds(20)) {
                httpExchange(port: metrics, method: "GET", path: "/readyz", receiveTimeoutSeconds: 3)?.0 == 200
            }
            #expect(ready && ledger.isRunning, "the ledger opens the store once the lock is released, without a restart")
        }
    }

    /// A store with steps to run and orders in it is migrated only after a recent backup, or
    /// when told to go without: the refusal names what it found, the limit and the flags.
    @Test func migrateRefusesAStoreWithoutARecentBackupUnlessToldOtherwise() async throws {
        let (directory, config, store) = try Self.pipelineFiles()
        defer { try? FileManager.default.removeItem(at: directory) }
        try await Self.storeAtVersion10(store)

        let missing = try await Self.migrate(["--config", config, "--store", store])
        #expect(missing.status == MigrationNeedsBackup.exitStatus, "\(missing.errors)")
        #expect(missing.errors.contains("no backup of the store is recorded"), "\(missing.errors)")
        #expect(missing.errors.contains("within 1d (store.maxBackupAgeMinutes, or --max-backup-age)"))
        #expect(missing.errors.contains("--without-backup"))

        let old = Timestamp.nowMilliseconds() - 30 * 3_600_000
        try TestStores.database(directory: directory).recordBackup(takenAt: old, kind: "test", location: "/backups/ledger-old")
        let tooOld = try await Self.migrate(["--config", config, "--store", store])
        #expect(tooOld.status == MigrationNeedsBackup.exitStatus)
        #expect(tooOld.errors.contains("the newest backup of the store was taken 1d 6h ago"), "\(tooOld.errors)")
        let badFlag = try await Self.migrate(["--config", config, "--store", store, "--max-backup-age", "soon"])
        #expect(badFlag.status == 1 && badFlag.errors.contains("--max-backup-age: must be a positive span"), "\(badFlag.errors)")

        let allowed = try await Self.migrate(["--config", config, "--store", store, "--max-backup-age", "2d"])
        #expect(allowed.status == 0, "\(allowed.errors)")
        #expect(allowed.output.contains("migrated from version 10 to \(LedgerStore.schemaVersion)"), "\(allowed.output)")
        let again = try await Self.migrate(["--config", config, "--store", store, "--max-backup-age", "1m"])
        #expect(again.status == 0 && again.output.contains("already at version \(LedgerStore.schemaVersion)"), "\(again.output) \(again.errors)")

        let (otherDirectory, otherConfig, otherStore) = try Self.pipelineFiles()
        defer { try? FileManager.default.removeItem(at: otherDirectory) }
        try await Self.storeAtVersion10(otherStore)
        let waived = try await Self.migrate(["--config", otherConfig, "--store", otherStore, "--without-backup"])
        #expect(waived.status == 0, "\(waived.errors)")
        #expect(waived.output.contains("migrated from version 10 to \(LedgerStore.schemaVersion)"), "\(waived.output)")
    }
}

import ArgumentParser
import Connectors
import LedgerStage
import PaypipeCore
import ServiceLifecycle
import StageRuntime

/// `paypipe-ledger [run]` runs the ledger; `paypipe-ledger migrate` only migrates its store.
@main
struct LedgerCommands: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "paypipe-ledger",
        abstract:
            "Records and deduplicates orders, forwards outcomes upstream, redelivers stalled orders, and binds every stable address of the pipeline.",
        version: PaypipeVersion.current, subcommands: [LedgerCommand.self, MigrateCommand.self], defaultSubcommand: LedgerCommand.self)
}

struct LedgerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run", abstract: "Runs the ledger (the default when no subcommand is named).")

    @OptionGroup var options: StageOptions
    @Option(help: "Where the ledger keeps orders: a SQLite file, or a postgres:// URL (default: the config's store section).")
    var store: String?
    @Option(help: "Redeliver an order with no terminal or pending outcome after this many ms.") var redeliverAfterMs: Int64 = 60_000
    @Option(help: "Override endpoints.ledgerScrape: a second host:port serving /metrics, /livez and /readyz, not /review.")
    var scrape: String?
    @Flag(help: "Leave the signer-to-submitter streamer to paypipe-streamer copies (a fleet); signedIn and signedOut are not bound.")
    var noStreamer = false

    func run() async throws {
        // No secret but what outcomes carry for the app, which the store keeps withheld.
        var config = options.loadConfig(
            secrets: false, alsoSecrets: Set(StandardConnectors.all.flatMap { $0.outcomeSecretSettings } + Self.storeSecrets),
            connectors: StandardConnectors.all)
        if let metrics = options.metrics { config.endpoints.ledgerMetrics = metrics }
        let logger = options.logger("paypipe-ledger")
        config.store = Self.store(config.store, overriddenBy: store)
        let ledger = LedgerService(
            config: config, registry: await StandardConnectors.registry(config: config), store: config.store,
            redeliverAfterMilliseconds: redeliverAfterMs, runsStreamer: !noStreamer, logger: logger
        ) { bound in
            StageProcess.printLine(bound.readyLine)
        }
        do {
            var services: [any Service] = [ledger, try ledger.metricsServer(address: config.endpoints.ledgerMetrics)]
            // Metrics and probes without /review, for a network that may scrape but not read orders.
            if let address = scrape ?? config.endpoints.ledgerScrape {
                services.append(try ledger.metrics.server(address: address, role: "ledger scrape", logger: logger))
            }
            await StageProcess.run(services, logger: logger, tracing: config.tracing)
        } catch {
            StageProcess.fail("\(error)")
        }
    }
}

extension LedgerCommand {
    static let storeSecrets = ["store.url", "store.password"]

    /// The config's store, or the one `--store` names.
    static func store(_ configured: StoreSettings, overriddenBy argument: String?) -> StoreSettings {
        guard let argument else { return configured }
        do {
            return try StoreSettings.parse(commandLine: argument)
        } catch {
            StageProcess.fail("\(error)")
        }
    }
}

/// `paypipe-ledger migrate`: the store's migrations as a step of their own, run once per release
/// before its ledgers start (a Kubernetes Job, a compose one-shot), so that ledgers with
/// `store.migrations` job only ever open a store at their schema.
struct MigrateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Brings the ledger's store to this release's schema (after a recent backup), prints the versions before and after, and exits.",
        discussion: """
            Exit status: 0 migrated or already at the schema; 77 refused, no backup recent enough; \
            75 the database server could not be reached or a step timed out waiting for a lock (try again); \
            1 a bad config, a store newer than this release, or a failed step.
            """)

    @OptionGroup var options: StageOptions
    @Option(help: "Where the ledger keeps orders: a SQLite file, or a postgres:// URL (default: the config's store section).")
    var store: String?
    @Option(
        help: "Refuse to migrate a store whose newest backup is older than this: 90m, 24h, 2d (default: store.maxBackupAgeMinutes, 24h).")
    var maxBackupAge: String?
    @Flag(help: "Migrate even without a recent backup of the store.") var withoutBackup = false

    func run() throws {
        var config = options.loadConfig(secrets: false, alsoSecrets: Set(LedgerCommand.storeSecrets), connectors: StandardConnectors.all)
        config.store = LedgerCommand.store(config.store, overriddenBy: store)
        let logger = options.logger("paypipe-ledger")
        var limit: Int64? = config.storeMigrations.maxBackupAgeMinutes * 60_000
        if let maxBackupAge {
            guard let parsed = Self.milliseconds(maxBackupAge) else {
                StageProcess.fail("--max-backup-age: must be a positive span such as 90m, 24h or 2d, got \(maxBackupAge)")
            }
            limit = parsed
        }
        if withoutBackup { limit = nil }
        do {
            let done = try LedgerStore.migrate(config.store, maxBackupAgeMilliseconds: limit, logger: logger)
            let change =
                done.before == done.after ? "already at version \(done.after)" : "migrated from version \(done.before) to \(done.after)"
            StageProcess.printLine("store schema: \(change) (\(config.store.summary))")
        } catch let refused as MigrationNeedsBackup {
            StageProcess.fail("\(refused)", status: MigrationNeedsBackup.exitStatus)
        } catch let error where config.store.isDatabaseServer && !(error is StoreSchemaTooNew) {
            StageProcess.fail("\(error)", status: LedgerStoreFailure.status)
        } catch {
            StageProcess.fail("\(error)")
        }
    }

    /// `90m`, `24h`, `2d`, `1h30m`, `3600s`: a positive span in milliseconds; nil otherwise.
    static func milliseconds(_ text: String) -> Int64? {
        let units: [Character: Int64] = ["s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000]
        var total: Int64 = 0
        var digits = ""
        for character in text {
            if character.isASCII, character.isNumber {
                digits.append(character)
            } else if let unit = units[character], let number = Int64(digits), digits.count <= 9 {
                total += number * unit
                digits = ""
            } else {
                return nil
            }
        }
        return digits.isEmpty && total > 0 ? total : nil
    }
}

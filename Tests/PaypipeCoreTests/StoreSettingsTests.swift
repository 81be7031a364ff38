import Foundation
import PaypipeCore
import Testing

@Suite("Config: the store section")
struct StoreSettingsTests {
    /// `sampleConfig` with a `store` section.
    func withStore(_ store: String) -> String {
        String(sampleConfig.dropLast(2)) + ",\n  \"store\": \(store)\n}"
    }

    /// Each `store` section of `cases` is refused with its message.
    func expectRefusals(_ cases: [(String, String)], _ ledger: PaypipeConfig.Sources) {
        for (store, expected) in cases {
            #expect(throws: ConfigError.self) { try parse(withStore(store), ledger) }
            do {
                _ = try parse(withStore(store), ledger)
            } catch {
                #expect(error.description.hasPrefix(expected), "\(store): \(error)")
            }
        }
    }

    @Test func withoutASectionTheStoreIsTheSQLiteFile() throws {
        guard case .sqlite(let path) = try parse(sampleConfig).store else {
            Issue.record("SQLite by default")
            return
        }
        #expect(path == StoreSettings.defaultSQLitePath)
    }

    @Test func aPostgresURLGivesEveryPartAndThePasswordFromItsOwnSecret() throws {
        var environment = sampleEnvironment
        environment["PG_URL"] = "postgres://ledger:p%40ss@db.internal:6543/orders?sslmode=verify-full&schema=shop_a"
        let config = try parse(
            withStore(#"{"backend": "postgres", "url": "env:PG_URL", "password": "file:/secrets/pg"}"#),
            sources(environment, files: ["/secrets/pg": "from-file\n"]).withoutSecrets(except: ["store.url", "store.password"]))
        guard case .postgres(let p) = config.store else {
            Issue.record("postgres")
            return
        }
        #expect(p.host == "db.internal" && p.port == 6543 && p.user == "ledger" && p.database == "orders")
        #expect(p.schema == "shop_a" && p.tls == .verifyFull && p.socketDirectory == nil)
        #expect(p.password?.reveal() == "from-file")
        #expect(!config.store.summary.contains("from-file") && !config.store.summary.contains("p@ss"))
    }

    /// The database password in a file others may read is refused, as every `file:` secret is.
    @Test func aPasswordFileOthersMayReadIsRefused() {
        var ledger = sources(files: ["/secrets/tp-notify": "notify-pass\n", "/secrets/pg": "from-file\n"])
            .withoutSecrets(except: ["store.url", "store.password"])
        ledger.fileMode = { path in path == "/secrets/pg" ? 0o100644 : 0o100600 }
        #expect {
            try parse(withStore(#"{"backend": "postgres", "url": "postgres://ledger@db/orders", "password": "file:/secrets/pg"}"#), ledger)
        } throws: { error in
            (error as? ConfigError).map { $0.path == "store.password" && $0.reason.contains("chmod 600") } == true
        }
    }

    @Test func aSocketDirectoryAndTheURLsOwnPassword() throws {
        let p = try PostgresSettings(url: "postgresql://paypipe:secret@:5433/paypipe?host=/run/pg", at: "--store")
        #expect(p.socketDirectory == "/run/pg" && p.port == 5433 && p.password?.reveal() == "secret" && p.tls == .disable)
        guard case .sqlite(let path) = try StoreSettings.parse(commandLine: "/var/lib/paypipe/ledger.sqlite") else {
            Issue.record("a path is a SQLite file")
            return
        }
        #expect(path == "/var/lib/paypipe/ledger.sqlite")
    }

    /// The URL is a secret of the ledger's: no other stage needs its variable set, also those
    /// that read every other secret (the signers, the callback validators).
    @Test func onlyTheLedgerReadsTheURL() throws {
        let text = withStore(#"{"backend": "postgres", "url": "env:PG_URL"}"#)
        for stage in [sources(), sources([:]).withoutSecrets] {
            guard case .postgres(let p) = try parse(text, stage).store else {
                Issue.record("postgres without its URL")
                return
            }
            #expect(p.host == "127.0.0.1" && p.password == nil)
        }
        let ledger = sources(["PG_URL": "postgres://u@h/d"]).withoutSecrets(except: ["store.url"])
        guard case .postgres(let p) = try parse(text, ledger).store else {
            Issue.record("postgres")
            return
        }
        #expect(p.host == "h" && p.user == "u" && p.database == "d")
    }

    /// Ledgers migrate on start unless the config leaves it to `paypipe-ledger migrate`, which
    /// asks for a backup no older than a day unless told another age.
    @Test func migrationsRunOnStartUnlessLeftToTheJob() throws {
        #expect(try parse(sampleConfig).storeMigrations == StoreMigrations())
        #expect(StoreMigrations().runner == .onStart && StoreMigrations().maxBackupAgeMinutes == 1440)
        let config = try parse(withStore(#"{"backend": "sqlite", "migrations": "job", "maxBackupAgeMinutes": 90}"#))
        #expect(config.storeMigrations.runner == .job && config.storeMigrations.maxBackupAgeMinutes == 90)
    }

    @Test func badSettingsNameTheFieldAndTheRule() {
        let cases: [(String, String)] = [
            (#"{"backend": "mysql"}"#, "store.backend: must be sqlite or postgres"),
            (#"{"backend": "postgres", "url": "mysql://x"}"#, "store.url: must be a postgres:// URL"),
            (#"{"backend": "postgres", "url": "postgres://h:99999/d"}"#, "store.url: has a port that is not a number from 1 to 65535"),
            (#"{"backend": "postgres", "url": "postgres://h/d", "tls": "maybe"}"#, "store.tls: must be disable, require, verify-ca or verify-full"),
            (#"{"backend": "postgres", "url": "postgres://h/d", "schema": "a;drop"}"#, "store.schema: must be a lower-case SQL identifier"),
            (#"{"backend": "postgres", "url": "postgres://h/d?user=x"}"#, "store.url: user is not a known URL parameter"),
            (#"{"backend": "sqlite", "paht": "x"}"#, "store.paht"),
            (#"{"migrations": "never"}"#, "store.migrations: must be onStart or job"),
            (#"{"maxBackupAgeMinutes": 0}"#, "store.maxBackupAgeMinutes: must be a positive integer"),
            (#"{"retryWindowMs": 999}"#, "store.retryWindowMs: must be a whole number of milliseconds from 1000 to 3600000"),
            (#"{"retryWindowMs": 3600001}"#, "store.retryWindowMs: must be a whole number of milliseconds from 1000 to 3600000"),
            (#"{"retryWindowMs": "60s"}"#, "store.retryWindowMs: must be a whole number of milliseconds from 1000 to 3600000"),
        ]
        let ledger = sources().withoutSecrets(except: ["store.url", "store.password"])
        expectRefusals(cases, ledger)
    }

    /// A CA file (`store.tlsCAFile`, or the URL's `sslrootcert=`) is read when the ledger starts:
    /// one it cannot use stops it there, naming the key.
    @Test func aCAFileIsCheckedWhenTheLedgerReadsTheURL() throws {
        let ledger = sources(files: ["/secrets/tp-notify": "notify-pass\n", "/ca/pg.pem": "-----BEGIN CERTIFICATE-----\nMII\n"])
            .withoutSecrets(except: ["store.url", "store.password"])
        let config = try parse(
            withStore(#"{"backend": "postgres", "url": "postgres://h/d", "tls": "verify-full", "tlsCAFile": "/ca/pg.pem"}"#), ledger)
        guard case .postgres(let p) = config.store else {
            Issue.record("postgres")
            return
        }
        #expect(p.tls == .verifyFull && p.tlsCAFile == "/ca/pg.pem")
        let fromURL = try PostgresSettings(url: "postgres://h/d?sslmode=verify-ca&sslrootcert=%2Fca%2Fpg.pem", at: "--store")
        #expect(fromURL.tls == .verifyCA && fromURL.tlsCAFile == "/ca/pg.pem")

        let cases: [(String, String)] = [
            (
                #"{"backend": "postgres", "url": "postgres://h/d", "tls": "require", "tlsCAFile": "/ca/pg.pem"}"#,
                "store.tlsCAFile: a CA file needs tls (sslmode) verify-ca or verify-full, not require"
            ),
            (
                #"{"backend": "postgres", "url": "postgres://h/d", "tls": "verify-full", "tlsCAFile": "/ca/missing.pem"}"#,
                "store.tlsCAFile: the CA file /ca/missing.pem cannot be read"
            ),
            (
                #"{"backend": "postgres", "url": "postgres://h/d?sslmode=verify-full&sslrootcert=/secrets/tp-notify"}"#,
                "store.url: the CA file /secrets/tp-notify holds no PEM certificate"
            ),
            (
                #"{"backend": "postgres", "url": "postgres://h/d?sslmode=verify-all"}"#,
                "store.url: sslmode must be disable, require, verify-ca or verify-full"
            ),
        ]
        expectRefusals(cases, ledger)
        // The other stages neither read the URL nor hold the file.
        #expect(throws: Never.self) {
            try parse(withStore(#"{"backend": "postgres", "url": "env:PG_URL", "tls": "verify-full", "tlsCAFile": "/ca/absent.pem"}"#), sources())
        }
    }

    /// A database server is ridden through a failover by default, a SQLite file for a short
    /// while; `store.retryWindowMs` sets either.
    @Test func theRetryWindowDefaultsByBackendAndIsSetApartFromTheStore() throws {
        #expect(try parse(sampleConfig).storeRetryWindowMs == nil)
        #expect(StoreSettings.sqlite(path: "x").defaultRetryWindowMilliseconds == 10_000)
        let postgres = StoreSettings.postgres(try PostgresSettings(url: "postgres://u@h/d", at: "--store"))
        #expect(postgres.defaultRetryWindowMilliseconds >= 60_000)
        #expect(try parse(withStore(#"{"retryWindowMs": 90000}"#)).storeRetryWindowMs == 90_000)
    }
}

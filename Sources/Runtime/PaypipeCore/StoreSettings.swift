/// Where the ledger keeps its orders (docs/configuration.md, "store"): a SQLite file on the
/// ledger's own disk, the embedded default, or a PostgreSQL database that survives the loss of
/// any one host running paypipe.
public enum StoreSettings: Sendable {
    case sqlite(path: String)
    case postgres(PostgresSettings)

    public static let defaultSQLitePath = "paypipe-ledger.sqlite"

    /// A command line's `--store`: a `postgres://` URL, or else a SQLite file's path.
    public static func parse(commandLine value: String) throws(ConfigError) -> StoreSettings {
        if PostgresSettings.isURL(value) {
            let settings = try PostgresSettings(url: value, at: "--store")
            try settings.checkTLS(at: "--store", readFile: readWholeFile)
            return .postgres(settings)
        }
        guard !value.isEmpty else { throw ConfigError(path: "--store", reason: "must not be empty") }
        return .sqlite(path: value)
    }

    /// What the configuration's `store` section says. The PostgreSQL URL and password are
    /// secrets that only the ledger needs: they are read only when the loader names them
    /// (`store.url`, `store.password`), so that no other stage needs them set.
    static func parse(_ r: inout ConfigReader) throws(ConfigError) -> StoreSettings {
        r.sources.resolveSecrets = false
        let backend = try r.optionalString("backend") ?? "sqlite"
        let settings: StoreSettings
        switch backend {
        case "sqlite":
            settings = .sqlite(path: try r.optionalString("path") ?? defaultSQLitePath)
        case "postgres":
            let url = try r.secret("url").reveal()
            var postgres = url.isEmpty ? PostgresSettings() : try PostgresSettings(url: url, at: r.child("url"))
            if let password = try r.optionalSecret("password"), !password.reveal().isEmpty { postgres.password = password }
            if let schema = try r.optionalString("schema") { postgres.schema = try PostgresSettings.identifier(schema, at: r.child("schema")) }
            if let tls = try r.optionalString("tls") {
                guard let mode = PostgresSettings.TLSMode(rawValue: tls) else {
                    throw ConfigError(path: r.child("tls"), reason: "must be \(PostgresSettings.TLSMode.choices)")
                }
                postgres.tls = mode
            }
            var caFileKey = r.child("url")
            if let file = try r.optionalString("tlsCAFile") {
                postgres.tlsCAFile = file
                caFileKey = r.child("tlsCAFile")
            }
            // Only the ledger reads the URL, and only its host holds the CA file.
            if !url.isEmpty { try postgres.checkTLS(at: caFileKey, readFile: r.sources.readFile) }
            settings = .postgres(postgres)
        default:
            throw ConfigError(path: r.child("backend"), reason: "must be sqlite or postgres")
        }
        try r.finish()
        return settings
    }

    /// The bounds of `store.retryWindowMs`: a window shorter than one pause between tries would
    /// give up at the first failure, and a ledger that waits longer than an hour holds what it
    /// read, not ready, long after someone should have been paged.
    public static let retryWindowRange: ClosedRange<Int64> = 1000...3_600_000

    /// `store.retryWindowMs`, taken out of the section before the rest is read; nil when absent.
    static func retryWindow(_ r: inout ConfigReader) throws(ConfigError) -> Int64? {
        guard let value = r.take("retryWindowMs") else { return nil }
        guard case .integer(let milliseconds) = value, retryWindowRange.contains(milliseconds) else {
            throw ConfigError(
                path: r.child("retryWindowMs"),
                reason: "must be a whole number of milliseconds from \(retryWindowRange.lowerBound) to \(retryWindowRange.upperBound)")
        }
        return milliseconds
    }

    /// How long the ledger retries a failing store when `store.retryWindowMs` is not set. A
    /// database server is away for as long as it takes to restart or to fail over to its standby,
    /// which a ledger rides through holding what it read. A SQLite file is local: what fails it
    /// (a lock another process holds, a full disk) does not pass by waiting much longer, and an
    /// exit tells the supervisor, frees what this process held and opens the file afresh.
    public var defaultRetryWindowMilliseconds: Int64 { isDatabaseServer ? 60_000 : 10_000 }

    /// Whether the store is a server the ledger reaches over a connection (not a local file).
    public var isDatabaseServer: Bool {
        if case .postgres = self { true } else { false }
    }

    /// For logs: never the password.
    public var summary: String {
        switch self {
        case .sqlite(let path): "sqlite \(path)"
        case .postgres(let p): "postgres \(p.summary)"
        }
    }
}

/// A PostgreSQL connection, from a URL in libpq's form:
/// `postgres://user[:password]@host[:port]/database[?sslmode=…&host=/socket/dir&schema=…]`.
public struct PostgresSettings: Sendable {
    public enum TLSMode: String, Sendable, Equatable {
        case disable
        /// Encrypted, the server's certificate not checked.
        case require
        /// Encrypted, the certificate chain checked against the CA file (else the system's
        /// roots), the host name not: for a server reached under a name its certificate lacks.
        case verifyCA = "verify-ca"
        /// Encrypted, the certificate chain checked against the CA file (else the system's
        /// roots) and the host name against the certificate.
        case verifyFull = "verify-full"

        static let choices = "disable, require, verify-ca or verify-full"

        /// Whether the server's certificate chain is checked.
        public var verifiesCertificate: Bool { self == .verifyCA || self == .verifyFull }
    }

    public var host = "127.0.0.1"
    public var port = 5432
    /// A directory holding the server's Unix socket (libpq's `host=/dir`), used instead of TCP.
    public var socketDirectory: String?
    public var user = "paypipe"
    public var password: Secret?
    public var database = "paypipe"
    /// The schema that holds paypipe's tables, so one database can hold several stores.
    public var schema = "public"
    public var tls = TLSMode.disable
    /// A PEM file of the certificate authorities the server's certificate must chain to
    /// (libpq's `sslrootcert`), e.g. a CloudNativePG cluster's own CA; nil: the system's roots.
    public var tlsCAFile: String?
    /// Servers to try after the first (`host`, `port`, `socketDirectory`), in order: a URL may
    /// list several, as libpq's does (`host1:5432,host2:5432`, or `host=/dir1,/dir2`).
    public var otherServers: [Server] = []
    /// Which server of the list to keep: any that answers, or only one that takes writes
    /// (libpq's `target_session_attrs=read-write`): after a failover the ledger finds the
    /// promoted standby and leaves the old primary, or a standby, alone.
    public var targetSessionAttributes = TargetSessionAttributes.any

    public enum TargetSessionAttributes: String, Sendable, Equatable {
        case any
        case readWrite = "read-write"
    }

    /// One server of the list.
    public struct Server: Sendable, Equatable, CustomStringConvertible {
        public var host: String
        public var port: Int
        public var socketDirectory: String?

        /// For logs and errors: its socket directory, or host and port.
        public var description: String { socketDirectory.map { "socket \($0)" } ?? "\(host):\(port)" }
    }

    /// Every server to try, in order.
    public var servers: [Server] { [Server(host: host, port: port, socketDirectory: socketDirectory)] + otherServers }

    public init() {}

    static func isURL(_ value: String) -> Bool { value.hasPrefix("postgres://") || value.hasPrefix("postgresql://") }

    public init(url: String, at path: String) throws(ConfigError) {
        guard Self.isURL(url) else { throw ConfigError(path: path, reason: "must be a postgres:// URL") }
        var rest = Substring(url.drop(while: { $0 != ":" }).dropFirst(3))
        var query: Substring = ""
        if let mark = rest.firstIndex(of: "?") {
            query = rest[rest.index(after: mark)...]
            rest = rest[..<mark]
        }
        var authority = rest
        if let slash = rest.firstIndex(of: "/") {
            authority = rest[..<slash]
            let name = Self.decoded(rest[rest.index(after: slash)...])
            if !name.isEmpty { database = name }
        }
        if let at = authority.lastIndex(of: "@") {
            let credentials = authority[..<at]
            authority = authority[authority.index(after: at)...]
            if let colon = credentials.firstIndex(of: ":") {
                user = Self.decoded(credentials[..<colon])
                password = Secret(Self.decoded(credentials[credentials.index(after: colon)...]))
            } else {
                user = Self.decoded(credentials)
            }
        }
        var places: [(host: String?, port: Int?)] = []
        for var place in authority.split(separator: ",", omittingEmptySubsequences: false) {
            var placePort: Int?
            if let colon = place.lastIndex(of: ":") {
                guard let number = Int(place[place.index(after: colon)...]), (1...65535).contains(number) else {
                    throw ConfigError(path: path, reason: "has a port that is not a number from 1 to 65535")
                }
                placePort = number
                place = place[..<colon]
            }
            places.append((place.isEmpty ? nil : Self.decoded(place), placePort))
        }
        if let first = places.first {
            if let firstHost = first.host { host = firstHost }
            if let firstPort = first.port { port = firstPort }
        }
        var socketDirectories: [String] = []
        for pair in query.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            let name = String(parts[0]), value = parts.count > 1 ? Self.decoded(parts[1]) : ""
            switch name {
            case "sslmode":
                guard let mode = TLSMode(rawValue: value) else {
                    throw ConfigError(path: path, reason: "sslmode must be \(TLSMode.choices)")
                }
                tls = mode
            case "sslrootcert":
                guard !value.isEmpty else { throw ConfigError(path: path, reason: "sslrootcert must name a PEM file") }
                tlsCAFile = value
            case "host":
                socketDirectories = value.split(separator: ",").map(String.init)
                guard !socketDirectories.isEmpty, socketDirectories.allSatisfy({ $0.hasPrefix("/") }) else {
                    throw ConfigError(path: path, reason: "host= in the query must be socket directories")
                }
                socketDirectory = socketDirectories[0]
            case "schema": schema = try Self.identifier(value, at: path)
            case "target_session_attrs":
                switch value {
                case "any": targetSessionAttributes = .any
                case "read-write", "primary": targetSessionAttributes = .readWrite
                default: throw ConfigError(path: path, reason: "target_session_attrs must be any, read-write or primary")
                }
            default:
                throw ConfigError(
                    path: path, reason: "\(name.prefix(32)) is not a known URL parameter (sslmode, sslrootcert, host, schema, target_session_attrs)")
            }
        }
        if socketDirectory == nil, host.hasPrefix("/") { socketDirectory = host }
        // The rest of the list, each place with its own port or the first's.
        if socketDirectories.count > 1 {
            otherServers = socketDirectories.dropFirst().map { Server(host: host, port: port, socketDirectory: $0) }
        } else if places.count > 1 {
            otherServers = places.dropFirst().map { place in
                let name = place.host ?? "127.0.0.1"
                return Server(host: name, port: place.port ?? port, socketDirectory: name.hasPrefix("/") ? name : nil)
            }
        }
    }

    /// A CA file is only of use to a mode that checks the certificate, and must hold PEM
    /// certificates now: the ledger refuses to start rather than fail each connection later.
    public func checkTLS(at path: String, readFile: (String) -> [UInt8]?) throws(ConfigError) {
        guard let file = tlsCAFile else { return }
        guard tls.verifiesCertificate else {
            throw ConfigError(path: path, reason: "a CA file needs tls (sslmode) verify-ca or verify-full, not \(tls.rawValue)")
        }
        guard let data = readFile(file) else {
            throw ConfigError(path: path, reason: "the CA file \(file) cannot be read")
        }
        guard String(decoding: data, as: UTF8.self).contains("-----BEGIN CERTIFICATE-----") else {
            throw ConfigError(path: path, reason: "the CA file \(file) holds no PEM certificate")
        }
    }

    /// A schema name goes into SQL as an identifier: letters, digits and underscores only.
    static func identifier(_ value: String, at path: String) throws(ConfigError) -> String {
        guard let first = value.utf8.first, !(UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first), value.utf8.count <= 63,
            value.utf8.allSatisfy({ $0 == UInt8(ascii: "_") || (0x30...0x39).contains($0) || (0x61...0x7a).contains($0) })
        else { throw ConfigError(path: path, reason: "must be a lower-case SQL identifier (a-z, 0-9, _), at most 63 characters") }
        return value
    }

    private static func decoded(_ text: Substring) -> String {
        var bytes: [UInt8] = []
        var utf8 = Array(text.utf8)[...]
        while let byte = utf8.popFirst() {
            if byte == UInt8(ascii: "%"), utf8.count >= 2, let value = UInt8(String(decoding: utf8.prefix(2), as: UTF8.self), radix: 16) {
                bytes.append(value)
                utf8 = utf8.dropFirst(2)
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// For logs and errors: where, never the password.
    public var summary: String {
        let place = servers.map(\.description).joined(separator: ",")
        let target = targetSessionAttributes == .any ? "" : " target \(targetSessionAttributes.rawValue)"
        let authorities = tlsCAFile.map { " ca \($0)" } ?? ""
        return "\(user)@\(place)/\(database) schema \(schema) tls \(tls.rawValue)\(authorities)\(target)"
    }
}

/// Who brings the store's schema forward to what a release needs (docs/configuration.md,
/// "Store"): each ledger as it starts, or only `paypipe-ledger migrate`, run once per release
/// before the ledgers roll, so that no ledger reports ready on a store that is not yet at its
/// schema and no migration runs without a recent backup.
public struct StoreMigrations: Sendable, Equatable {
    public enum Runner: String, Sendable {
        /// The ledger migrates the store as it opens it (a single box, `./demo`).
        case onStart
        /// The ledger never migrates: it waits, not ready, until `paypipe-ledger migrate` has.
        case job
    }

    /// `store.migrations`.
    public var runner = Runner.onStart
    /// `store.maxBackupAgeMinutes`: `paypipe-ledger migrate` refuses to change a store whose
    /// newest backup is older than this.
    public var maxBackupAgeMinutes: Int64 = 24 * 60

    public init() {}

    /// Its keys of the `store` section; the rest are `StoreSettings`'.
    static func parse(_ r: inout ConfigReader) throws(ConfigError) -> StoreMigrations {
        var migrations = StoreMigrations()
        if let runner = try r.optionalString("migrations") {
            guard let known = Runner(rawValue: runner) else { throw ConfigError(path: r.child("migrations"), reason: "must be onStart or job") }
            migrations.runner = known
        }
        migrations.maxBackupAgeMinutes = try r.positiveInteger("maxBackupAgeMinutes") ?? migrations.maxBackupAgeMinutes
        return migrations
    }
}

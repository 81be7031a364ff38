import Logging
import NIOCore
import NIOPosix
import NIOSSL
import PaypipeCore
import PostgresNIO

/// The store's database in PostgreSQL, through postgres-nio. The ledger's store is synchronous
/// (one owner, one transaction at a time), so each statement waits for its answer here, off
/// the event loop that carries it.
package final class PostgresDatabase: StoreDatabase {
    package let dialect = StoreDialect.postgres
    let settings: PostgresSettings
    private let logger: Logger
    private let eventLoop: any EventLoop
    private var connection: PostgresConnection?
    private var connections = 0
    /// Each statement's text for PostgreSQL, by its literal's address (see `translate`).
    private var translated: [UnsafeRawPointer: String] = [:]
    /// Statements sent, BEGIN and COMMIT included: each waits for its answer before the next
    /// is sent (postgres-nio does not pipeline), so each is one round trip to the server.
    package private(set) var roundTrips = 0

    /// Sessions that only read (`StoreReader`): PostgreSQL refuses any write in them.
    private let readOnly: Bool

    package init(settings: PostgresSettings, logger: Logger, readOnly: Bool = false) throws {
        self.settings = settings
        self.logger = logger
        self.readOnly = readOnly
        eventLoop = MultiThreadedEventLoopGroup.singleton.any()
        _ = try connectIfNeeded()
    }

    /// A connection must be closed before it goes: waited for here, off its event loop.
    deinit {
        if let connection, !connection.isClosed {
            let closing: EventLoopFuture<Void> = connection.close()
            try? closing.wait()
        }
    }

    package func connectIfNeeded() throws -> Bool {
        if let connection, !connection.isClosed { return false }
        connection = nil
        var failures: [String] = []
        for server in settings.servers {
            do {
                if let opened = try open(server) {
                    connection = opened
                    break
                }
                failures.append("\(server) takes no writes")
            } catch {
                failures.append("\(error)")
            }
        }
        guard connection != nil else {
            throw StoreError(message: "no usable PostgreSQL server: " + failures.joined(separator: "; "))
        }
        // A commit is on the server's disk before the ledger sends anything it decided. A lock
        // held from outside fails the transaction after a while, as SQLite's busy timeout does,
        // and the ledger retries it (`StoreRetry`) rather than waiting without end.
        var setup = "SET synchronous_commit = on; SET client_min_messages = warning; SET lock_timeout = '2s';"
        // Under the lock ledgers take turns with (`takeStoreLock`): two creating it at once collide.
        if settings.schema != "public" {
            setup += " BEGIN; SELECT pg_advisory_xact_lock(7027566457); CREATE SCHEMA IF NOT EXISTS \(settings.schema); COMMIT;"
        }
        setup += " SET search_path TO \(settings.schema);"
        if readOnly { setup += " SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY;" }
        do {
            try execute(setup)
        } catch {
            // Half set up (no search_path yet, a transaction left aborted) it would write to
            // another schema's tables or fail every statement: the next try opens another.
            abandonConnection()
            throw error
        }
        return true
    }

    /// Closes the connection (as far as it lets itself be) and leaves none: the next
    /// transaction opens a new one.
    package func abandonConnection() {
        guard let connection else { return }
        let closing: EventLoopFuture<Void> = connection.close()
        _ = try? bounded(closing, within: .seconds(2))
        self.connection = nil
    }

    /// A connection to `server`; nil when the settings ask for a server that takes writes and
    /// this one does not (a standby, or a primary not yet promoted), which is closed again.
    private func open(_ server: PostgresSettings.Server) throws -> PostgresConnection? {
        let configuration: PostgresConnection.Configuration
        let password = settings.password?.reveal()
        if let directory = server.socketDirectory {
            configuration = .init(
                unixSocketPath: "\(directory)/.s.PGSQL.\(server.port)", username: settings.user, password: password, database: settings.database)
        } else {
            configuration = .init(
                host: server.host, port: server.port, username: settings.user, password: password, database: settings.database, tls: try tls())
        }
        connections += 1
        let opened: PostgresConnection
        do {
            opened = try bounded(
                PostgresConnection.connect(on: eventLoop, configuration: configuration, id: connections, logger: logger), within: .seconds(10))
        } catch {
            throw Self.storeError(error, doing: "connect to \(server)")
        }
        guard settings.targetSessionAttributes == .readWrite else { return opened }
        do {
            let result = try bounded(opened.query(PostgresQuery(unsafeSQL: "SHOW transaction_read_only"), logger: logger), within: .seconds(10))
            let answer = try result.rows.first.map { row in try row.map(Self.value) }?.first?.text
            if answer == "off" { return opened }
        } catch {
            try? bounded(opened.close(), within: .seconds(5))
            throw Self.storeError(error, doing: "ask \(server) whether it takes writes")
        }
        try? bounded(opened.close(), within: .seconds(5))
        return nil
    }

    private func tls() throws -> PostgresConnection.Configuration.TLS {
        switch settings.tls {
        case .disable: return .disable
        case .require:
            var configuration = TLSConfiguration.makeClientConfiguration()
            configuration.certificateVerification = .none
            return .require(try NIOSSLContext(configuration: configuration))
        case .verifyCA, .verifyFull:
            var configuration = TLSConfiguration.makeClientConfiguration()
            // NIOSSL checks the name postgres-nio sends (the host), or else the address reached.
            configuration.certificateVerification = settings.tls == .verifyFull ? .fullVerification : .noHostnameVerification
            if let file = settings.tlsCAFile {
                do {
                    configuration.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(file))
                } catch {
                    throw StoreError(message: "the store's CA file \(file) holds no usable certificate: \(error)")
                }
            }
            return .require(try NIOSSLContext(configuration: configuration))
        }
    }

    @discardableResult
    package func query(_ sql: StaticString, _ bindings: [StoreValue]) throws -> [[StoreValue]] {
        let result = try run(PostgresQuery(unsafeSQL: translation(of: sql), binds: Self.binds(bindings)))
        return try result.rows.map { row in try row.map(Self.value) }
    }

    @discardableResult
    package func write(_ sql: StaticString, _ bindings: [StoreValue]) throws -> Int {
        try run(PostgresQuery(unsafeSQL: translation(of: sql), binds: Self.binds(bindings))).metadata.rows ?? 0
    }

    /// EXPLAIN's lines for `sql` with `bindings`, planned as if a sequential scan cost far more
    /// than any index: on the tests' small tables, a plan that still scans has no index to use.
    func queryPlan(_ sql: StaticString, _ bindings: [StoreValue]) throws -> [String] {
        try execute("SET enable_seqscan = off")
        defer { try? execute("RESET enable_seqscan") }
        let result = try run(PostgresQuery(unsafeSQL: "EXPLAIN " + translation(of: sql), binds: Self.binds(bindings)))
        return try result.rows.compactMap { row in try row.map(Self.value).first?.text }
    }

    private static func binds(_ bindings: [StoreValue]) -> PostgresBindings {
        var binds = PostgresBindings(capacity: bindings.count)
        for value in bindings {
            switch value {
            case .null: binds.appendNull()
            case .integer(let i): binds.append(i)
            case .text(let s): binds.append(Self.encoded(s))
            case .texts(let texts): binds.append(texts.map(Self.encoded))
            case .integers(let integers): binds.append(integers)
            }
        }
        return binds
    }

    /// One statement at a time: the extended protocol takes no scripts. The scripts hold no `;`
    /// but between statements.
    package func execute(_ sql: String) throws {
        for statement in sql.split(separator: ";") where !statement.allSatisfy(\.isWhitespace) {
            try run(PostgresQuery(unsafeSQL: String(statement)))
        }
    }

    package func transaction<T>(_ body: () throws -> T) throws -> T {
        _ = try connectIfNeeded()
        try run(PostgresQuery(unsafeSQL: "BEGIN"))
        do {
            let value = try body()
            try run(PostgresQuery(unsafeSQL: "COMMIT"))
            return value
        } catch {
            if let connection, !connection.isClosed { _ = try? run(PostgresQuery(unsafeSQL: "ROLLBACK")) }
            throw error
        }
    }

    @discardableResult
    private func run(_ query: PostgresQuery) throws -> PostgresQueryResult {
        guard let connection else { throw StoreError(message: "no connection to \(settings.summary)") }
        roundTrips += 1
        do {
            return try bounded(connection.query(query, logger: logger), within: Self.answerLimit)
        } catch {
            // Given up: replaced at the next transaction.
            if error is Unanswered { abandonConnection() }
            throw failed(error, doing: query.sql.prefix(40) + "…")
        }
    }

    /// How long a statement may go unanswered before the connection is given up: well beyond
    /// the lock timeout, so only a server that stopped answering reaches it.
    static let answerLimit = TimeAmount.seconds(30)

    private struct Unanswered: Error, CustomStringConvertible {
        let limit: TimeAmount
        var description: String { "no answer within \(limit.nanoseconds / 1_000_000_000) s" }
    }

    /// `future`'s value, waited for at most `limit`: a server killed at the wrong moment can
    /// leave a future that never completes, and the ledger's loop must not wait on it forever.
    private func bounded<T: Sendable>(_ future: EventLoopFuture<T>, within limit: TimeAmount) throws -> T {
        let answer = future.eventLoop.makePromise(of: T.self)
        future.cascade(to: answer)
        let timeout = future.eventLoop.scheduleTask(in: limit) { answer.fail(Unanswered(limit: limit)) }
        defer { timeout.cancel() }
        return try answer.futureResult.wait()
    }

    /// A failure that closed the connection leaves none: the next transaction opens a new one.
    private func failed(_ error: any Error, doing what: some StringProtocol) -> StoreError {
        if connection?.isClosed ?? true { connection = nil }
        return Self.storeError(error, doing: String(what))
    }

    /// The server's message and SQLSTATE; never its detail, which can quote stored values.
    private static func storeError(_ error: any Error, doing what: String) -> StoreError {
        guard let psql = error as? PSQLError else { return StoreError(message: "\(what): \(error)") }
        if let message = psql.serverInfo?[.message] {
            return StoreError(message: "\(what): \(message) (SQLSTATE \(psql.serverInfo?[.sqlState] ?? "?"))")
        }
        return StoreError(message: "\(what): \(psql.code)\(psql.underlying.map { ": \($0)" } ?? "")")
    }

    /// The shared SQL as PostgreSQL takes it: numbered placeholders, no index hints.
    private func translation(of sql: StaticString) -> String {
        let key = UnsafeRawPointer(sql.utf8Start)
        if let text = translated[key] { return text }
        let text = Self.translate(sql.description)
        translated[key] = text
        return text
    }

    static func translate(_ sql: String) -> String {
        var out = ""
        var number = 0, quoted = false
        // SQLite's planner hints go: PostgreSQL's planner chooses by statistics.
        let hint = Array(" INDEXED BY ")
        var characters = Array(sql)[...]
        while let character = characters.first {
            if !quoted, characters.starts(with: hint) {
                characters = characters.dropFirst(hint.count).drop { $0.isLetter || $0 == "_" }
                continue
            }
            characters = characters.dropFirst()
            if character == "'" { quoted.toggle() }
            if character == "?", !quoted {
                number += 1
                out += "$\(number)"
            } else {
                out.append(character)
            }
        }
        return out
    }

    private static func value(_ cell: PostgresCell) throws -> StoreValue {
        guard cell.bytes != nil else { return .null }
        switch cell.dataType {
        case .int2, .int4, .int8: return .integer(try cell.decode(Int64.self))
        case .bool: return .integer(try cell.decode(Bool.self) ? 1 : 0)
        default: return .text(decoded(try cell.decode(String.self)))
        }
    }

    /// PostgreSQL's text holds no NUL, and an order's key may (SQLite keeps it, byte for byte).
    /// So NUL is stored as U+FFFE "0", and U+FFFE itself as U+FFFE U+FFFE: a mapping that loses
    /// nothing and keeps two different texts different.
    static func encoded(_ text: String) -> String {
        guard text.utf8.contains(where: { $0 == 0 || $0 == 0xEF }) else { return text }
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\u{0}": out += "\u{FFFE}0"
            case "\u{FFFE}": out += "\u{FFFE}\u{FFFE}"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    static func decoded(_ text: String) -> String {
        guard text.utf8.contains(0xEF) else { return text }
        var out = ""
        var escaped = false
        for scalar in text.unicodeScalars {
            if escaped {
                out.unicodeScalars.append(scalar == "0" ? "\u{0}" : scalar)
                escaped = false
            } else if scalar == "\u{FFFE}" {
                escaped = true
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}

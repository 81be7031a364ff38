import Foundation
import Logging
import PaypipeCore
import TestSupport
import Testing

@testable import LedgerStage

/// The store's TLS modes against a real PostgreSQL server that takes TLS only, with a
/// certificate for `localhost` from a CA of the test's own (`.ci/postgres-tls`).
@Suite("Store TLS against a real PostgreSQL server", .serialized, .enabled(if: TestStores.postgres != nil, "runs with the PostgreSQL suite"))
struct StoreTLSTests {
    struct Server {
        let directory: String
        let port: Int
        var authority: String { directory + "/ca.pem" }
        var otherAuthority: String { directory + "/other-ca.pem" }

        static var script: String {
            var root = URL(fileURLWithPath: #filePath)
            while root.path != "/", !FileManager.default.fileExists(atPath: root.appendingPathComponent(".ci/postgres-tls").path) {
                root.deleteLastPathComponent()
            }
            return root.appendingPathComponent(".ci/postgres-tls").path
        }

        static func start() async throws -> Server {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("paypipe-tls-pg-\(UUID().uuidString.prefix(8))").path
            let port = try freeLoopbackPort()
            let status = await runToEnd(script, ["start", directory, "\(port)"], within: .seconds(120))
            try #require(status == 0, "could not start a TLS PostgreSQL server in \(directory)")
            return Server(directory: directory, port: port)
        }

        func stop() {
            _ = runToEndBlocking(Self.script, ["stop", directory])
            try? FileManager.default.removeItem(atPath: directory)
        }

        /// Opens a connection with `sslmode` (and `sslrootcert` when given) to `host`.
        func connect(host: String, mode: String, authority: String? = nil) throws {
            var url = "postgres://paypipe@\(host):\(port)/paypipe?sslmode=\(mode)"
            if let authority { url += "&sslrootcert=\(authority)" }
            let settings = try PostgresSettings(url: url, at: "test")
            var logger = Logger(label: "store-tls")
            logger.logLevel = .critical
            let database = try PostgresDatabase(settings: settings, logger: logger)
            #expect(try database.query("SELECT 1", []) == [[.integer(1)]])
        }
    }

    @Test func verifyFullConnectsOnlyWithTheRightAuthorityAndHostName() async throws {
        let server = try await Server.start()
        defer { server.stop() }
        // The certificate chains to the CA file and names the host connected to.
        try server.connect(host: "localhost", mode: "verify-full", authority: server.authority)
        // A CA that did not sign it.
        #expect { try server.connect(host: "localhost", mode: "verify-full", authority: server.otherAuthority) } throws: { error in
            "\(error)".contains("no usable PostgreSQL server")
        }
        // The right CA, but a host the certificate does not name.
        #expect { try server.connect(host: "127.0.0.1", mode: "verify-full", authority: server.authority) } throws: { error in
            "\(error)".contains("no usable PostgreSQL server")
        }
        // Without a CA file only the system's roots count, and none of them signed it.
        #expect { try server.connect(host: "localhost", mode: "verify-full") } throws: { error in
            "\(error)".contains("no usable PostgreSQL server")
        }
    }

    @Test func verifyCAChecksTheChainButNotTheName() async throws {
        let server = try await Server.start()
        defer { server.stop() }
        try server.connect(host: "127.0.0.1", mode: "verify-ca", authority: server.authority)
        #expect { try server.connect(host: "127.0.0.1", mode: "verify-ca", authority: server.otherAuthority) } throws: { error in
            "\(error)".contains("no usable PostgreSQL server")
        }
    }

    /// `require` encrypts without checking; the server takes nothing else (`disable` is refused).
    @Test func requireStillConnectsWithoutACheck() async throws {
        let server = try await Server.start()
        defer { server.stop() }
        try server.connect(host: "127.0.0.1", mode: "require")
        #expect { try server.connect(host: "127.0.0.1", mode: "disable") } throws: { error in
            "\(error)".contains("no usable PostgreSQL server")
        }
    }
}

import ArgumentParser
import Connectors
import FoundationEssentials
import PaypipeCore
import StageRuntime
import ZeroMQ

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `paypipe keys`: CURVE key pairs for the internal links and for upstream clients.
struct KeysCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keys",
        abstract: "CURVE keys for the internal links (the config's `curve` section).",
        subcommands: [Generate.self, Rotate.self])

    init() {}

    struct Generate: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write a key pair for every role and print the config's `curve` section.",
            discussion: """
                Writes <role>.secret (mode 0600) and <role>.public into --dir for the roles \
                \(CurveConfig.Role.allCases.map(\.rawValue).joined(separator: ", ")). Give each process only its own \
                role's .secret file; the printed section names them as file: secrets. Each --upstream NAME adds a \
                key pair for one upstream order system (upstream-NAME.secret, upstream-NAME.public) and its entry \
                in `curve.upstream`, which turns on CURVE for intake, outcomes and replay. Each --admin NAME adds an \
                operator's key pair (admin-NAME.secret, admin-NAME.public) and its entry in `curve.admins`, the keys \
                the admin endpoint admits (paypipe order, paypipe orders).
                """)

        @Option(help: "Directory for the key files (created if missing).") var dir = "curve-keys"
        @Option(
            help:
                "Directory the config names for the secret files, e.g. /run/secrets when they are mounted there; default: --dir as an absolute path.")
        var secretsPath: String?
        @Option(help: "An upstream order system to make a client key pair for (repeatable).") var upstream: [String] = []
        @Option(help: "An operator to make a key pair for the admin endpoint for (repeatable).") var admin: [String] = []
        @Flag(help: "Replace key files that already exist.") var force = false

        func run() throws {
            let manager = FileManager.default
            try manager.createDirectory(atPath: dir, withIntermediateDirectories: true)
            let absolute = URL(fileURLWithPath: dir).standardizedFileURL.path
            let named = secretsPath ?? absolute
            for name in upstream + admin where !CurveConfig.isUpstreamName(name) {
                StageProcess.fail("\(name.prefix(64)): a name is 1-64 characters of [A-Za-z0-9._-]")
            }
            var lines: [String] = []
            for role in CurveConfig.Role.allCases {
                let pair = try writeKeyPair(role.rawValue)
                let reference = "file:" + Self.file(named, "\(role.rawValue).secret")
                let padding = String(repeating: " ", count: 10 - role.rawValue.count)
                lines.append(#"    "\#(role.rawValue)":\#(padding){ "publicKey": "\#(pair.publicKey)", "secretKey": "\#(reference)" }"#)
            }
            var clients: [String] = []
            for name in upstream {
                let pair = try writeKeyPair("upstream-" + name)
                clients.append(#"      { "name": "\#(name)", "publicKey": "\#(pair.publicKey)" }"#)
            }
            if !clients.isEmpty { lines.append("    \"upstream\": [\n" + clients.joined(separator: ",\n") + "\n    ]") }
            var operators: [String] = []
            for name in admin {
                let pair = try writeKeyPair("admin-" + name)
                operators.append(#"      { "name": "\#(name)", "publicKey": "\#(pair.publicKey)" }"#)
            }
            if !operators.isEmpty { lines.append("    \"admins\": [\n" + operators.joined(separator: ",\n") + "\n    ]") }
            StageProcess.printLine("\"curve\": {\n" + lines.joined(separator: ",\n") + "\n}")
        }

        func writeKeyPair(_ stem: String) throws -> ZMQCurveKeyPair { try Self.writeKeyPair(stem, in: dir, force: force) }

        /// Writes `<stem>.secret` (created with mode 0600, never readable by others even for a
        /// moment) and `<stem>.public`.
        static func writeKeyPair(_ stem: String, in dir: String, force: Bool) throws -> ZMQCurveKeyPair {
            let secretFile = Self.file(dir, "\(stem).secret")
            let publicFile = Self.file(dir, "\(stem).public")
            let manager = FileManager.default
            if manager.fileExists(atPath: secretFile) || manager.fileExists(atPath: publicFile) {
                guard force else { StageProcess.fail("\(secretFile) or \(publicFile) exists: pass --force to replace the keys") }
                unlink(secretFile)
                unlink(publicFile)
            }
            try manager.createDirectory(atPath: dir, withIntermediateDirectories: true)
            let pair = try ZMQCurveKeyPair.generate()
            guard Self.create(secretFile, pair.secretKey + "\n", mode: 0o600), Self.create(publicFile, pair.publicKey + "\n", mode: 0o644) else {
                StageProcess.fail("cannot write the key files in \(dir): \(String(cString: strerror(errno)))")
            }
            return pair
        }

        /// A new file with `mode` from the moment it exists (the umask can only narrow it).
        static func create(_ path: String, _ text: String, mode: mode_t) -> Bool {
            let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
            guard fd >= 0 else { return false }
            defer { close(fd) }
            let bytes = Array(text.utf8)
            return bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } == bytes.count && fsync(fd) == 0
        }

        /// `name` inside `directory`, joined as NSString's appendingPathComponent joined them
        /// (an empty directory adds nothing), without Foundation.
        static func file(_ directory: String, _ name: String) -> String {
            directory.isEmpty || directory.hasSuffix("/") ? directory + name : directory + "/" + name
        }
    }

    struct Rotate: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write the next key pair for one role and print the config line that starts its rotation.",
            discussion: """
                Writes <role>.next.secret (mode 0600) and <role>.next.public into --dir and prints the role's \
                `nextPublicKey`. With it in the config the ledger admits the role holding either key pair, and \
                every client reaches a ledger holding either; docs/security.md, "Rotating a key", gives the steps.
                """)

        @Argument(help: "The role whose key pair to replace: \(CurveConfig.Role.allCases.map(\.rawValue).joined(separator: ", ")).")
        var role: String
        @Option(help: "Directory for the key files (created if missing).") var dir = "curve-keys"
        @Flag(help: "Replace next key files that already exist.") var force = false

        func run() throws {
            guard let role = CurveConfig.Role(rawValue: role) else {
                StageProcess.fail("\(role.prefix(32)): a role is one of \(CurveConfig.Role.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            let pair = try Generate.writeKeyPair("\(role.rawValue).next", in: dir, force: force)
            StageProcess.printLine(#"curve.\#(role.rawValue).nextPublicKey: "\#(pair.publicKey)""#)
        }
    }
}

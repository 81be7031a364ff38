import ArgumentParser
import FoundationEssentials
import PaypipeCore
import ZeroMQ

/// `paypipe keys`: lives here rather than in Sources/paypipe because an executable whose
/// main.swift holds `@main` must be a single file.
package struct KeysCommand: ParsableCommand {
    package static let configuration = CommandConfiguration(
        commandName: "keys",
        abstract: "CURVE keys for the internal links (the config's `curve` section).",
        subcommands: [Generate.self])

    package init() {}

    struct Generate: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write a key pair for every role and print the config's `curve` section.",
            discussion: """
                Writes <role>.secret (mode 0600) and <role>.public into --dir for the roles \
                \(CurveConfig.Role.allCases.map(\.rawValue).joined(separator: ", ")). Give each process only its own \
                role's .secret file; the printed section names them as file: secrets.
                """)

        @Option(help: "Directory for the key files (created if missing).") var dir = "curve-keys"
        @Option(help: "Directory the config names for the secret files, e.g. /run/secrets when they are mounted there; default: --dir as an absolute path.")
        var secretsPath: String?
        @Flag(help: "Replace key files that already exist.") var force = false

        func run() throws {
            let manager = FileManager.default
            try manager.createDirectory(atPath: dir, withIntermediateDirectories: true)
            let absolute = URL(fileURLWithPath: dir).standardizedFileURL.path
            let named = secretsPath ?? absolute
            var lines: [String] = []
            for role in CurveConfig.Role.allCases {
                let secretFile = Self.file(dir, "\(role.rawValue).secret")
                let publicFile = Self.file(dir, "\(role.rawValue).public")
                if !force, manager.fileExists(atPath: secretFile) || manager.fileExists(atPath: publicFile) {
                    StageProcess.fail("\(secretFile) or \(publicFile) exists: pass --force to replace the keys")
                }
                let pair = try ZMQCurveKeyPair.generate()
                guard manager.createFile(atPath: secretFile, contents: Data((pair.secretKey + "\n").utf8), attributes: [.posixPermissions: 0o600]),
                    manager.createFile(atPath: publicFile, contents: Data((pair.publicKey + "\n").utf8), attributes: [.posixPermissions: 0o644])
                else { StageProcess.fail("cannot write the key files in \(dir)") }
                // createFile keeps an existing file's mode: make sure a replaced secret is private too.
                try manager.setAttributes([.posixPermissions: 0o600], ofItemAtPath: secretFile)
                let reference = "file:" + Self.file(named, "\(role.rawValue).secret")
                let padding = String(repeating: " ", count: 10 - role.rawValue.count)
                lines.append(#"    "\#(role.rawValue)":\#(padding){ "publicKey": "\#(pair.publicKey)", "secretKey": "\#(reference)" }"#)
            }
            StageProcess.printLine("\"curve\": {\n" + lines.joined(separator: ",\n") + "\n}")
        }

        /// `name` inside `directory`, joined as NSString's appendingPathComponent joined them
        /// (an empty directory adds nothing), without Foundation.
        static func file(_ directory: String, _ name: String) -> String {
            directory.isEmpty || directory.hasSuffix("/") ? directory + name : directory + "/" + name
        }
    }
}

import Connectors
import PaypipeCore
import StageRuntime
import ZeroMQ

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An upstream client's CURVE key pair, as `paypipe keys generate --upstream NAME` writes it
/// (`<path>.public`, `<path>.secret`), for the operator's own `paypipe send` and `paypipe
/// outcomes` against a ledger whose config lists upstream clients.
struct UpstreamKey: Sendable {
    let publicKey: String
    let secretKey: String

    /// Reads `<path>.public` and `<path>.secret`; the secret file must be its owner's alone.
    static func load(_ path: String) throws(ConfigError) -> UpstreamKey {
        var status = stat()
        if stat(path + ".secret", &status) == 0, UInt32(status.st_mode) & 0o077 != 0 {
            throw ConfigError(
                path: path + ".secret", reason: "is readable by others (mode \(String(UInt32(status.st_mode) & 0o777, radix: 8))): chmod 600 it")
        }
        return UpstreamKey(publicKey: try readKey(path + ".public"), secretKey: try readKey(path + ".secret"))
    }

    /// One key file: a 40-character Z85 key, a trailing newline allowed.
    static func readKey(_ file: String) throws(ConfigError) -> String {
        guard var bytes = readWholeFile(file) else { throw ConfigError(path: file, reason: "cannot read the key file") }
        while let last = bytes.last, last == UInt8(ascii: "\n") || last == UInt8(ascii: "\r") { bytes.removeLast() }
        let text = String(decoding: bytes, as: UTF8.self)
        guard CurveConfig.isZ85Key(text) else { throw ConfigError(path: file, reason: "is not a 40-character Z85 CURVE key") }
        return text
    }

    /// `options` as a CURVE client of the ledger named in `config`, with the key pair at `path`;
    /// unchanged without a key. Ends the command with a one-line reason on a bad key or config.
    static func clientOptions(_ options: ZMQSocketOptions, keyPath: String?, configPath: String?) -> ZMQSocketOptions {
        guard let keyPath else { return options }
        let key: UpstreamKey
        do {
            key = try load(keyPath)
        } catch {
            StageProcess.fail("bad upstream key: \(error)")
        }
        guard let config = configuredConfig(configPath), config.curve != nil else {
            StageProcess.fail("--upstream-key needs --config (or PAYPIPE_CONFIG) with a curve section: the ledger's public key is there")
        }
        return StageLinks.upstreamClient(options, config: config, key: (key.publicKey, key.secretKey))
    }
}

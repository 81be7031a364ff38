import ArgumentParser
import CleengEmulation
import Connectors
import Emulators
import Foundation
import Logging
import NetsEasyEmulation
import PaypipeCore
import PhonePeEmulation
import Sandbox

/// `paypipe-sandbox`: wires command-line flags to `SandboxServer` and the standard emulators
/// (all behaviour lives in the Sandbox library and each provider's emulator).
struct SandboxCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "paypipe-sandbox",
        abstract: "Emulates the Trust Payments, Nets, PhonePe, Cleeng and Viva APIs and callbacks over HTTP.",
        discussion: """
            Prints exactly one line to stdout once listening: "paypipe-sandbox listening on http://HOST:PORT". \
            Logs go to stderr. SIGTERM/SIGINT stop it gracefully.
            """, version: PaypipeVersion.current)

    @Option(help: "The pipeline's config file (docs/configuration.md); the sandbox checks requests against its credentials.")
    var config: String

    @Option(help: "Interface to listen on.")
    var host = "127.0.0.1"

    @Option(help: "Port to listen on (0 = any free port; see the stdout line).")
    var port = 9100

    @Option(name: .customLong("latency-ms"), help: "Delay before answering each provider request, in milliseconds.")
    var latencyMilliseconds = 0

    @Option(name: .customLong("error-rate"), help: "Fraction (0.0-1.0) of provider requests answered HTTP 500 without processing.")
    var errorRate = 0.0

    @Option(name: .customLong("error-seed"), help: "Seed for choosing which requests fail.")
    var errorSeed: UInt64 = 0x5EED

    @Option(name: .customLong("phonepe-callback-delay-ms"), help: "Delay before the PhonePe S2S callback, in milliseconds.")
    var phonePeCallbackDelayMilliseconds = 1000

    @Option(
        name: .customLong("phonepe-callback-variant"),
        help: "How the PhonePe S2S callback is made: genuine, wrong-checksum or wrong-amount.")
    var phonePeCallbackVariant: CallbackVariant = .genuine

    @Option(name: .customLong("cleeng-grant-after-ms"), help: "Time after a Cleeng receipt until access is granted (-1 = never).")
    var cleengGrantAfterMilliseconds = 10000

    @Option(
        name: .customLong("cleeng-grant-on-poll"),
        help: "Grant Cleeng access from this getAccessStatus call on, per customer (overrides --cleeng-grant-after-ms).")
    var cleengGrantOnPoll: Int?

    @Option(
        name: .customLong("nets-webhook-variant"),
        help: "How the Nets checkout webhooks a payment registered are made: genuine, wrong-authorization or wrong-amount.")
    var netsWebhookVariant: String = "genuine"

    @Option(
        name: .customLong("nets-complete-checkout-after-ms"),
        help: "Time after a Nets create until the customer completes the hosted page (-1 = never).")
    var netsCompleteCheckoutAfterMilliseconds = 2000

    @Option(
        name: .customLong("outbound-attempts"),
        help:
            "How often a callback or webhook is delivered before it is dropped (providers retry for hours; a load test needs more than the default).")
    var outboundAttempts = 4

    @Option(
        name: .customLong("provider-option"),
        help: "A setting of an emulator that has no flag of its own, as <provider>.<name>=<value> (repeatable).")
    var providerOptions: [String] = []

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel = "info"

    enum CallbackVariant: String, ExpressibleByArgument, CaseIterable {
        case genuine
        case wrongChecksum = "wrong-checksum"
        case wrongAmount = "wrong-amount"

        var sandboxVariant: PhonePeSandboxCallbackVariant {
            switch self {
            case .genuine: .genuine
            case .wrongChecksum: .wrongChecksum
            case .wrongAmount: .wrongAmount
            }
        }
    }

    func run() async throws { try await serve() }

    func serve() async throws {
        let level = Logger.Level(rawValue: logLevel) ?? .info
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "paypipe-sandbox")

        let pipelineConfig: PaypipeConfig
        do {
            pipelineConfig = try PaypipeConfig.load(path: config)
        } catch {
            Self.fail("bad config: \(error.description)")
        }
        let settings = SandboxConfiguration(
            host: host, port: port, latencyMilliseconds: latencyMilliseconds, errorRate: errorRate, errorSeed: errorSeed,
            outboundAttempts: max(1, outboundAttempts),
            providerOptions: Dictionary(
                providerOptions.map { option in
                    let parts = option.split(separator: "=", maxSplits: 1)
                    guard parts.count == 2, parts[0].contains(".") else { Self.fail("--provider-option must be <provider>.<name>=<value>") }
                    return (String(parts[0]), String(parts[1]))
                }, uniquingKeysWith: { _, last in last })
        ).with { settings in
            settings.phonePe.callbackDelayMilliseconds = phonePeCallbackDelayMilliseconds
            settings.phonePe.callbackVariant = phonePeCallbackVariant.sandboxVariant
            settings.cleeng.grantAfterMilliseconds = cleengGrantAfterMilliseconds < 0 ? nil : cleengGrantAfterMilliseconds
            settings.cleeng.grantOnPoll = cleengGrantOnPoll
            settings.nets.webhookVariant =
                NetsWebhookVariant(rawValue: netsWebhookVariant)
                ?? { Self.fail("--nets-webhook-variant must be genuine, wrong-authorization or wrong-amount") }()
            settings.nets.completeCheckoutAfterMilliseconds = netsCompleteCheckoutAfterMilliseconds < 0 ? nil : netsCompleteCheckoutAfterMilliseconds
        }
        let server: SandboxServer
        do {
            server = try SandboxServer(configuration: settings, config: pipelineConfig, logger: logger)
        } catch {
            Self.fail(error.description)
        }
        let host = host
        do {
            try await server.run(handleSignals: true) { port in
                // FileHandle writes straight to the descriptor: nothing is left in a buffer for
                // the launcher that waits for this line.
                FileHandle.standardOutput.write(Data("paypipe-sandbox listening on http://\(host):\(port)\n".utf8))
            }
        } catch {
            Self.fail("server stopped: \(error)")
        }
    }

    static func fail(_ reason: String) -> Never {
        FileHandle.standardError.write(Data("paypipe-sandbox: \(reason.split(separator: "\n").first ?? "")\n".utf8))
        Foundation.exit(1)
    }
}

// Parsed and run by hand: in main.swift `SandboxCommand.main()` resolves to the synchronous
// entry point, which refuses async commands.
do {
    let command = try SandboxCommand.parse()
    try await command.serve()
} catch {
    SandboxCommand.exit(withError: error)
}

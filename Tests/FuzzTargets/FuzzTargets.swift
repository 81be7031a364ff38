import Connectors
import HTTPTransport
import LedgerStage
import NIOCore
import PaypipeCore
import SignerStage
import StageRuntime
import StageWire
import SubmitterStage

/// What paypipe reads from outside a process, each as one function of arbitrary bytes, for
/// libFuzzer (`Tests/Fuzz/run`) and for the corpus replay in the tests. Each target either
/// returns or stops the process: a trap (an index out of range, a force-unwrap, an overflow)
/// is a worker that crashes on bad input, and an `Invariant` failure is a stage that wrote
/// something the next stage cannot read.
package enum FuzzTarget: String, CaseIterable, Sendable {
    /// Any bytes as a JSON document: parsed, and what parses writes back to the same value.
    case json
    /// Standard and URL-safe Base64: what decodes encodes back to the same bytes.
    case base64
    /// Any bytes as an upstream intake frame, through the real ledger core and store, the
    /// signer and the submitter: every frame a stage emits must be readable by the next.
    case pipeline
    /// Any bytes as each internal frame (dispatch, work, outcome, ledger RPC, replay request),
    /// and as a stage's outcome into the ledger's store.
    case frames
    /// Any bytes as a provider's HTTP/1.1 response on the wire, in chunks.
    case http
    /// Any bytes as the body of a provider's answer (with a status from the first bytes) to
    /// each example order's signed request.
    case providerResponse = "provider-response"
    /// Any bytes as a callback to each provider's routes (headers, then a blank line, then the
    /// body), through the callback validator.
    case callbacks
    /// Any bytes as what a provider signs in a callback to each route, signed by the harness
    /// with the demo merchant's secrets: what the validator does once it believes a callback.
    case authenticCallbacks = "authentic-callbacks"
    /// Any bytes (after a byte for the HTTP status) as Cleeng's answer to every getAccessStatus
    /// poll of a receipt, from its acceptance to its end: the receipt must end by its deadline.
    case pollAnswers = "poll-answers"
    /// Any bytes as the config file, read without the process's environment or files: a bad
    /// config is an error that names its key, never a crash.
    case config
    /// Traps on the bytes `canary` and nothing else: proves that a crash in a target is caught.
    case canary

    package func run(_ input: [UInt8]) {
        switch self {
        case .json: Self.json(input)
        case .base64: Self.base64(input)
        case .pipeline: FuzzWorld.shared.pipeline(input)
        case .frames: FuzzWorld.shared.frames(input)
        case .http: Self.http(input)
        case .providerResponse: FuzzWorld.shared.providerResponse(input)
        case .callbacks: FuzzWorld.shared.callback(input)
        case .authenticCallbacks: FuzzWorld.shared.authenticCallback(input)
        case .pollAnswers: FuzzWorld.shared.pollAnswers(input)
        case .config: _ = try? PaypipeConfig.parse(input, sources: Self.noEnvironment)
        case .canary: if input == Array("canary".utf8) { Invariant.fail("the canary input", input) }
        }
    }

    /// Inputs that reach deep on their own: the example orders, a provider answer, a callback
    /// of each route's shape. The fuzzer mutates from these.
    package var seeds: [[UInt8]] {
        let orders = FuzzWorld.exampleOrders
        switch self {
        case .json, .pipeline: return orders
        case .canary: return [Array("not a canary".utf8)]
        case .base64: return [Array("ZGVtby1yZWNlaXB0LWRhdGE=".utf8), Array("_-8AAQ".utf8)]
        case .frames: return FuzzWorld.shared.internalFrames()
        case .http:
            return [
                Array("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 13\r\n\r\n{\"ok\":\"yes\"}\n".utf8),
                Array("HTTP/1.1 502 Bad Gateway\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n0\r\n\r\n".utf8),
                Array("HTTP/1.0 200 OK\r\n\r\nuntil close".utf8),
            ]
        case .providerResponse:
            return (0..<FuzzWorld.shared.works.count).map { index in
                [UInt8(index), 0]
                    + Array(#"{"success":true,"code":"SUCCESS","data":{"redirectType":"INTENT","redirectURL":"ppe://mandate?x=1"}}"#.utf8)
            }
        case .authenticCallbacks: return FuzzWorld.shared.authenticCallbackSeeds()
        case .pollAnswers: return FuzzWorld.pollAnswerSeeds
        case .config:
            return [
                DemoConfig.text(sandboxURL: "http://127.0.0.1:9"),
                DemoConfig.text(
                    sandboxURL: "http://127.0.0.1:9", endpoints: ["intake": "tcp://127.0.0.1:5550"], timers: ["cleengPollIntervalMs": 1000],
                    extraMerchants: [
                        "viva-unconfirmed": ["viva": ["merchantKey": "K", "appId": "a", "callback": "c", "acceptUnconfirmedCallbacks": true]]
                    ],
                    leavingOut: ["nets.webhookURL"]),
                #"{"merchants":{"m":{"nets":{"baseURL":"https://test.api.dibspayment.eu","secretKey":"env:NETS_KEY","webhookAuthorization":"file:/run/secrets/nets"}}}}"#,
            ].map { Array($0.utf8) }
        case .callbacks:
            return (0..<FuzzWorld.shared.routes.count).map { index in
                [UInt8(index)] + Array("Content-Type: application/json\nX-VERIFY: 00###1\nAuthorization: x\n\n{\"response\":\"e30=\"}".utf8)
            }
        }
    }

    /// What each seed came to, one line each: for authentic-callbacks the route and the
    /// validator's answer (`ROUTE STATUS RESULT`), for poll-answers the receipt's outcome
    /// (`STATUS [ERROR CODE]`). A harness that stopped reaching that far would fuzz nothing
    /// past it, so the tests check these. Empty for the other targets.
    package func seedAnswers() -> [String] {
        switch self {
        case .authenticCallbacks:
            return seeds.compactMap { seed in
                FuzzWorld.shared.authenticCallback(seed).map { "\($0.route.label) \($0.answer.status) \($0.answer.result)" }
            }
        case .pollAnswers:
            return seeds.map { seed in
                guard let outcome = FuzzWorld.shared.pollAnswers(seed) else { return "none" }
                return ([outcome.status.rawValue] + (outcome.error.map { [$0.code] } ?? [])).joined(separator: " ")
            }
        default:
            return []
        }
    }

    /// The environment and files a fuzzed config may name (`env:`, `file:`) are never read.
    static let noEnvironment = PaypipeConfig.Sources(environment: { _ in nil }, readFile: { _ in nil })

    static func json(_ input: [UInt8]) {
        guard let value = try? JSONValue.parse(input) else { return }
        let written = value.bytes
        guard let again = try? JSONValue.parse(written) else { Invariant.fail("JSON written from a parsed document does not parse", written) }
        guard again == value else { Invariant.fail("JSON written from a parsed document parses to another value", written) }
    }

    static func base64(_ input: [UInt8]) {
        for variant in [Base64.Variant.standard, .url] {
            guard let decoded = Base64.decode(input, variant) else { continue }
            var encoded: [UInt8] = []
            Base64.encode(decoded, variant, into: &encoded)
            guard Base64.decode(encoded, variant) == decoded else { Invariant.fail("Base64 does not decode what it encoded", encoded) }
        }
    }

    /// The first byte sets the chunk size, so a response split anywhere is parsed as it arrives.
    static func http(_ input: [UInt8]) {
        guard let first = input.first else { return }
        let chunk = Int(first % 64) + 1
        var parser = HTTP1ResponseParser(maxBodyBytes: 1 << 16)
        var rest = input.dropFirst()
        do throws(HTTP1ResponseParser.Failure) {
            while !rest.isEmpty {
                var buffer = ByteBuffer(bytes: rest.prefix(chunk))
                rest = rest.dropFirst(chunk)
                if try parser.parse(&buffer) != nil { return }
            }
            _ = try parser.parseEnd()
        } catch {
            return
        }
    }
}

/// A fuzz target's broken promise: stops the process with a message libFuzzer reports as a crash.
enum Invariant {
    static func fail(_ what: String, _ bytes: [UInt8]) -> Never {
        fatalError("\(what): \(String(decoding: bytes.prefix(400), as: UTF8.self))")
    }
}

import CallbacksStage
import Cleeng
import Connectors
import Glibc
import LedgerStage
import PaypipeCore
import PollerStage
import SignerStage
import StageRuntime
import StageWire
import SubmitterStage

/// The stages' cores as the fuzz targets drive them: the demo config's connectors, a ledger
/// core on a real SQLite store (in a directory of its own, removed at exit), the signer, and
/// each example order signed into work. libFuzzer and the corpus replay call targets from one
/// thread at a time, which is what makes the unchecked state below safe.
final class FuzzWorld: @unchecked Sendable {
    static let shared = FuzzWorld()

    static let exampleOrders: [[UInt8]] = exampleOrderLines.split(separator: "\n").map { Array($0.utf8) }

    let registry: ConnectorRegistry
    let signer: SignerCore
    var ledger: LedgerCore
    /// Each example order's signed work, as the submitter reads it.
    let works: [SubmitWork]
    let routes: [CallbackRoute]
    let validator: CallbackValidator
    /// The provider the callback validator asks (Viva's confirmation): it answers only what the
    /// authentic-callbacks target sets.
    let provider = FuzzProvider()
    /// The demo merchant, whose secrets sign what the authentic-callbacks target writes.
    let merchant: MerchantConfig
    /// The Cleeng poller's core, the example receipt order it polls, and its own clock (an
    /// hour on per input, so no receipt's schedule reaches into the next input's).
    var poller: PollerCore
    let pollPolicy: PollingPolicy
    let receiptOrder: Order
    var pollClock: Int64 = 1_795_237_200_000
    /// The ledger's clock: one millisecond per step, so its timers never decide what a frame does.
    var now: Int64 = 1_795_237_200_000
    static let storeDirectory: String = {
        let base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp"
        return "\(base)/paypipe-fuzz-\(getpid())"
    }()

    var catalog: OrderCatalog { registry.catalog }

    private init() {
        let config: PaypipeConfig
        do {
            config = try PaypipeConfig.parse(Array(DemoConfig.text(sandboxURL: "http://127.0.0.1:9").utf8))
        } catch {
            fatalError("the demo config does not parse: \(error)")
        }
        let registry = waitingFor { await StandardConnectors.registry(config: config) }
        self.registry = registry
        let signer = SignerCore(registry: registry)
        self.signer = signer
        mkdir(Self.storeDirectory, 0o700)
        atexit { FuzzWorld.removeStore() }
        do {
            ledger = LedgerCore(store: try LedgerStore(path: Self.storeDirectory + "/ledger.sqlite"), registry: registry)
        } catch {
            fatalError("the fuzz ledger's store does not open: \(error)")
        }
        let orders = Self.exampleOrders.compactMap { frame -> (Order, String)? in
            guard case .order(let order) = Order.decode(frame: frame, catalog: registry.catalog) else { return nil }
            return (order, String(decoding: frame, as: UTF8.self))
        }
        works = orders.compactMap { order, _ in
            guard case .submit(let work) = signer.sign(order, acceptedAt: 1_795_237_200_000, nowSeconds: 1_795_237_200) else { return nil }
            return work
        }
        routes = registry.connectors.flatMap(\.callbackRoutes)
        validator = CallbackValidator(directory: AnyOrderDirectory(orders: orders), catalog: registry.catalog, http: provider)
        guard let merchant = config.merchants["default"] else { fatalError("the demo config has no default merchant") }
        self.merchant = merchant
        poller = PollerCore(registry: registry, timers: config.timers)
        guard let policy = registry.connector(for: .cleeng)?.pendingPolling?.pollingPolicy(timers: config.timers) else {
            fatalError("cleeng is not polled")
        }
        pollPolicy = policy
        guard let receiptOrder = orders.first(where: { $0.0.operation == .appleReceipt })?.0 else {
            fatalError("examples/orders.jsonl has no appleReceipt order")
        }
        self.receiptOrder = receiptOrder
    }

    static func removeStore() {
        for name in ["ledger.sqlite", "ledger.sqlite-wal", "ledger.sqlite-shm"] { unlink(storeDirectory + "/" + name) }
        rmdir(storeDirectory)
    }

    // MARK: pipeline

    func pipeline(_ input: [UInt8]) {
        for effect in commit([.intake(ledger.decoder.intake([input]))], input) { follow(effect, from: input) }
    }

    private func follow(_ effect: LedgerCore.Effect, from input: [UInt8]) {
        switch effect {
        case .drop: break
        case .refuse(let reason): Invariant.fail("the ledger refused an outcome the pipeline's own stages wrote (\(reason))", input)
        case .emit(let bytes): readOutcome(bytes)
        case .poll(let bytes):
            guard (try? DispatchFrame.decode(bytes, catalog: catalog)) != nil else {
                Invariant.fail("a poll frame the ledger wrote does not decode", bytes)
            }
        case .dispatch(let bytes):
            guard let dispatch = try? DispatchFrame.decode(bytes, catalog: catalog) else {
                Invariant.fail("a dispatch frame the ledger wrote does not decode", bytes)
            }
            switch signer.sign(dispatch, nowSeconds: now / 1000) {
            case .submit(let work):
                let frame = work.frame(orderJSON: DispatchFrame.orderJSON(in: bytes))
                guard let read = try? SubmitWork.decode(frame, catalog: catalog) else {
                    Invariant.fail("a work frame the signer wrote does not decode", frame)
                }
                submit(read, fromPipeline: true)
            case .outcome(let outcome):
                let ticket = DispatchTicket(generation: dispatch.generation, token: dispatch.token)
                record(written: StageResult(answering: .init(dispatch.purpose), ticket: ticket, outcome: outcome))
            case .nothing: break
            }
        }
    }

    /// Claims the work and runs its submission against a provider that answers 503 (retried,
    /// then ended), as a submitter would. Work the pipeline itself dispatched must have its
    /// outcome taken; work made of the fuzzer's bytes may name any order, or none.
    private func submit(_ work: SubmitWork, fromPipeline: Bool = false) {
        if let lease = work.lease { _ = commit([.request(.claim([lease]))], work.frame) }
        guard let connector = registry.connector(for: work.order.provider) else {
            Invariant.fail("signed work for a provider with no connector", work.frame)
        }
        var submission = Submission(work: work, connector: connector)
        var action = submission.start()
        for _ in 0..<8 {
            guard case .send = action else { break }
            action = submission.receive(HTTPResponseSpec(status: 503, body: Array("unavailable".utf8)), jitter: 0)
        }
        if case .send = action { action = submission.fail(.mayHaveBeenSent("fuzz: no answer"), jitter: 0) }
        if case .finish(let outcome) = action {
            record(written: StageResult(answering: .init(work.purpose), ticket: work.ticket, outcome: outcome), mustBeTaken: fromPipeline)
        }
    }

    /// A result a stage wrote, which must read back, into the ledger (which must take it, when
    /// it answers what the pipeline dispatched).
    private func record(written result: StageResult, mustBeTaken: Bool = true) {
        let frame = result.frame
        guard let (_, _, bytes, _) = StageResult.decode(frame) else { Invariant.fail("a result frame a stage wrote does not decode", frame) }
        readOutcome(Array(bytes))
        for effect in commit([.results(ledger.decoder.results([(frame, nil)]))], frame) {
            switch effect {
            case .emit(let emitted): readOutcome(emitted)
            case .refuse(let reason) where mustBeTaken:
                Invariant.fail("the ledger refused an outcome the pipeline's own stages wrote (\(reason))", frame)
            default: break
            }
        }
    }

    /// Any bytes as a stage's result frame into the ledger, and what the ledger emits for it.
    private func record(_ bytes: [UInt8]) {
        for effect in commit([.results(ledger.decoder.results([(bytes, nil)]))], bytes) {
            if case .emit(let emitted) = effect { readOutcome(emitted) }
        }
    }

    func readOutcome(_ bytes: [UInt8]) {
        guard (try? Outcome.parse(bytes)) != nil else { Invariant.fail("an outcome a stage wrote does not parse", bytes) }
    }

    /// A store error on one frame would stop the ledger's loop on every retry of it.
    @discardableResult
    private func commit(_ work: [LedgerCore.Work], _ input: [UInt8]) -> [LedgerCore.Effect] {
        now += 1
        do {
            return try ledger.commit(work, now: now).flatMap(\.effects)
        } catch {
            Invariant.fail("the ledger's store failed (\(error)) on", input)
        }
    }

    // MARK: frames

    /// The first byte picks the frame's kind; the rest is the frame.
    func frames(_ input: [UInt8]) {
        guard let kind = input.first else { return }
        let frame = Array(input.dropFirst())
        switch kind % 7 {
        case 0: _ = try? DispatchFrame.decode(frame, catalog: catalog)
        case 1:
            if let work = try? SubmitWork.decode(frame, catalog: catalog) { submit(work) }
        case 2:
            if let outcome = try? Outcome.parse(frame) { readOutcome(outcome.bytes) }
        case 3:
            if let request = try? LedgerRequest.parse(frame) { _ = commit([.request(request)], frame) }
        case 4:
            for request in [
                LedgerRequest.lookup(OrderKey(merchant: "demo", orderId: "x")),
                .settle(OrderKey(merchant: "demo", orderId: "x"), event: nil, outcome: nil),
                .resumePolls, .claim([]),
            ] {
                _ = try? LedgerReply.parse(frame, for: request)
            }
        case 5:
            _ = try? OutcomeReplay.Request.parse(frame)
            _ = OutcomeReplay.Trailer.parse(frame)
        default: record(frame)
        }
    }

    /// Frames of each kind the stages really send, as seed inputs.
    func internalFrames() -> [[UInt8]] {
        var seeds: [[UInt8]] = []
        // Each frame also as it travels while tracing is on, with its trace field.
        let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        for frame in Self.exampleOrders {
            let dispatch = DispatchFrame.encode(orderJSON: String(decoding: frame, as: UTF8.self), acceptedAt: now)
            seeds.append([0] + dispatch)
            seeds.append([0] + DispatchFrame.appendingTrace(traceparent, to: dispatch))
        }
        for var work in works {
            seeds.append([1] + work.frame)
            work.trace = traceparent
            seeds.append([1] + work.frame)
            if let lease = work.lease { seeds.append([3] + LedgerRequest.claim([lease]).json.bytes) }
        }
        let failed = Outcome(order: works[0].order, status: .failed, error: .init(code: "X", message: "y"), attempts: 1)
        seeds.append([2] + failed.bytes)
        seeds.append([6] + StageResult(answering: .submit, ticket: works[0].ticket, outcome: failed).frame)
        seeds.append([6] + StageResult(answering: .submit, ticket: works[0].ticket, outcome: failed, trace: traceparent).frame)
        seeds.append([3] + LedgerRequest.lookup(works[0].order.key).json.bytes)
        seeds.append([4] + Array(#"{"ok":true,"granted":[true,false]}"#.utf8))
        seeds.append([5] + Array(#"{"since":0,"limit":10}"#.utf8))
        return seeds
    }

    // MARK: provider answers

    private static let statuses = [200, 201, 202, 204, 400, 401, 402, 403, 404, 409, 422, 429, 500, 502, 503, 504]

    /// The first byte picks the example order, the second the status; the rest is the body.
    func providerResponse(_ input: [UInt8]) {
        guard input.count >= 2, !works.isEmpty else { return }
        let work = works[Int(input[0]) % works.count]
        let response = HTTPResponseSpec(
            status: Self.statuses[Int(input[1]) % Self.statuses.count], headers: [HTTPHeader("Content-Type", "application/json")],
            body: Array(input.dropFirst(2)))
        guard let connector = registry.connector(for: work.order.provider) else { return }
        var submission = Submission(work: work, connector: connector)
        var action = submission.start()
        for _ in 0..<4 {
            guard case .send = action else { break }
            action = submission.receive(response, jitter: 0)
        }
        if case .finish(let outcome) = action { readOutcome(outcome.bytes) }
    }

    // MARK: callbacks

    /// The first byte picks the route; then header lines (`Name: value`), a blank line, the body.
    func callback(_ input: [UInt8]) {
        guard let first = input.first, !routes.isEmpty else { return }
        let route = routes[Int(first) % routes.count]
        provider.answer = nil
        let rest = input.dropFirst()
        let newline = UInt8(ascii: "\n")
        var headers: [HTTPHeader] = []
        var bodyStart = rest.startIndex
        var lineStart = rest.startIndex
        while let end = rest[lineStart...].firstIndex(of: newline) {
            let line = rest[lineStart..<end]
            lineStart = end + 1
            bodyStart = lineStart
            if line.isEmpty { break }
            if let colon = line.firstIndex(of: UInt8(ascii: ":")) {
                headers.append(HTTPHeader(String(decoding: line[..<colon], as: UTF8.self), String(decoding: line[(colon + 1)...], as: UTF8.self)))
            }
        }
        handle(route, CallbackRequest(headers: headers, body: Array(rest[bodyStart...])))
    }

    @discardableResult
    func handle(_ route: CallbackRoute, _ request: CallbackRequest) -> CallbackAnswer {
        let validator = self.validator
        return waitingFor { await validator.handle(route, request) }
    }
}

/// Answers every lookup with the example order of the provider asked about (or of the key), so
/// a callback's claims reach its authentication and verdict, whatever ids it names. What the
/// validator asks the ledger must read back as the ledger would read it off the wire.
struct AnyOrderDirectory: OrderDirectory {
    let orders: [(order: Order, json: String)]

    func call(_ request: LedgerRequest) async throws(LedgerUnavailable) -> LedgerReply {
        let wire = request.json.bytes
        guard (try? LedgerRequest.parse(wire)) != nil else { Invariant.fail("a ledger request the callback validator wrote does not parse", wire) }
        func stored(_ found: (order: Order, json: String)?) -> LedgerReply {
            .order(found.map { StoredOrder(key: $0.order.key, orderJSON: $0.json, state: .open, pendingAt: nil) })
        }
        switch request {
        case .lookup(let key): return stored(orders.first { $0.order.key == key } ?? orders.first)
        case .lookupRef(let provider, _, _): return stored(orders.first { $0.order.provider == provider })
        case .settle(_, _, let outcome):
            if let outcome, (try? Outcome.parse(outcome.bytes)) == nil {
                Invariant.fail("the outcome an authentic callback settles does not parse", outcome.bytes)
            }
            return .settled(applied: outcome != nil, duplicate: false)
        case .resumePolls: return .resumed(count: 0)
        case .claim(let claims): return .claimed(claims.map { _ in true })
        case .subscriptionEvents(let events): return .eventsRecorded(recorded: events.count, duplicates: 0)
        case .dueChecks: return .dueChecks([])
        case .checked(let results): return .eventsRecorded(recorded: results.count, duplicates: 0)
        case .subscription: return .subscription(nil)
        }
    }
}

/// The provider the callback validator asks: without an answer set, never reached ("not sent");
/// with one, a bearer token for Viva's token endpoint and the answer for anything else.
final class FuzzProvider: ProviderHTTPTransport, @unchecked Sendable {
    var answer: [UInt8]?

    func execute(_ request: HTTPRequestSpec) async -> Result<HTTPResponseSpec, TransportFailure> {
        guard let answer else { return .failure(.notSent("fuzz: no provider")) }
        if request.url.hasSuffix("/connect/token") {
            return .success(
                HTTPResponseSpec(status: 200, body: Array(#"{"access_token":"fuzz-token","token_type":"Bearer","expires_in":3600}"#.utf8)))
        }
        return .success(HTTPResponseSpec(status: 200, headers: [HTTPHeader("Content-Type", "application/json")], body: answer))
    }
}

/// examples/orders.jsonl (the demo's orders: one per provider and operation the demo runs),
/// found from this file's path, so the fuzzer starts from what the demo sends.
let exampleOrderLines: String = {
    let path = String(#filePath.split(separator: "/", omittingEmptySubsequences: false).dropLast(3).joined(separator: "/")) + "/examples/orders.jsonl"
    guard let bytes = readWholeFile(path) else { fatalError("cannot read \(path)") }
    return String(decoding: bytes, as: UTF8.self)
}()

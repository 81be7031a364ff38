// What the ledger's store spends on W1 orders' whole lives, without sockets: every transaction
// takes in a batch of orders, the claims for the batch before it and the results for the batch
// before that, as one pass of the ledger's loop does under load. Real SQLite files with
// `synchronous=FULL`, through the ledger's own `LedgerCore.commit`. Wall time includes the
// fsyncs and moves with the machine; the instructions under callgrind do not (and exclude the
// kernel), so compare two builds that way:
//
//   deploy/swift-release run paypipe-store-bench [--orders N] [--batch B]
//   strip --strip-debug -o /tmp/store-bench .build/release/paypipe-store-bench
//   valgrind --tool=callgrind --callgrind-out-file=/tmp/store.cg /tmp/store-bench --orders 20000 --runs 1
//   callgrind_annotate --inclusive=yes /tmp/store.cg | grep storeLifecycle   # ÷ orders = instructions per order
//   deploy/swift-release run paypipe-store-bench --postgres-url postgres://paypipe@:5432/paypipe?host=/tmp/pg
//       # the same on PostgreSQL (.ci/postgres start /tmp/pg), a schema of its own per run
import BenchSupport
import Connectors
import Foundation
import LedgerStage
import PaypipeCore
import SignerStage
import StageRuntime
import StageWire
import SubmitterStage

let orders = argument("--orders", 20_000)
let batch = argument("--batch", 32)
let runs = argument("--runs", 3)
let postgresURL = argument("--postgres-url")

let config = try PaypipeConfig.parse(Array(DemoConfig.text(sandboxURL: "http://127.0.0.1:18081").utf8))
let registry = waitingFor { await StandardConnectors.registry(config: config) }
let signer = SignerCore(registry: registry)

/// The W1 order (bench/driver's PhonePe authInit) under `id`, and the outcome frame its
/// submitter sends for nginx's answer.
func frames(_ id: Int, tickets: DispatchTickets) throws -> (intake: [UInt8], result: [UInt8], claim: LeaseClaim) {
    let orderId = "w1-\(String(id + 10_000_000_000).dropFirst())"
    let intake = Array(
        #"{"v":1,"orderId":"\#(orderId)","provider":"phonepe","operation":"authInit","amount":39900,"currency":"INR","params":{"merchantUserId":"U\#(id)","subscriptionId":"OMS2006110139450\#(id)"}}"#
            .utf8)
    guard case .order(let order) = Order.decode(frame: intake, catalog: registry.catalog) else { throw BenchError("order \(id) does not decode") }
    guard case .submit(let work) = signer.sign(order, acceptedAt: 1_795_237_200_000, nowSeconds: 1_795_237_200),
        let connector = registry.connector(for: order.provider)
    else { throw BenchError("order \(id) is not signed") }
    var submission = Submission(work: work, connector: connector)
    let answer = HTTPResponseSpec(
        status: 200, headers: [HTTPHeader("Content-Type", "application/json")],
        body: Array(#"{"success":true,"code":"SUCCESS","data":{"redirectType":"INTENT","redirectURL":"ppe://mandate?x=1"}}"#.utf8))
    guard case .send = submission.start(), case .finish(let outcome) = submission.receive(answer, jitter: 0) else {
        throw BenchError("order \(id) does not finish")
    }
    let ticket = tickets.ticket(for: order.key, generation: 1)
    return (
        intake, StageResult(answering: .submit, ticket: ticket, outcome: outcome).frame,
        LeaseClaim(key: order.key, generation: 1, token: ticket.token)
    )
}

/// Every order's frames, with the tickets of the store they are for.
func batches(_ tickets: DispatchTickets) throws -> [[(intake: [UInt8], result: [UInt8], claim: LeaseClaim)]] {
    let all = try (0..<orders).map { try frames($0, tickets: tickets) }
    return stride(from: 0, to: orders, by: batch).map { Array(all[$0..<min($0 + batch, orders)]) }
}

/// Named, so that callgrind_annotate shows it by name. Returns how many outcomes were emitted.
@inline(never)
func storeLifecycle(_ core: inout LedgerCore, _ batches: [[(intake: [UInt8], result: [UInt8], claim: LeaseClaim)]]) throws -> Int {
    var emitted = 0
    let decoder = core.decoder
    for step in 0..<(batches.count + 2) {
        var work: [LedgerCore.Work] = []
        if step < batches.count { work.append(.intake(decoder.intake(batches[step].map(\.intake)))) }
        if step >= 1, step - 1 < batches.count { work.append(.request(.claim(batches[step - 1].map(\.claim)))) }
        if step >= 2 { work.append(.results(decoder.results(batches[step - 2].map { ($0.result, .submitter) }))) }
        for done in try core.commit(work, now: Timestamp.nowMilliseconds()) {
            for effect in done.effects { if case .emit = effect { emitted += 1 } }
        }
    }
    return emitted
}

var best = Double.infinity
for run in 0..<runs {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("paypipe-store-bench-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    let store: StoreSettings
    if let postgresURL {
        var settings = try PostgresSettings(url: postgresURL, at: "--postgres-url")
        settings.schema = "store_bench_\(UUID().uuidString.lowercased().prefix(8))"
        store = .postgres(settings)
    } else {
        store = .sqlite(path: directory.appendingPathComponent("ledger.sqlite").path)
    }
    var core = LedgerCore(store: try LedgerStore(store), registry: registry)
    let frames = try batches(core.store.tickets)
    let start = monotonicNanoseconds()
    let emitted = try storeLifecycle(&core, frames)
    let seconds = Double(monotonicNanoseconds() - start) / 1e9
    guard emitted == orders else { throw BenchError("run \(run): \(emitted) outcomes for \(orders) orders") }
    best = min(best, seconds)
}
print(
    "store (\(postgresURL == nil ? "SQLite" : "PostgreSQL")): \(orders) W1 orders admitted, claimed and ended, \(batch) per batch, one transaction per pass: "
        + "\(Int((best / Double(orders) * 1e9).rounded())) ns per order (best of \(runs))")

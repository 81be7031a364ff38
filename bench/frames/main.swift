// What each stage spends on one W1 order's frames, outside the sockets and the store: the
// ledger's intake and result decoding, the signer's dispatch decoding and signing, the
// submitter's work decoding and its outcome. Timings here move with the machine; counted
// instructions do not, so compare builds under callgrind (valgrind 3.19 cannot read the
// release build's debug info, hence the stripped copy):
//
//   deploy/swift-release run paypipe-frames-bench [--count N]
//   strip --strip-debug -o /tmp/frames-bench .build/release/paypipe-frames-bench
//   valgrind --tool=callgrind --callgrind-out-file=/tmp/frames.cg /tmp/frames-bench --count 2000
//   callgrind_annotate --inclusive=yes /tmp/frames.cg | grep -E 'ledger|signer|submitter'   # / (3 × count) per frame
import BenchSupport
import Connectors
import Dispatch
import PaypipeCore
import SignerStage
import StageRuntime
import StageWire
import SubmitterStage

let count = argument("--count", 200_000)

func measure(_ label: String, _ body: (Int) -> Int) {
    let (seconds, checksum) = bestOfThree(count: count, body)
    print("\(label): \(Int((seconds / Double(count) * 1e9).rounded())) ns per frame (best of 3 runs of \(count))  [\(checksum & 0xFF)]")
}

// The W1 order, as bench/driver sends it (examples/orders.jsonl's PhonePe authInit).
let intake = Array(#"{"v":1,"orderId":"w1-0000012345","provider":"phonepe","operation":"authInit","amount":39900,"currency":"INR","params":{"merchantUserId":"U123456","subscriptionId":"OMS2006110139450123456789"}}"#.utf8)
let config = try PaypipeConfig.parse(Array(DemoConfig.text(sandboxURL: "http://127.0.0.1:18081").utf8))
// Built on a task the main thread waits for, not in an async main: valgrind 3.19 dies in the
// async main's start-up, and this bench is for counting instructions under it.
final class RegistryBox: @unchecked Sendable { var registry: ConnectorRegistry? }
let box = RegistryBox()
let built = DispatchSemaphore(value: 0)
Task.detached {
    box.registry = await StandardConnectors.registry(config: config)
    built.signal()
}
built.wait()
let registry = box.registry!
let catalog = registry.catalog
guard case .order(let order) = Order.decode(frame: intake, catalog: catalog) else { throw BenchError("the W1 order does not decode") }
let dispatch = DispatchFrame.encode(orderJSON: order.serialized, acceptedAt: 1_795_237_200_000)
let signer = SignerCore(registry: registry)
let signed = signer.sign(order, acceptedAt: 1_795_237_200_000, nowSeconds: 1_795_237_200)
guard case .submit(let work) = signed else { throw BenchError("the W1 order is not signed into work: \(signed)") }
let workFrame = work.frame
guard let connector = registry.connector(for: order.provider) else { throw BenchError("no PhonePe connector") }
let answer = HTTPResponseSpec(
    status: 200, headers: [HTTPHeader("Content-Type", "application/json")],
    body: Array(#"{"success":true,"code":"SUCCESS","data":{"redirectType":"INTENT","redirectURL":"ppe://mandate?x=1"}}"#.utf8))
func outcome(of work: SubmitWork) -> Outcome? {
    var submission = Submission(work: work, connector: connector)
    guard case .send = submission.start(), case .finish(let outcome) = submission.receive(answer, jitter: 0) else { return nil }
    return outcome
}
guard let result = outcome(of: work) else { throw BenchError("the nginx answer does not finish the order") }
let resultFrame = result.bytes

// Named, so that callgrind_annotate shows each by name.
func ledgerDecodesIntake(_ n: Int) -> Int {
    var total = 0
    for _ in 0..<n { if case .order(let o) = Order.decode(frame: intake, catalog: catalog) { total &+= o.orderId.utf8.count } }
    return total
}

func ledgerSerializesOrder(_ n: Int) -> Int {
    var total = 0
    for _ in 0..<n { total &+= order.serialized.utf8.count }
    return total
}

func signerDecodesDispatch(_ n: Int) -> Int {
    var total = 0
    for _ in 0..<n { total &+= ((try? DispatchFrame.decode(dispatch, catalog: catalog))?.order.orderId.utf8.count ?? 0) }
    return total
}

func signerSignsWork(_ n: Int) -> Int {
    var total = 0
    for _ in 0..<n {
        if case .submit(let w) = signer.sign(order, acceptedAt: 1_795_237_200_000, nowSeconds: 1_795_237_200) { total &+= w.frame.count }
    }
    return total
}

func submitterDecodesWork(_ n: Int) -> Int {
    var total = 0
    for _ in 0..<n { total &+= ((try? SubmitWork.decode(workFrame, catalog: catalog))?.request.body.count ?? 0) }
    return total
}

func submitterWritesOutcome(_ n: Int) -> Int {
    var total = 0
    for _ in 0..<n { total &+= outcome(of: work)?.bytes.count ?? 0 }
    return total
}

func ledgerDecodesResult(_ n: Int) -> Int {
    var total = 0
    for _ in 0..<n { total &+= ((try? Outcome.parse(resultFrame))?.attempts ?? 0) }
    return total
}

measure("ledger: intake order decoded", ledgerDecodesIntake)
measure("ledger: order re-serialized for the store", ledgerSerializesOrder)
measure("signer: dispatch decoded", signerDecodesDispatch)
measure("signer: order signed into a work frame", signerSignsWork)
measure("submitter: work decoded", submitterDecodesWork)
measure("submitter: answer read into an outcome frame", submitterWritesOutcome)
measure("ledger: result decoded", ledgerDecodesResult)

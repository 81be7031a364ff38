// What each stage spends on one W1 order's frames, outside the sockets and the store: the
// ledger's intake and result decoding, the signer's dispatch decoding and signing, the
// submitter's work decoding, its HTTP exchange's framing (its own, and NIO's HTTP/1.1 codec
// for comparison) and its outcome. Timings here move with the machine; counted
// instructions do not, so compare builds under callgrind (valgrind 3.19 cannot read the
// release build's debug info, hence the stripped copy):
//
//   deploy/swift-release run paypipe-frames-bench [--count N]
//   strip --strip-debug -o /tmp/frames-bench .build/release/paypipe-frames-bench
//   valgrind --tool=callgrind --callgrind-out-file=/tmp/frames.cg /tmp/frames-bench --count 2000
//   callgrind_annotate --inclusive=yes /tmp/frames.cg | grep -E 'ledger|signer|submitter'   # / (3 × count) per frame
import BenchSupport
import Connectors
import HTTPTransport
import NIOCore
import NIOEmbedded
import NIOHTTP1
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
let intake = Array(
    #"{"v":1,"orderId":"w1-0000012345","provider":"phonepe","operation":"authInit","amount":39900,"currency":"INR","params":{"merchantUserId":"U123456","subscriptionId":"OMS2006110139450123456789"}}"#
        .utf8)
let config = try PaypipeConfig.parse(Array(DemoConfig.text(sandboxURL: "http://127.0.0.1:18081").utf8))
let registry = waitingFor { await StandardConnectors.registry(config: config) }
let catalog = registry.catalog
guard case .order(let order) = Order.decode(frame: intake, catalog: catalog) else { throw BenchError("the W1 order does not decode") }
let dispatch = DispatchFrame.encode(orderJSON: String(decoding: intake, as: UTF8.self), acceptedAt: 1_795_237_200_000)
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

/// The ledger stores the order as upstream sent it, without writing it anew.
func ledgerKeepsOrder(_ n: Int) -> Int {
    var total = 0
    for _ in 0..<n { total &+= String(decoding: intake, as: UTF8.self).utf8.count }
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
        if case .submit(let w) = signer.sign(order, acceptedAt: 1_795_237_200_000, nowSeconds: 1_795_237_200) {
            total &+= w.frame(orderJSON: DispatchFrame.orderJSON(in: dispatch)).count
        }
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

// The W1 exchange on the wire: the signed request written, and nginx's answer (the echo module
// answers chunked) read back.
let target = Target(url: work.request.url)!
let nginxAnswer = ByteBuffer(
    string: "HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Tue, 24 Nov 2026 14:37:50 GMT\r\n"
        + "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n"
        + "65\r\n{\"success\":true,\"code\":\"SUCCESS\",\"data\":{\"redirectType\":\"INTENT\",\"redirectURL\":\"ppe://mandate?x=1\"}}\n\r\n0\r\n\r\n")

func submitterFramesExchange(_ n: Int) -> Int {
    var total = 0
    var parser = HTTP1ResponseParser(maxBodyBytes: 4 << 20)
    for _ in 0..<n {
        total &+= ((try? HTTP1Request(work.request, target: target))?.bytes.readableBytes ?? 0)
        var bytes = nginxAnswer
        total &+= ((try? parser.parse(&bytes)) ?? nil)?.spec.body.count ?? 0
    }
    return total
}

/// The same exchange through NIO's codec, as a client without `HTTP1Wire` drives it: three parts
/// written through the encoder and the header validator, three read from the decoder, headers
/// copied out.
let codec = EmbeddedChannel()
try codec.pipeline.syncOperations.addHTTPClientHandlers()
func nioCodecFramesExchange(_ n: Int) -> Int {
    var total = 0
    for _ in 0..<n {
        var headers = HTTPHeaders()
        for header in work.request.headers { headers.add(name: header.name, value: header.value) }
        headers.add(name: "Host", value: "127.0.0.1:18081")
        headers.add(name: "Content-Length", value: String(work.request.body.count))
        let head = HTTPRequestHead(version: .http1_1, method: .POST, uri: "/v3/recurring/auth/init", headers: headers)
        _ = try? codec.writeOutbound(HTTPClientRequestPart.head(head))
        _ = try? codec.writeOutbound(HTTPClientRequestPart.body(.byteBuffer(ByteBuffer(bytes: work.request.body))))
        _ = try? codec.writeOutbound(HTTPClientRequestPart.end(nil))
        while let written = try? codec.readOutbound(as: ByteBuffer.self) { total &+= written.readableBytes }
        _ = try? codec.writeInbound(nginxAnswer)
        var body: [UInt8] = []
        while let part = try? codec.readInbound(as: HTTPClientResponsePart.self) {
            switch part {
            case .head(let head): total &+= head.headers.map { HTTPHeader($0.name, $0.value) }.count
            case .body(let buffer): body.append(contentsOf: buffer.readableBytesView)
            case .end: total &+= body.count
            }
        }
    }
    return total
}

measure("ledger: intake order decoded", ledgerDecodesIntake)
measure("ledger: order kept as sent for the store", ledgerKeepsOrder)
measure("signer: dispatch decoded", signerDecodesDispatch)
measure("signer: order signed into a work frame", signerSignsWork)
measure("submitter: work decoded", submitterDecodesWork)
measure("submitter: answer read into an outcome frame", submitterWritesOutcome)
measure("submitter: request written, nginx's answer read (HTTP1Wire)", submitterFramesExchange)
measure("submitter: the same through NIO's HTTP/1.1 codec, for comparison", nioCodecFramesExchange)
measure("ledger: result decoded", ledgerDecodesResult)

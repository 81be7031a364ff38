import Connectors
import Foundation
import LedgerStage
import NetsEasy
import PaypipeCore
import PhonePe
import Sandbox
import SignerStage
import StageRuntime
import StageWire
import SubmitterStage
import Testing
import TrustPayments
import Viva

package func netsCreateOrder(_ id: String) -> String {
    #"{"v":1,"orderId":"\#(id)","provider":"nets","operation":"createSubscription","amount":9900,"currency":"SEK","params":{"endDate":"2030-12-31T23:59:59+01:00","interval":30,"reference":"ref-\#(id)"}}"#
}

package func demoConfig() throws -> PaypipeConfig {
    try PaypipeConfig.parse(Array(DemoConfig.text(sandboxURL: "http://127.0.0.1:9").utf8))
}

package func order(_ json: String) throws -> Order {
    guard case .order(let order) = Order.decode(json: json, catalog: testCatalog) else { throw EnvelopeTestError("not an order: \(json)") }
    return order
}

package struct EnvelopeTestError: Error, CustomStringConvertible {
    package let description: String
    package init(_ d: String) { description = d }
}

package let phonePeOrder =
    #"{"v":1,"orderId":"pp-1","provider":"phonepe","operation":"authInit","amount":39900,"currency":"INR","params":{"merchantUserId":"U1","subscriptionId":"SUB1"}}"#

package let vivaOrder = #"{"v":1,"orderId":"viva-1","provider":"viva","operation":"sale","amount":1050,"currency":"EUR","params":{}}"#

/// The providers and operations of the contract, as the standard connectors declare them.
package let testCatalog = OrderCatalog(StandardConnectors.all.flatMap { $0.operations })

package func testRegistry(_ config: PaypipeConfig? = nil) async -> ConnectorRegistry {
    await StandardConnectors.registry(config: config ?? (try! demoConfig()))
}

package func connector(for work: SubmitWork) async -> any ProviderConnector {
    await testRegistry().connector(for: work.order.provider)!
}

package func readDispatch(_ frame: [UInt8]) -> DispatchFrame? { try? DispatchFrame.decode(frame, catalog: testCatalog) }

package func timers(phonepeCallbackWaitMs: Int64) -> PaypipeConfig.Timers {
    var timers = PaypipeConfig.Timers()
    timers[.phonepeCallbackWait] = phonepeCallbackWaitMs
    return timers
}

package func temporaryStore() throws -> LedgerStore {
    try TestStores.open(TestStores.location())
}

package func examplesPath() -> String {
    var url = URL(fileURLWithPath: #filePath)
    while url.path != "/" {
        url.deleteLastPathComponent()
        let candidate = url.appendingPathComponent("examples/orders.jsonl")
        if FileManager.default.fileExists(atPath: candidate.path) { return candidate.path }
    }
    return "examples/orders.jsonl"
}

package let netsCreateOrder =
    #"{"v":1,"orderId":"nets-create-1","provider":"nets","operation":"createSubscription","amount":9900,"currency":"SEK","params":{"endDate":"2099-01-01T00:00:00+00:00","interval":30,"reference":"sub-1"}}"#

package func vivaSale(_ orderId: String) -> [UInt8] {
    Array(#"{"v":1,"orderId":"\#(orderId)","provider":"viva","operation":"sale","amount":1050,"currency":"EUR","params":{}}"#.utf8)
}

import Connectors
import Foundation
import LedgerStage
import PaypipeCore
import StageRuntime
import StageWire
import Testing
import ZeroMQ

extension Outcome {
    /// The bytes the ledger emits for this outcome once `store` logs it as `seq`: the stage's
    /// own bytes with the store's `"epoch"` and `"seq"` as the last members.
    package func logged(seq: Int64, in store: LedgerStore) -> [UInt8] {
        Array(bytes.dropLast()) + Array(#","epoch":"\#(store.epoch)","seq":\#(seq)}"#.utf8)
    }
}

/// The `seq` of an emitted outcome.
package func seq(of bytes: [UInt8]) -> Int64? {
    guard case .object(let o)? = try? JSONValue.parse(bytes) else { return nil }
    return o["seq"]?.integerValue
}

package func rejectedOrder(_ id: String, merchant: String? = nil) -> String {
    let merchantField = merchant.map { #""merchant":\#($0),"# } ?? ""
    return #"{"v":1,"orderId":"\#(id)",\#(merchantField)"provider":"nope","operation":"x","params":{}}"#
}

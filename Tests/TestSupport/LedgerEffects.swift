import Connectors
import Foundation
import LedgerStage
import NetsEasy
import PaypipeCore
import SignerStage
import StageRuntime
import StageWire
import SubmitterStage
import Testing

package let netsChargeOrder =
    #"{"v":1,"orderId":"nc-1","provider":"nets","operation":"chargeSubscription","amount":9900,"currency":"SEK","params":{"subscriptionId":"d079718b-ff63-45dd-947b-4950c023750f","reference":"nc-ref-1"}}"#

package func dispatches(_ effects: [LedgerCore.Effect]) -> [DispatchFrame] {
    effects.compactMap { if case .dispatch(let frame) = $0 { readDispatch(frame) } else { nil } }
}

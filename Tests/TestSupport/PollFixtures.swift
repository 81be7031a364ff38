import Cleeng
import Connectors
import HTTPTransport
import PaypipeCore
import StageRuntime
import StageWire
import Synchronization
import Testing

@testable import LedgerStage
@testable import PollerStage
@testable import SignerStage
@testable import SubmitterStage

package let cleengOrderJSON =
    #"{"v":1,"orderId":"cl-1","provider":"cleeng","operation":"appleReceipt","params":{"customerToken":"tok","offerId":"S1_US","receiptData":"ZGVtbw==","transactionId":"tx1"}}"#

import Cleeng
import Connectors
import HTTPTransport
import LedgerStage
import PaypipeCore
import PollerStage
import SignerStage
import StageRuntime
import StageWire
import SubmitterStage
import Synchronization
import Testing

package let cleengOrderJSON =
    #"{"v":1,"orderId":"cl-1","provider":"cleeng","operation":"appleReceipt","params":{"customerToken":"tok","offerId":"S1_US","receiptData":"ZGVtbw==","transactionId":"tx1"}}"#

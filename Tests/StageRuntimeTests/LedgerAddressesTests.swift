import Foundation
import TestSupport
import Testing

@testable import StageRuntime

/// The ledger's ready line is written and read by `LedgerAddresses` only: the harness and the
/// benchmark start every other stage from what it names.
@Suite("The ledger's ready line")
struct LedgerAddressesTests {
    static let bound = LedgerAddresses(
        intake: "tcp://127.0.0.1:40001", outcomes: "tcp://127.0.0.1:40002", signQueue: "tcp://127.0.0.1:40003",
        signedIn: "tcp://127.0.0.1:40004", signedOut: "tcp://127.0.0.1:40005", results: "tcp://127.0.0.1:40006",
        ledgerRPC: "tcp://127.0.0.1:40007", pollQueue: "tcp://127.0.0.1:40008", outcomesReplay: "ipc:///tmp/replay",
        admin: "tcp://127.0.0.1:40009")

    @Test func aReadyLineReadsBackAsTheAddressesItWasWrittenFrom() {
        let line = Self.bound.readyLine
        #expect(line.hasPrefix("paypipe-ledger ready intake=tcp://127.0.0.1:40001 outcomes=tcp://127.0.0.1:40002 "))
        #expect(LedgerAddresses(readyLine: line) == Self.bound)
        #expect(LedgerAddresses.printed(in: line).count == 10)
    }

    @Test func aLineWithAnAddressMissingOrUnboundNamesNoLedger() {
        let line = Self.bound.readyLine
        #expect(LedgerAddresses(readyLine: line.replacingOccurrences(of: " pollQueue=tcp://127.0.0.1:40008", with: "")) == nil)
        #expect(LedgerAddresses(readyLine: line.replacingOccurrences(of: "40005", with: "*")) == nil)
        #expect(LedgerAddresses(readyLine: "paypipe-ledger ready") == nil)
    }
}

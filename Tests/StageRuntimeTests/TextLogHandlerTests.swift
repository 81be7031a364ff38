import Logging
import StageRuntime
import Synchronization
import Testing

/// The stages' text log lines keep swift-log's `StreamLogHandler` format, which operators and
/// the tests read.
@Suite struct TextLogHandlerTests {
    @Test func linesKeepStreamLogHandlersFormat() {
        let written = Mutex<[String]>([])
        var logger = Logger(label: "ledger") { label in
            TextLogHandler(label: label, metadataProvider: nil) { bytes in written.withLock { $0.append(String(decoding: bytes, as: UTF8.self)) } }
        }
        logger.logLevel = .debug
        logger.info("order.accepted", metadata: ["orderId": "o-1", "merchant": "m"])
        logger.debug("detail")
        logger.warning("slow store", metadata: ["ms": "1200"])
        let lines = written.withLock { $0 }
        #expect(lines.count == 3, "\(lines)")
        // `<time> <level> <label>: <key=value, sorted> [<source>] <message>`, a line each
        let time = #/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4} /#
        #expect(lines.allSatisfy { $0.contains(time) && $0.hasSuffix("\n") && $0.filter { $0 == "\n" }.count == 1 }, "\(lines)")
        #expect(lines.first?.hasSuffix(" info ledger: merchant=m orderId=o-1 [StageRuntimeTests] order.accepted\n") == true, "\(lines)")
        #expect(lines.dropFirst().first?.hasSuffix(" debug ledger: [StageRuntimeTests] detail\n") == true, "\(lines)")
        #expect(lines.last?.hasSuffix(" warning ledger: ms=1200 [StageRuntimeTests] slow store\n") == true, "\(lines)")
    }

    @Test func aLoggedErrorIsNamedAsStreamLogHandlerNamesIt() {
        struct Broken: Error, CustomStringConvertible { var description: String { "broken pipe" } }
        let written = Mutex<[String]>([])
        let logger = Logger(label: "signer") { label in
            TextLogHandler(label: label, metadataProvider: nil) { bytes in written.withLock { $0.append(String(decoding: bytes, as: UTF8.self)) } }
        }
        logger.error("send failed", error: Broken())
        let line = written.withLock { $0.first } ?? ""
        #expect(line.contains(" error signer: error.message=broken pipe error.type="), "\(line)")
        #expect(line.hasSuffix("Broken [StageRuntimeTests] send failed\n"), "\(line)")
    }
}

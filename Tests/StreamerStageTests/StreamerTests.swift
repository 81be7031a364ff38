import PaypipeCore
import StageRuntime
import StreamerStage
import Testing
import ZeroMQ

@Suite("The streamer between signers and submitters")
struct StreamerTests {
    /// Signed work pushed by a signer copy reaches a submitter copy through a streamer that
    /// neither binds, as a fleet runs it outside the ledger.
    @Test func forwardsSignedWork() async throws {
        let context = try ZMQContext()
        defer { context.terminate() }
        let links = try StageLinks(config: PaypipeConfig(merchants: [:]), role: .ledger)
        let streamer = try Streamer(context: context, links: links, signedIn: "tcp://127.0.0.1:*", signedOut: "tcp://127.0.0.1:*")
        defer { streamer.stop() }
        var options = ZMQSocketOptions()
        options.lingerMilliseconds = 0
        options.receiveTimeoutMilliseconds = 10_000
        let signer = try context.socket(.push, options: options), submitter = try context.socket(.pull, options: options)
        defer {
            signer.close()
            submitter.close()
        }
        try signer.connect(ZMQPeers(streamer.signedIn))
        try submitter.connect(ZMQPeers(streamer.signedOut))
        for index in 0..<3 { #expect(try signer.send(Array("signed \(index)".utf8))) }
        let received = try (0..<3).map { _ in try submitter.receive().map { String(decoding: $0.body, as: UTF8.self) } }
        #expect(received == ["signed 0", "signed 1", "signed 2"])
    }
}

import Testing
import ZeroMQ

@Suite("ZMQDuplex")
struct DuplexTests {
    @Test("a DEALER's requests reach a ROUTER and each reply returns to the copy that asked")
    func routerDealerRoundTrip() async throws {
        let context = try ZMQContext()
        defer { context.terminate() }
        let routerSocket = try context.socket(.router)
        let endpoint = try routerSocket.bind("tcp://127.0.0.1:*")
        let router = try ZMQDuplex(socket: routerSocket)
        let dealers = try (0..<2).map { _ in
            let socket = try context.socket(.dealer)
            _ = try socket.connect(endpoint)
            return try ZMQDuplex(socket: socket)
        }
        let perDealer = 200
        for (index, dealer) in dealers.enumerated() {
            for n in 0..<perDealer { #expect(dealer.send(ZMQMessage(frames: [Array("d\(index)-\(n)".utf8)]))) }
        }
        var served = 0
        while served < perDealer * dealers.count, let batch = try await router.nextBatch() {
            for message in batch {
                #expect(message.frames.count == 2)
                router.send(ZMQMessage(frames: [message.frames[0], Array("re:".utf8) + message.frames[1]]))
                served += 1
            }
        }
        for (index, dealer) in dealers.enumerated() {
            var replies: [String] = []
            while replies.count < perDealer, let batch = try await dealer.nextBatch() {
                replies += batch.map { String(decoding: $0.frames[0], as: UTF8.self) }
            }
            #expect(replies == (0..<perDealer).map { "re:d\(index)-\($0)" })
        }
        router.stop()
        for dealer in dealers { dealer.stop() }
        await router.waitUntilClosed()
        for dealer in dealers { await dealer.waitUntilClosed() }
    }
}

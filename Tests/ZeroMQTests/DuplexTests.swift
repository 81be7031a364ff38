import Synchronization
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

@Suite("ZMQReceiver timeouts")
struct ReceiverTimeoutTests {
    @Test("a receive that times out loses nothing that arrives around the timeout")
    func timeoutsLoseNothing() async throws {
        let context = try ZMQContext()
        defer { context.terminate() }
        let pull = try context.socket(.pull)
        let endpoint = try pull.bind("tcp://127.0.0.1:*")
        let push = try context.socket(.push)
        _ = try push.connect(endpoint)
        let receiver = try ZMQReceiver(socket: pull)
        let sender = try ZMQSender(socket: push)
        let total = 3000
        // Generous: what is tested is that nothing is lost, and in a full parallel run other
        // suites' blocking calls can hold the cooperative pool for seconds.
        let clock = ContinuousClock(), deadline = clock.now + .seconds(90)
        // Halfway, the sender waits for a receive to time out, so that timeouts happen between
        // arrivals however loaded the machine is (a busy machine otherwise always has data waiting).
        let timedOut = Atomic<Bool>(false)
        let sending = Task {
            for n in 0..<total {
                try await sender.send(Array("m\(n)".utf8))
                if n % 50 == 0 { try await Task.sleep(for: .milliseconds(1)) }
                while n == total / 2, !timedOut.load(ordering: .relaxed), clock.now < deadline { try await Task.sleep(for: .milliseconds(1)) }
            }
        }
        var received = 0, timeouts = 0
        while received < total, clock.now < deadline {
            let batch = try await receiver.nextBatch(timeoutMilliseconds: 1) ?? []
            if batch.isEmpty {
                timeouts += 1
                if received > total / 2 { timedOut.store(true, ordering: .relaxed) }
            }
            received += batch.count
        }
        try await sending.value
        #expect(received == total)
        #expect(timeouts > 0)
        receiver.stop()
        _ = await sender.finish()
        await receiver.waitUntilClosed()
    }
}

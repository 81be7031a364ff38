import Testing
import ZeroMQ

@Suite("ZMQOutbox and ZMQPoll: one thread sending without blocking", .timeLimit(.minutes(1)))
struct OutboxTests {
    @Test func anOutboxHoldsWhatNoPeerTakesAndSendsItInOrderOnceOneConnects() async throws {
        let context = try ZMQContext()
        let options = highWaterMarks(4)
        let push = try context.socket(.push, options: options)
        let endpoint = try push.bind("tcp://127.0.0.1:*")
        var outbox = ZMQOutbox(socket: push)
        for i in 0..<20 { try outbox.send(frame(i)) }
        #expect(outbox.count == 20, "with no peer connected libzmq takes nothing")
        #expect(try ZMQPoll.wait([(push, outbox.pollEvents)], timeoutMilliseconds: 0) == [[]])

        let pull = try context.socket(.pull, options: options)
        try pull.connect(endpoint)
        var received: [ZMQMessage] = []
        let deadline = ContinuousClock.now + .seconds(20)
        while received.count < 20, ContinuousClock.now < deadline {
            let ready = try ZMQPoll.wait([(push, outbox.pollEvents), (pull, .readable)], timeoutMilliseconds: 50)
            if ready[0].contains(.writable) { try outbox.flush() }
            while let message = try pull.receive(dontWait: true) { received.append(message) }
        }
        #expect(received == (0..<20).map(frame))
        #expect(outbox.count == 0)
        #expect(outbox.pollEvents == [])
        push.close()
        pull.close()
    }

    @Test func drainingGivesEachOutboxItsOwnTimeAndCountsWhatNoPeerTook() async throws {
        let context = try ZMQContext()
        let unheard = try context.socket(.push)
        try unheard.bind("tcp://127.0.0.1:*")
        let heard = try context.socket(.push)
        let endpoint = try heard.bind("tcp://127.0.0.1:*")
        let pull = try context.socket(.pull)
        try pull.connect(endpoint)
        var outboxes = [ZMQOutbox(socket: unheard, drainMilliseconds: 200), ZMQOutbox(socket: heard, drainMilliseconds: 10_000)]
        for i in 0..<3 { try outboxes[0].send(frame(i)) }
        #expect(outboxes[0].count == 3)
        let started = ContinuousClock.now
        #expect(try ZMQOutbox.drain(&outboxes) == 3, "the three with no peer, given up after their 200 ms")
        #expect(ContinuousClock.now - started < .seconds(5))
        #expect(outboxes.map(\.count) == [0, 0])
        for socket in [unheard, heard, pull] { socket.close() }
    }
}

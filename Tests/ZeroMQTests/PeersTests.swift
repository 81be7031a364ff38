import Testing
import ZeroMQ

@Suite("Connecting to every copy behind an endpoint")
struct PeersTests {
    @Test func aListAndANameStandForEveryAddress() {
        #expect(ZMQPeers.entries(of: "tcp://10.0.0.1:5551, tcp://10.0.0.2:5551,") == ["tcp://10.0.0.1:5551", "tcp://10.0.0.2:5551"])
        let peers = ZMQPeers("tcp://localhost:5551")
        #expect(peers.endpoint == "tcp://localhost:5551")
    }

    /// A PUSH connected through one endpoint naming two bound PULLs (one by address, one by
    /// name) reaches both: every copy gets work.
    @Test func aPushReachesEveryCopy() async throws {
        let context = try ZMQContext()
        defer { context.terminate() }
        var options = ZMQSocketOptions()
        options.lingerMilliseconds = 0
        let first = try context.socket(.pull, options: options), second = try context.socket(.pull, options: options)
        defer {
            first.close()
            second.close()
        }
        let a = try first.bind("tcp://127.0.0.1:*"), b = try second.bind("tcp://127.0.0.1:*")
        let portB = b.split(separator: ":").last!
        var pushOptions = ZMQSocketOptions()
        pushOptions.immediate = true
        pushOptions.lingerMilliseconds = 0
        let push = try context.socket(.push, options: pushOptions)
        defer { push.close() }
        let peers = ZMQPeers("\(a), tcp://localhost:\(portB)")
        try push.connect(peers)
        #expect(peers.connected == [a, "tcp://127.0.0.1:\(portB)"])
        // Round-robin over the connected copies: within a bounded time both have taken work.
        var firstGot = 0, secondGot = 0
        for attempt in 0..<500 where firstGot == 0 || secondGot == 0 {
            _ = try push.send(Array("w\(attempt)".utf8), dontWait: true)
            if try first.receive(dontWait: true) != nil { firstGot += 1 }
            if try second.receive(dontWait: true) != nil { secondGot += 1 }
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(firstGot > 0 && secondGot > 0)
    }
}

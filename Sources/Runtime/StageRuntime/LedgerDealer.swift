import ZeroMQ

/// A DEALER to one of the ledger's ROUTER endpoints (replay, admin), one request at a time.
/// After a timeout a late answer could still arrive, so drop the dealer and make a new one.
package final class LedgerDealer: Sendable {
    package struct Failure: Error, CustomStringConvertible {
        package let description: String
        package init(_ description: String) { self.description = description }
    }

    let duplex: ZMQDuplex

    package init(context: ZMQContext, endpoint: String, options: ZMQSocketOptions) throws(ZMQError) {
        let socket = try context.socket(.dealer, options: options)
        _ = try socket.connect(endpoint)
        duplex = try ZMQDuplex(socket: socket)
    }

    package func send(_ bytes: [UInt8]) throws(Failure) {
        guard duplex.send(ZMQMessage(bytes)) else { throw Failure("the client is closed") }
    }

    /// The messages that arrived within `timeoutMilliseconds`; nil or empty when none did.
    package func next(timeoutMilliseconds: Int64) async throws -> [ZMQMessage]? {
        try await duplex.nextBatch(timeoutMilliseconds: timeoutMilliseconds)
    }

    package func close() async {
        duplex.stop()
        await duplex.waitUntilClosed()
    }
}

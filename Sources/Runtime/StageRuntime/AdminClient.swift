import PaypipeCore
import StageWire
import ZeroMQ

/// Asks the ledger's admin link (`endpoints.admin`) one request at a time over a DEALER: the
/// operators' commands and the tests that drive them. After a timeout a late answer could
/// still arrive, so drop the client and make a new one.
package final class AdminClient: Sendable {
    package struct Failure: Error, CustomStringConvertible {
        package let description: String
    }

    let duplex: ZMQDuplex

    package init(context: ZMQContext, endpoint: String, options: ZMQSocketOptions = stageOptions()) throws(ZMQError) {
        let socket = try context.socket(.dealer, options: options)
        _ = try socket.connect(endpoint)
        duplex = try ZMQDuplex(socket: socket)
    }

    /// The ledger's answer; a refusal is `{"error": …}`, returned as it came.
    package func ask(_ request: AdminRequest, timeoutMilliseconds: Int64 = 10_000) async throws -> JSONValue {
        guard duplex.send(ZMQMessage(request.bytes)) else { throw Failure(description: "the admin client is closed") }
        guard let message = try await duplex.nextBatch(timeoutMilliseconds: timeoutMilliseconds)?.first,
            let answer = try? JSONValue.parse(message.body)
        else {
            throw Failure(
                description:
                    "no answer from the ledger's admin endpoint within \(timeoutMilliseconds) ms (is the ledger up, and with CURVE, is this key on curve.admins?)"
            )
        }
        return answer
    }

    package func close() async {
        duplex.stop()
        await duplex.waitUntilClosed()
    }
}

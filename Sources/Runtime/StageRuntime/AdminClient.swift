import PaypipeCore
import StageWire
import ZeroMQ

/// Asks the ledger's admin link (`endpoints.admin`) one request at a time: the operators'
/// commands and the tests that drive them.
package final class AdminClient: Sendable {
    package typealias Failure = LedgerDealer.Failure

    let dealer: LedgerDealer

    package init(context: ZMQContext, endpoint: String, options: ZMQSocketOptions = stageOptions()) throws(ZMQError) {
        dealer = try LedgerDealer(context: context, endpoint: endpoint, options: options)
    }

    /// The ledger's answer; a refusal is `{"error": …}`, returned as it came.
    package func ask(_ request: AdminRequest, timeoutMilliseconds: Int64 = 10_000) async throws -> JSONValue {
        try dealer.send(request.bytes)
        guard let message = try await dealer.next(timeoutMilliseconds: timeoutMilliseconds)?.first,
            let answer = try? JSONValue.parse(message.body)
        else {
            throw Failure(
                "no answer from the ledger's admin endpoint within \(timeoutMilliseconds) ms (is the ledger up, and with CURVE, is this key on curve.admins?)"
            )
        }
        return answer
    }

    package func close() async { await dealer.close() }
}

import Cleeng
import PaypipeCore
import PollerStage
import StageWire

/// The Cleeng poller's answers: the example receipt order polled from acceptance to its end,
/// every getAccessStatus answered with the fuzzer's bytes.
extension FuzzWorld {
    private static let pollStatuses = [200, 200, 200, 200, 201, 204, 400, 401, 403, 404, 429, 500, 502, 503, 504, 302]

    /// The first byte's low four bits pick the answer's HTTP status, and its bit 4 makes the
    /// receipt arrive after its deadline (a poller that was down: one last check decides it);
    /// the rest is the answer's body. Whatever Cleeng answers, the order must end, by its
    /// deadline, with an outcome that reads back.
    @discardableResult
    func pollAnswers(_ input: [UInt8]) -> Outcome? {
        guard let first = input.first else { return nil }
        let answer = HTTPResponseSpec(status: Self.pollStatuses[Int(first & 0x0F)], body: Array(input.dropFirst()))
        pollClock += 3_600_000
        let acceptedAt = first & 0x10 == 0 ? pollClock : pollClock - pollPolicy.deadlineMs - 1
        var actions = poller.add(receiptOrder, pendingSince: acceptedAt, ticket: DispatchTicket(generation: 1, token: 0), now: pollClock)
        var ended: Outcome?
        for _ in 0..<(pollPolicy.deadlineMs / pollPolicy.intervalMs + 3) {
            for _ in 0..<4 where !actions.isEmpty { actions = perform(actions, answer: answer, ended: &ended) }
            if poller.count == 0 { return ended }
            pollClock += pollPolicy.intervalMs
            actions = poller.due(now: pollClock)
        }
        Invariant.fail("a Cleeng receipt the poller did not end by its deadline, answered", input)
    }

    /// Answers each poll with `answer` and reads each outcome back; returns what the answers led to.
    private func perform(_ actions: [PollerCore.Action], answer: HTTPResponseSpec, ended: inout Outcome?) -> [PollerCore.Action] {
        var next: [PollerCore.Action] = []
        for action in actions {
            switch action {
            case .poll(let id, let requestId, _, _):
                next += poller.receive(id, requestId: requestId, answer: .success(answer), now: pollClock)
            case .emit(let result):
                readOutcome(result.outcome.bytes)
                ended = result.outcome
            }
        }
        return next
    }

    /// A grant, Cleeng's "not yet" and a fatal error, each as the first poll's answer.
    static let pollAnswerSeeds: [[UInt8]] = [
        #"{"jsonrpc":"2.0","id":1,"result":{"accessGranted":true,"expiresAt":1893456000,"offerId":"S123456789_US"}}"#,
        #"{"jsonrpc":"2.0","id":1,"result":{"accessGranted":false}}"#,
        #"{"jsonrpc":"2.0","id":1,"error":{"code":4,"message":"Offer does not exist"}}"#,
        #"{"jsonrpc":"2.0","id":1,"error":{"code":14,"message":"try again"}}"#,
    ].flatMap { body in [[0] + Array(body.utf8), [0x10] + Array(body.utf8)] }
}

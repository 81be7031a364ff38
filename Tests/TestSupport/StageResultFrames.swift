import LedgerStage
import PaypipeCore
import StageRuntime
import StageWire

/// Outcomes as the stages send them to a `LedgerCore` under test: in result frames that name a
/// dispatch the ledger issued, claimed first where a submitter would claim.
extension LedgerCore {
    /// The claim a submitter holding `generation` of the order sends (with the ledger's token).
    package func lease(_ key: OrderKey, _ generation: Int64 = 1) -> LeaseClaim {
        LeaseClaim(key: key, generation: generation, token: store.tickets.token(for: key, generation: generation))
    }

    /// `outcome` in the result frame of the stage answering `generation` of its order.
    package func frame(_ outcome: Outcome, answering: StageResult.Answering = .submit, generation: Int64 = 1) -> [UInt8] {
        let key = OrderKey(merchant: outcome.merchant, orderId: outcome.orderId)
        return StageResult(answering: answering, ticket: store.tickets.ticket(for: key, generation: generation), outcome: outcome).frame
    }

    /// `outcome` answering `dispatch`, as the stage that was sent it reports it.
    package func frame(_ outcome: Outcome, answering dispatch: DispatchFrame) -> [UInt8] {
        StageResult(
            answering: .init(dispatch.purpose), ticket: DispatchTicket(generation: dispatch.generation, token: dispatch.token), outcome: outcome
        ).frame
    }

    /// A submitter's outcome for `generation`: it claims the dispatch (or renews its claim), then
    /// reports.
    package mutating func submitted(_ outcome: Outcome, generation: Int64 = 1, now: Int64) throws -> [Effect] {
        _ = handle(.claim([lease(OrderKey(merchant: outcome.merchant, orderId: outcome.orderId), generation)]), now: now)
        return try results([frame(outcome, generation: generation)], role: .submitter, now: now)
    }

    /// Outcomes the signers send for the first dispatch (a JWT or URL for the app, a rejection).
    package mutating func signed(_ outcomes: [Outcome], now: Int64) throws -> [Effect] {
        try results(outcomes.map { frame($0) }, role: .signer, now: now)
    }
}

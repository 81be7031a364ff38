import PaypipeCore
import StageRuntime
import StageWire

/// Who hands the ledger an outcome for an order.
package enum ResultSource: Sendable, Equatable {
    /// The ledger itself (an order past its dispatch cap or its lease's longest life).
    case ledger
    /// A callback validator's `settle` (only that role may call it, with CURVE).
    case callback
    /// A stage's frame on the results socket: the role its CURVE key proved (nil without CURVE),
    /// what the outcome answers, and whether its ticket is one the ledger issued for the order.
    case stage(CurveConfig.Role?, answering: StageResult.Answering, ticket: DispatchTicket, ticketIsValid: Bool)
}

/// The stored facts about an order that decide who may give it an outcome.
package struct OrderFacts: Sendable, Equatable {
    package var state: OrderState
    package var provider: String?
    package var operation: String?
    /// The order's current generation (its dispatch count).
    package var generation: Int64
    /// The generation whose claim is held, if any.
    package var claimedGeneration: Int64?
    /// How many of its dispatches a submitter claimed.
    package var attempts: Int64
}

/// The rules for outcomes that arrive on the results socket (and the checks every source
/// shares): an outcome counts only when its sender may give it to this order now.
///
/// - Every source: provider and operation must be the stored order's.
/// - A submitter answers a submission only for the generation whose claim it holds, and a status
///   check only while the order is pending (or in review), for the order's current generation.
/// - A signer may end as `rejected`, or make `pending`, only an order that no submitter ever
///   claimed, and may send any order it was dispatched to review.
/// - A poller answers only pending orders of an operation the pollers own.
/// - Without CURVE there are no roles: a frame passes if any role's rule admits it, and the
///   ticket (which only a stage that was sent the dispatch holds) still decides.
/// - `rejected` means the order never reached a provider, so it is refused for an order that a
///   dispatch before this one may have sent.
package enum ResultAuthority {
    /// nil when `outcome` from `source` may be recorded; otherwise why not.
    package static func refusal(_ outcome: Outcome, from source: ResultSource, order: OrderFacts, polled: Bool) -> String? {
        if let provider = order.provider, provider != outcome.provider {
            return "the outcome names provider \(outcome.provider.prefix(32)), the order is \(provider)'s"
        }
        if let operation = order.operation, operation != outcome.operation {
            return "the outcome names operation \(outcome.operation.prefix(32)), the order's is \(operation)"
        }
        guard case .stage(let role, let answering, let ticket, let ticketIsValid) = source else { return nil }
        guard ticketIsValid, ticket.generation <= order.generation else { return "its dispatch ticket is not one the ledger issued for the order" }
        if outcome.status == .rejected, !neverSent(order, before: ticket) {
            return "rejected only ends an order that no earlier dispatch may have sent to the provider"
        }
        let review = outcome.status == .unknown && outcome.error?.needsReview == true
        func admits(_ role: CurveConfig.Role) -> Bool {
            switch (role, answering) {
            case (.submitter, .submit): order.claimedGeneration == ticket.generation
            // An operator's re-check of an order in review is a status check too. Each check is
            // dispatched under a new generation: only the latest one's answer counts.
            case (.submitter, .statusCheck): (order.state == .pending || order.state == .review) && ticket.generation == order.generation
            case (.submitter, .expiryCheck): order.state == .pending && ticket.generation == order.generation
            case (.signer, .submit):
                review || ((outcome.status == .rejected || outcome.status == .pending) && order.attempts == 0 && order.claimedGeneration == nil)
            case (.signer, .statusCheck), (.signer, .expiryCheck): review && order.state == .pending
            case (.poller, .poll): polled && order.state == .pending
            default: false
            }
        }
        let roles: [CurveConfig.Role] = role.map { [$0] } ?? [.submitter, .signer, .poller]
        guard roles.contains(where: admits) else {
            let who = role.map { "the \($0.rawValue) role" } ?? "an unauthenticated stage"
            return
                "\(who) may not give this outcome to an order in state \(order.state.rawValue) in answer to \(answering.rawValue) \(ticket.generation)"
        }
        return nil
    }

    /// Whether no dispatch of the order before (or other than) `ticket`'s was ever taken up.
    static func neverSent(_ order: OrderFacts, before ticket: DispatchTicket) -> Bool {
        guard order.state == .open || order.state == .unknown else { return false }
        return order.attempts == 0 || (order.attempts == 1 && order.claimedGeneration == ticket.generation)
    }
}

extension Outcome {
    /// A terminal outcome that told upstream no money was taken.
    var toldNoMoneyTaken: Bool { (status == .failed || status == .rejected) && result == nil }
    /// An outcome that says money was taken: a success, or a failure that carries the payment
    /// (a Trust Payments payment whose subscription was not scheduled).
    var saysMoneyTaken: Bool { status == .succeeded || (status == .failed && result != nil) }
}

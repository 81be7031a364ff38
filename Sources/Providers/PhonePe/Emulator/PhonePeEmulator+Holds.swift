import PaypipeCore
import PhonePe
import Sandbox

/// What a lost answer looks like from PhonePe's side, for tests of the pipeline's resolution:
/// a notification or debit held in front of PhonePe (a proxy or a queue on the way) reaches it
/// late. Until then PhonePe knows nothing of it, so its status call says so; a copy sent
/// meanwhile arrives behind it, and finds its transactionId used (`INVALID_TRANSACTION_ID`).
/// `holdNext` `{"subscription", "request": "notify"|"debit", "milliseconds"?}` holds the next one
/// of that subscription until a copy of it arrives or `milliseconds` (default 60000) pass,
/// whichever is first; it is then taken as any other, and answered to whoever still waits.
/// Nothing is replayed: the held request and its copy are each counted and each answered.
extension PhonePeEmulator {
    package struct Holds: Sendable {
        /// "notify:<subscriptionId>" or "debit:<subscriptionId>": the next such request is held
        /// this many milliseconds at most.
        var next: [String: Int] = [:]
        /// Held requests by their ledger key (`debitLedgerKey`), each with its waiting answer.
        var waiting: [String: (request: HTTPRequestSpec, answer: CheckedContinuation<HTTPResponseSpec, Never>)] = [:]
    }

    package static let defaultHoldMilliseconds = 60_000

    /// Holds `request` until its copy arrives (`debitRequest` lets it in first) or its time is up.
    func hold(_ request: HTTPRequestSpec, key: String, milliseconds: Int, context: SandboxContext) async -> HTTPResponseSpec {
        await withCheckedContinuation { answer in
            holds.withLock { $0.waiting[key] = (request, answer) }
            context.scheduler.schedule(afterMilliseconds: milliseconds) { [self] in
                guard let held = holds.withLock({ $0.waiting.removeValue(forKey: key) }) else { return }
                held.answer.resume(returning: await processDebit(held.request, context: context))
            }
        }
    }

    /// The `holdNext` action.
    func holdNext(_ body: JSONValue, subscriptionId: String) -> HTTPResponseSpec {
        guard let kind = body["request"]?.stringValue, kind == "notify" || kind == "debit" else {
            return SandboxContext.json(400, ["error": "request must be notify or debit"])
        }
        let milliseconds = body["milliseconds"]?.integerValue.map { Int(clamping: $0) } ?? Self.defaultHoldMilliseconds
        guard milliseconds >= 0 else { return SandboxContext.json(400, ["error": "milliseconds must be 0 or more"]) }
        holds.withLock { $0.next[kind + ":" + subscriptionId] = milliseconds }
        return SandboxContext.json(200, ["subscription": .string(subscriptionId), "held": .string(kind)])
    }

    /// PhonePe's refusal of a notification or debit of a mandate that is not ACTIVE (paused,
    /// revoked, cancelled, …): `INVALID_SUBSCRIPTION_STATE`, one of seed 002's codes (fixture
    /// `authinitresponse--invalid-subscription-state`, HTTP 400). PhonePe documents no code for
    /// this case on its debit pages; its cancel page lists the same code among its refusals.
    static let notActive = PhonePeSandbox.refusal(400, "INVALID_SUBSCRIPTION_STATE", "Subscription is not in a valid state.")
}

import PaypipeCore

extension Operation {
    public static let scheduleNets = Operation(.nets, ScheduleChange.operationName)
}

/// Nets charges a subscription only when the merchant asks ("Merchant is responsible for
/// managing subscriptions after they're created", seed 001), so paypipe does, on schedule: one
/// `chargeSubscription` per attempt (`POST /v1/subscriptions/{subscriptionId}/charges`), whose
/// `Idempotency-Key` derives from the scheduled order's id, that is from the subscription, the
/// cycle and the attempt. Its charge webhooks report each charge as a renewal event.
///
/// Not the bulk call (`POST /v1/subscriptions/charges`): whether a second POST with the same
/// `externalBulkChargeId` returns the first `bulkId` is not documented, no item carries an
/// idempotency key of its own, and its failure event names no subscription. A lost answer to a
/// bulk charge could not be resolved without charging again; a single charge is read back by its
/// key (`GET …/charges/status`).
struct NetsScheduledCharging: ScheduledCharging {
    var steps: [ScheduledStep] { [ScheduledStep(.chargeSubscription)] }

    func target(of order: Order, outcome: Outcome) -> JSONValue? {
        guard let subscriptionId = outcome.result?["subscriptionId"]?.stringValue, !subscriptionId.isEmpty else { return nil }
        return ["subscriptionId": .string(subscriptionId)]
    }

    func params(step: Int, target: JSONValue, attempt: ScheduledAttempt, carried: JSONValue?) -> [String: JSONValue] {
        // No items: one item carries the whole amount, which a schedule may change.
        ["subscriptionId": target["subscriptionId"] ?? .null, "reference": .string("\(attempt.subscription.prefix(64))-\(attempt.cycle)")]
    }

    func carry(from outcome: Outcome) -> (carried: JSONValue?, notBefore: Int64?) { (nil, nil) }
}

import PaypipeCore

extension Operation {
    /// The ledger's own TRANSACTIONQUERY for an engine payment whose notification never came.
    public static let enginePaymentQuery = Operation(.trustpayments, "enginePaymentQuery")
}

/// Trust Payments' subscription engine takes each automated payment itself and reports it only
/// by URL notification, which a merchant's rule may not send, or which may be lost after its
/// retries. paypipe knows when each falls due (`TPSchedule`), so one whose notification is late
/// by `timers.tpReconcileAfterMs` is asked for with TRANSACTIONQUERY, and the answer is reported
/// as the notification would have been, under the same dedupe keys.
///
/// The query's filter: Trust Payments documents `sitereference`, `transactionreference`,
/// `orderreference` and `starttimestamp`/`endtimestamp`; no `parenttransactionreference` filter
/// was found, and the engine payment's own transactionreference is what is unknown. So the
/// filter is the first order's `orderreference`, which the engine's AUTHs carry over from the
/// first AUTH they are children of (an inference from "acts as a parent to all subsequent
/// automated payments": not stated), and the records are matched on paypipe's side by
/// `accounttypedescription` RECUR and `parenttransactionreference`. Were the engine not to carry
/// it over, nothing is found and, after `timers.tpReconcileAsks` asks, the payment is handed to a
/// person (`schedule.review`), never silently dropped. A time-window filter would work without
/// the inference but reads every transaction of the site in that window.
public struct TPEngineReconciling: PaymentReconciling {
    public let window: Int64
    public let retryInterval: Int64
    public let maxAsks: Int64

    public init(timers: PaypipeConfig.Timers) {
        window = timers[.tpReconcileAfter]
        retryInterval = timers[.tpReconcileRetry]
        maxAsks = max(1, timers[.tpReconcileAsks])
    }

    public func plan(for order: Order, opening: SubscriptionOpening, openedAt: Int64) -> (plan: JSONValue, firstPayment: Int64)? {
        guard order.operation == .subscriptionJwt, let request = try? TPSubscriptionRequest(order: order, issuedAt: openedAt.floorDividedTP(by: 1000))
        else { return nil }
        let schedule = TPSchedule(request: request, issuedAt: openedAt.floorDividedTP(by: 1000))
        var plan: [String: JSONValue] = [
            "orderReference": .string(order.orderId), "requestDate": .string(schedule.requestDate.iso8601), "unit": .string(schedule.unit.rawValue),
            "frequency": .integer(schedule.frequency), "number": .integer(schedule.number), "finalNumber": .integer(schedule.finalNumber),
            "initialPayment": .bool(schedule.includesInitialPayment),
        ]
        if let begin = schedule.beginDate { plan["beginDate"] = .string(begin.iso8601) }
        return (.object(plan), schedule.number + (schedule.includesInitialPayment ? 1 : 0))
    }

    static func schedule(_ plan: JSONValue) -> TPSchedule? {
        guard let requestDate = plan["requestDate"]?.stringValue.flatMap(CivilDate.init(iso8601:)),
            let unit = plan["unit"]?.stringValue.flatMap(TPSubscriptionUnit.init(rawValue:)), let frequency = plan["frequency"]?.integerValue,
            let number = plan["number"]?.integerValue, let finalNumber = plan["finalNumber"]?.integerValue
        else { return nil }
        return TPSchedule(
            requestDate: requestDate, beginDate: plan["beginDate"]?.stringValue.flatMap(CivilDate.init(iso8601:)), unit: unit,
            frequency: frequency, number: number, finalNumber: finalNumber, includesInitialPayment: plan["initialPayment"]?.boolValue ?? true)
    }

    public func dueAt(payment: Int64, plan: JSONValue) -> Int64? {
        guard let schedule = Self.schedule(plan) else { return nil }
        let index = payment - schedule.number - (schedule.includesInitialPayment ? 1 : 0)
        guard index >= 0, schedule.automatedPaymentCount.map({ index < $0 }) ?? true, let date = schedule.date(ofAutomatedPayment: index) else {
            return nil
        }
        return date.daysSinceEpoch * 86_400_000
    }

    /// `subscriptionfinalnumber` numbers the series' payments as `finalNumber` does (0: no end).
    public func plan(_ plan: JSONValue, endingAt finalPayment: Int64?) -> JSONValue {
        guard case .object(var fields) = plan else { return plan }
        fields["finalNumber"] = .integer(finalPayment ?? 0)
        return .object(fields)
    }

    public func query(orderId: String, merchant: String, subscription: String, payment: Int64, plan: JSONValue) -> Order {
        Order(
            orderId: orderId, merchant: merchant, operation: .enginePaymentQuery,
            params: [
                "orderReference": plan["orderReference"] ?? .null, "parentTransactionReference": .string(subscription),
                "subscriptionNumber": .integer(payment),
            ])
    }

    /// Every engine payment of the subscription the answer holds, each as its notifications
    /// would have reported it: authorised (and, once settled, settled too), or declined.
    public func events(of query: Order, outcome: Outcome) -> [SubscriptionEvent] {
        guard query.operation == .enginePaymentQuery, outcome.status == .succeeded,
            let parent = query.params["parentTransactionReference"]?.stringValue, let records = outcome.result?["records"]?.arrayValue
        else { return [] }
        var events: [SubscriptionEvent] = []
        for record in records {
            guard record["accounttypedescription"]?.stringValue == "RECUR", record["parenttransactionreference"]?.stringValue == parent else {
                continue
            }
            var fields: [String: String] = [:]
            for name in Self.reportedFields { fields[name] = record[name]?.stringValue }
            let errorcode = fields["errorcode"] ?? ""
            let settleStatus = fields["settlestatus"] ?? ""
            var reports = [settleStatus]
            // A settled payment was authorised first, which its first notification reported.
            if errorcode == "0", settleStatus == "10" || settleStatus == "100" { reports = ["0", settleStatus] }
            for status in reports {
                fields["settlestatus"] = status
                let read = TPNotificationEvent(fields: fields, orderReference: fields["orderreference"] ?? "", errorcode: errorcode)
                if let event = try? read.subscriptionEvent(merchant: query.merchant) { events.append(event) }
            }
        }
        return events
    }

    /// The fields of a record that an engine payment's notification carries and paypipe reads.
    static let reportedFields = [
        "accounttypedescription", "baseamount", "currencyiso3a", "errorcode", "orderreference", "parenttransactionreference",
        "requesttypedescription", "settlestatus", "subscriptionnumber", "transactionreference",
    ]
}

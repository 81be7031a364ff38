import PaypipeCore

extension Operation {
    public static let cancelTrustPayments = Operation(.trustpayments, SubscriptionCancel.operationName)
}

/// A Trust Payments subscription stopped for good: TRANSACTIONUPDATE of the SUBSCRIPTION with
/// `updates.transactionactive` "3" ("stopped permanently, no way back"; "0" would only suspend
/// it, and re-enabling it with "1" makes the engine catch up the missed payments). The values
/// are Trust Payments' subscription additional notes; the JSON field name `transactionactive` in
/// a cancel request is not shown in any example found (PROVIDERS-MONEY §1, "Subscription
/// suspend / cancel"), and is the name the SUBSCRIPTION response and the seed's "deactivate"
/// update use.
///
/// paypipe knows the subscription by its first AUTH's transactionreference (the parent its
/// engine payments name), while the update takes the SUBSCRIPTION's own. So the order is three
/// requests, each read before the next is sent:
/// 1. TRANSACTIONQUERY by the first order's `orderreference` (signed; the SUBSCRIPTION shares the
///    AUTH's orderreference, being one request with it) finds the SUBSCRIPTION whose
///    `parenttransactionreference` is the subscription; already "3": succeeded, nothing sent;
/// 2. the TRANSACTIONUPDATE, with the query's credentials;
/// 3. the same query again: "3" in place is the order's success, and its records tell where the
///    paid period ends.
/// A lost answer is resolved by the query: the update sets an absolute value that nothing else
/// undoes ("3" is final), so when it is not in place, sending it again is its first effect.
enum TPCancel {
    static let updates = ["transactionactive": "3"]

    /// The signed query, which is also the order's resolution.
    static func query(order: Order, config: TrustPaymentsConfig) throws(Rejection) -> TPWebServicesRequest {
        let cancel = try SubscriptionCancel(order: order, fromUpstream: false)
        guard let origin = cancel.record?.orderId else { throw Rejection.missingParam(SubscriptionCancel.recordParam) }
        _ = try ParamReader(["subscription": .string(cancel.subscription)], allowed: ["subscription"], operation: "trustpayments cancel")
            .tpTransactionReference("subscription")
        return TPWebServices.transactionQuery(
            filters: [("orderreference", origin)], requestReference: TPWebServices.requestReference(for: order.key, purpose: "cancelquery"),
            config: config, kind: .orderQuery, transactionReference: nil)
    }

    /// The update of `subscriptionReference`, sent with `query`'s site, alias and credentials
    /// (the submitter holds no secrets of its own).
    static func update(following query: HTTPRequestSpec, subscriptionReference: String, key: OrderKey) -> HTTPRequestSpec? {
        guard let envelope = try? JSONValue.parse(query.body), let alias = envelope["alias"],
            let site = envelope["request"]?.arrayValue?.first?["filter"]?["sitereference"]
        else { return nil }
        let entry: JSONValue = [
            "requestreference": .string(TPWebServices.requestReference(for: key, purpose: "cancelupdate")),
            "requesttypedescriptions": ["TRANSACTIONUPDATE"],
            "filter": ["sitereference": site, "transactionreference": [["value": .string(subscriptionReference)]]],
            "updates": .object(updates.mapValues(JSONValue.string)),
        ]
        let body: JSONValue = ["alias": alias, "version": .string(TPWebServices.version), "request": [entry]]
        return HTTPRequestSpec(method: .POST, url: query.url, headers: query.headers, body: body.bytes)
    }

    /// The reading of one answer in the exchange.
    static func read(
        _ response: HTTPResponseSpec, to current: HTTPRequestSpec, in exchange: Exchange<TrustPaymentsConnector.Context>
    )
        -> ProviderReading
    {
        guard let request = TPWebServicesRequest(http: current), let cancel = try? SubscriptionCancel(order: exchange.order, fromUpstream: false)
        else { return .verdict(.unknown(reason: "the cancel's request no longer reads")) }
        if request.kind == .transactionUpdate {
            switch TPWebServices.classify(response, for: request) {
            case .succeeded:
                // Confirmed by reading it back, which also tells where the paid period ends.
                return .followUp(exchange.signed.request)
            case let other: return .verdict(other)
            }
        }
        let verdict = TPWebServices.classify(response, for: request)
        guard case .succeeded(let result) = verdict else {
            // The query changed nothing: whatever it answered, the subscription is as it was.
            if case .failed(let code, let message) = verdict {
                return .verdict(.unknown(reason: "the subscription query failed (\(code)): \(message)"))
            }
            return .verdict(verdict)
        }
        let records = (result["records"]?.arrayValue ?? []).compactMap(\.objectValue)
        guard let subscription = Self.subscription(in: records, parent: cancel.subscription),
            let reference = subscription["transactionreference"]?.stringValue
        else {
            return .verdict(
                .failed(
                    code: .referenceNotFound,
                    message:
                        "Trust Payments has no SUBSCRIPTION whose parent is \(cancel.subscription.prefix(64)) under order \(cancel.record?.orderId.prefix(64) ?? "")"
                ))
        }
        if TPErrorCode.read(subscription["transactionactive"]) == "3" {
            var stopped: [String: JSONValue] = [
                "subscription": .string(cancel.subscription), "subscriptionReference": .string(reference), "transactionactive": "3",
                "at": .string(cancel.at.rawValue),
            ]
            if let end = periodEnd(subscription: subscription, records: records, parent: cancel.subscription) {
                stopped[SubscriptionCancel.periodEndsAtResult] = .integer(end)
            }
            return .verdict(.succeeded(stopped))
        }
        if exchange.phase == .resolving {
            let reason = "the SUBSCRIPTION \(reference.prefix(64)) is not stopped at Trust Payments"
            return .verdict(exchange.resolvingBeforeResubmit ? .neverSeen(reason: reason) : .retry(reason: reason))
        }
        // Sent once only: an update answered "0" that a fresh query does not show is not sent blind again.
        guard exchange.followUps == 0 else {
            return .verdict(.unknown(reason: "Trust Payments accepted the update but the SUBSCRIPTION \(reference.prefix(64)) is not stopped"))
        }
        guard let update = update(following: current, subscriptionReference: reference, key: exchange.order.key) else {
            return .verdict(.unknown(reason: "cannot derive the update from the query"))
        }
        return .followUp(update)
    }

    /// The SUBSCRIPTION record of the series whose first AUTH is `parent`.
    static func subscription(in records: [[String: JSONValue]], parent: String) -> [String: JSONValue]? {
        records.first {
            $0["requesttypedescription"]?.stringValue == "SUBSCRIPTION" && $0["parenttransactionreference"]?.stringValue == parent
        }
    }

    /// Where the period paid by the series' latest successful AUTH ends (epoch ms, the UTC day
    /// its next payment falls due): its `transactionstartedtimestamp` plus the SUBSCRIPTION's
    /// `subscriptionfrequency` `subscriptionunit`s. nil when the records do not say.
    static func periodEnd(subscription: [String: JSONValue], records: [[String: JSONValue]], parent: String) -> Int64? {
        guard let unit = subscription["subscriptionunit"]?.stringValue.flatMap(TPSubscriptionUnit.init(rawValue:)),
            let frequency = subscription["subscriptionfrequency"].flatMap(TPErrorCode.read).flatMap({ Int($0) }), frequency >= 1
        else { return nil }
        let paid = records.filter { record in
            let reference = record["transactionreference"]?.stringValue
            return record["requesttypedescription"]?.stringValue == "AUTH" && TPErrorCode.read(record["errorcode"]) == TPErrorCode.ok
                && (reference == parent || record["parenttransactionreference"]?.stringValue == parent)
        }
        let days = paid.compactMap { record -> CivilDate? in
            guard let started = record["transactionstartedtimestamp"]?.stringValue else { return nil }
            return CivilDate(iso8601: String(started.prefix(10)))
        }
        guard let last = days.max() else { return nil }
        let next = unit == .month ? last.addingMonths(frequency) : last.addingDays(frequency)
        return next.daysSinceEpoch * 86_400_000
    }
}

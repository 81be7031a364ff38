import PaypipeCore

/// The frame a ledger RPC client puts before each request to match the reply, which the ledger
/// sends back with the same frame.
package enum LedgerRequestID {
    package static func frame(_ id: UInt64) -> [UInt8] { withUnsafeBytes(of: id.littleEndian) { Array($0) } }

    /// nil for a frame no client wrote.
    package static func parse(_ frame: [UInt8]) -> UInt64? {
        guard frame.count == 8 else { return nil }
        return UInt64(littleEndian: frame.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) })
    }
}

/// The ledger's request/reply messages (DEALER → ROUTER at `endpoints.ledgerRPC`): how callback
/// validators and pollers reach the pipeline's store without holding any state themselves.
/// One JSON object per frame; the client puts a request id frame before it.
package enum LedgerRequest: Sendable, Equatable {
    /// The order (merchant, orderId), for checking a callback against it.
    case lookup(OrderKey)
    /// The order of `merchant` a provider reference names (PhonePe authRequestId, Nets paymentId).
    case lookupRef(Provider, String, merchant: String)
    /// Hands on an authentic callback: its event id (nil when the provider gives none worth
    /// deduplicating) and the terminal outcome it leads to (nil when it changes nothing).
    /// Answered only after both are committed.
    case settle(OrderKey, event: String?, outcome: Outcome?)
    /// A poller (re)started: send it every pending Cleeng receipt again.
    case resumePolls
    /// A submitter takes (or renews) the leases of the work it holds, before sending anything:
    /// granted only for an order's current generation while it is open or unknown.
    case claim([LeaseClaim])
    /// Hands on what an authentic callback reported about subscriptions: recorded in one
    /// transaction, each at most once (`SubscriptionEvent.eventId`), and only if every
    /// subscription it names is known. Answered only after they are committed.
    case subscriptionEvents([SubscriptionEvent])
    /// A poller takes the entitlement checks that are due (at most `limit`); each is not handed
    /// out again for a while, so that two pollers do not both check it.
    case dueChecks(limit: Int)
    /// A poller's entitlement checks: what each one's answer read, under its hand-out's ticket.
    case checked([EntitlementCheckResult])
    /// One subscription's state and history, for upstream and operators.
    case subscription(merchant: String, provider: Provider, reference: String)

    package var json: JSONValue {
        switch self {
        case .lookup(let key): ["op": "lookup", "merchant": .string(key.merchant), "orderId": .string(key.orderId)]
        case .lookupRef(let provider, let ref, let merchant):
            ["op": "lookupRef", "provider": .string(provider.rawValue), "ref": .string(ref), "merchant": .string(merchant)]
        case .settle(let key, let event, let outcome):
            [
                "op": "settle", "merchant": .string(key.merchant), "orderId": .string(key.orderId),
                "event": event.map(JSONValue.string) ?? .null, "outcome": outcome.map { $0.json } ?? .null,
            ]
        case .resumePolls: ["op": "resumePolls"]
        case .subscriptionEvents(let events): ["op": "subscriptionEvents", "events": .array(events.map(\.json))]
        case .dueChecks(let limit): ["op": "dueChecks", "limit": .integer(Int64(limit))]
        case .checked(let results): ["op": "checked", "results": .array(results.map(\.json))]
        case .subscription(let merchant, let provider, let reference):
            ["op": "subscription", "merchant": .string(merchant), "provider": .string(provider.rawValue), "reference": .string(reference)]
        case .claim(let claims):
            [
                "op": "claim",
                "claims": .array(
                    claims.map {
                        [
                            "merchant": .string($0.key.merchant), "orderId": .string($0.key.orderId), "generation": .integer($0.generation),
                            "token": .integer(Int64(bitPattern: $0.token)),
                        ]
                    }),
            ]
        }
    }

    package static func parse(_ bytes: [UInt8]) throws(EnvelopeError) -> LedgerRequest {
        guard case .object(let o)? = try? JSONValue.parse(bytes), let op = o["op"]?.stringValue else {
            throw EnvelopeError("ledger request is not an object with an op")
        }
        func key() throws(EnvelopeError) -> OrderKey {
            guard let merchant = o["merchant"]?.stringValue, let orderId = o["orderId"]?.stringValue else {
                throw EnvelopeError("ledger request needs merchant and orderId")
            }
            return OrderKey(merchant: merchant, orderId: orderId)
        }
        switch op {
        case "lookup": return .lookup(try key())
        case "lookupRef":
            guard let provider = o["provider"]?.stringValue.map(Provider.init(rawValue:)), let ref = o["ref"]?.stringValue,
                let merchant = o["merchant"]?.stringValue
            else {
                throw EnvelopeError("lookupRef needs provider, ref and merchant")
            }
            return .lookupRef(provider, ref, merchant: merchant)
        case "settle":
            var outcome: Outcome?
            if let value = o["outcome"], value != .null {
                guard let parsed = try? Outcome.parse(value.bytes) else { throw EnvelopeError("settle.outcome is not an outcome") }
                outcome = parsed
            }
            return .settle(try key(), event: o["event"]?.stringValue, outcome: outcome)
        case "resumePolls": return .resumePolls
        case "subscriptionEvents":
            guard let items = o["events"]?.arrayValue, !items.isEmpty, items.count <= 64 else {
                throw EnvelopeError("subscriptionEvents needs events, an array of 1 to 64")
            }
            var events: [SubscriptionEvent] = []
            for item in items {
                guard let event = SubscriptionEvent(json: item) else {
                    throw EnvelopeError("an event of subscriptionEvents is not a subscription event")
                }
                events.append(event)
            }
            return .subscriptionEvents(events)
        case "dueChecks":
            guard let limit = o["limit"]?.integerValue, (1...1000).contains(limit) else {
                throw EnvelopeError("dueChecks needs a limit of 1 to 1000")
            }
            return .dueChecks(limit: Int(limit))
        case "checked":
            guard let items = o["results"]?.arrayValue, items.count <= 1000 else {
                throw EnvelopeError("checked needs results, an array of at most 1000")
            }
            var results: [EntitlementCheckResult] = []
            for item in items {
                guard let result = EntitlementCheckResult(json: item) else { throw EnvelopeError("a result of checked is not a check result") }
                results.append(result)
            }
            return .checked(results)
        case "subscription":
            guard let merchant = o["merchant"]?.stringValue, let provider = o["provider"]?.stringValue,
                let reference = o["reference"]?.stringValue
            else { throw EnvelopeError("subscription needs merchant, provider and reference") }
            return .subscription(merchant: merchant, provider: Provider(provider), reference: reference)
        case "claim":
            guard let items = o["claims"]?.arrayValue, items.count <= LeaseClaim.maxPerRequest else {
                throw EnvelopeError("claim needs claims, an array of at most \(LeaseClaim.maxPerRequest)")
            }
            var claims: [LeaseClaim] = []
            for item in items {
                guard let merchant = item["merchant"]?.stringValue, let orderId = item["orderId"]?.stringValue,
                    let generation = item["generation"]?.integerValue, let token = item["token"]?.integerValue
                else { throw EnvelopeError("each claim needs merchant, orderId, generation and token") }
                claims.append(
                    LeaseClaim(key: OrderKey(merchant: merchant, orderId: orderId), generation: generation, token: UInt64(bitPattern: token)))
            }
            return .claim(claims)
        default: throw EnvelopeError("unknown ledger op")
        }
    }
}

package enum LedgerReply: Sendable, Equatable {
    case order(StoredOrder?)
    /// `corrected`: the callback superseded a terminal outcome that said no money was taken.
    case settled(applied: Bool, duplicate: Bool, corrected: Bool = false)
    case resumed(count: Int)
    /// One answer per claim, in order: whether the lease is held.
    case claimed([Bool])
    /// `recorded`: events newly recorded; `duplicates`: events already recorded.
    case eventsRecorded(recorded: Int, duplicates: Int)
    /// A subscription the request names is not known: nothing was recorded.
    case unknownSubscription(String)
    case dueChecks([DueEntitlementCheck])
    /// One subscription's record and its events, oldest first (nil: no such subscription).
    case subscription(JSONValue?)
    case failure(String)

    package var json: JSONValue {
        switch self {
        case .order(let stored?):
            [
                "ok": true, "merchant": .string(stored.key.merchant), "orderId": .string(stored.key.orderId),
                "order": .string(stored.orderJSON), "state": .string(stored.state.rawValue),
                "pendingAt": stored.pendingAt.map(JSONValue.integer) ?? .null,
            ]
        case .order(nil): ["ok": true, "order": .null]
        case .settled(let applied, let duplicate, let corrected):
            ["ok": true, "applied": .bool(applied), "duplicate": .bool(duplicate), "corrected": .bool(corrected)]
        case .resumed(let count): ["ok": true, "count": .integer(Int64(count))]
        case .claimed(let granted): ["ok": true, "granted": .array(granted.map(JSONValue.bool))]
        case .eventsRecorded(let recorded, let duplicates):
            ["ok": true, "recorded": .integer(Int64(recorded)), "duplicates": .integer(Int64(duplicates))]
        case .unknownSubscription(let reference): ["ok": true, "unknownSubscription": .string(reference)]
        case .dueChecks(let checks): ["ok": true, "checks": .array(checks.map(\.json))]
        case .subscription(let record): ["ok": true, "subscription": record ?? .null]
        case .failure(let message): ["ok": false, "error": .string(message)]
        }
    }

    /// Reads a reply to `request`.
    package static func parse(_ bytes: [UInt8], for request: LedgerRequest) throws(EnvelopeError) -> LedgerReply {
        guard case .object(let o)? = try? JSONValue.parse(bytes), let ok = o["ok"]?.boolValue else {
            throw EnvelopeError("ledger reply is not an object with ok")
        }
        guard ok else { return .failure(o["error"]?.stringValue ?? "ledger error") }
        switch request {
        case .lookup, .lookupRef:
            guard let json = o["order"]?.stringValue else { return .order(nil) }
            guard let merchant = o["merchant"]?.stringValue, let orderId = o["orderId"]?.stringValue,
                let state = o["state"]?.stringValue.flatMap(OrderState.init(rawValue:))
            else { throw EnvelopeError("ledger lookup reply is incomplete") }
            return .order(
                StoredOrder(
                    key: OrderKey(merchant: merchant, orderId: orderId), orderJSON: json, state: state, pendingAt: o["pendingAt"]?.integerValue))
        case .settle:
            return .settled(
                applied: o["applied"]?.boolValue ?? false, duplicate: o["duplicate"]?.boolValue ?? false,
                corrected: o["corrected"]?.boolValue ?? false)
        case .resumePolls: return .resumed(count: Int(o["count"]?.integerValue ?? 0))
        case .claim(let claims):
            guard let granted = o["granted"]?.arrayValue?.map({ $0.boolValue ?? false }), granted.count == claims.count else {
                throw EnvelopeError("claim reply needs one answer per claim")
            }
            return .claimed(granted)
        case .subscriptionEvents, .checked:
            if let reference = o["unknownSubscription"]?.stringValue { return .unknownSubscription(reference) }
            return .eventsRecorded(recorded: Int(o["recorded"]?.integerValue ?? 0), duplicates: Int(o["duplicates"]?.integerValue ?? 0))
        case .dueChecks:
            return .dueChecks((o["checks"]?.arrayValue ?? []).compactMap(DueEntitlementCheck.init(json:)))
        case .subscription:
            // JSONValue takes `nil` as its own null, so the absent record is spelled out.
            guard let record = o["subscription"], record != .null else { return .subscription(Optional<JSONValue>.none) }
            return .subscription(record)
        }
    }
}

/// An entitlement check the ledger hands a poller: the subscription, where it stood, what its
/// opening kept for checks, and the ticket that names this hand-out.
package struct DueEntitlementCheck: Sendable, Equatable {
    package var merchant: String
    package var provider: Provider
    package var reference: String
    package var state: SubscriptionState
    package var expiresAt: Int64?
    package var check: JSONValue
    /// Drawn afresh at each hand-out: the ledger takes a reading only with the ticket of the
    /// check's latest hand-out, so a poller can answer for no subscription it was not asked about.
    package var ticket: Int64

    package init(
        merchant: String, provider: Provider, reference: String, state: SubscriptionState, expiresAt: Int64?, check: JSONValue, ticket: Int64
    ) {
        self.merchant = merchant
        self.provider = provider
        self.reference = reference
        self.state = state
        self.expiresAt = expiresAt
        self.check = check
        self.ticket = ticket
    }

    package var json: JSONValue {
        [
            "merchant": .string(merchant), "provider": .string(provider.rawValue), "reference": .string(reference),
            "state": .string(state.rawValue), "expiresAt": expiresAt.map(JSONValue.integer) ?? .null, "check": check,
            "ticket": .integer(ticket),
        ]
    }

    package init?(json: JSONValue) {
        guard let merchant = json["merchant"]?.stringValue, let provider = json["provider"]?.stringValue,
            let reference = json["reference"]?.stringValue, let state = json["state"]?.stringValue.flatMap(SubscriptionState.init(rawValue:)),
            let check = json["check"], let ticket = json["ticket"]?.integerValue
        else { return nil }
        self.init(
            merchant: merchant, provider: Provider(provider), reference: reference, state: state, expiresAt: json["expiresAt"]?.integerValue,
            check: check, ticket: ticket)
    }
}

/// One entitlement check's answer as a poller hands it back: the check's subscription and
/// ticket, and what the provider's answer read (nil when the check got no answer). The event
/// the reading makes is the ledger's to derive, from the subscription as it stands in the store.
package struct EntitlementCheckResult: Sendable, Equatable {
    package var merchant: String
    package var provider: Provider
    package var reference: String
    package var ticket: Int64
    package var reading: EntitlementReading?

    package init(merchant: String, provider: Provider, reference: String, ticket: Int64, reading: EntitlementReading?) {
        self.merchant = merchant
        self.provider = provider
        self.reference = reference
        self.ticket = ticket
        self.reading = reading
    }

    package var json: JSONValue {
        var o: [String: JSONValue] = [
            "merchant": .string(merchant), "provider": .string(provider.rawValue), "reference": .string(reference), "ticket": .integer(ticket),
        ]
        if let reading {
            o["granted"] = .bool(reading.granted)
            o["expiresAt"] = reading.expiresAt.map(JSONValue.integer) ?? .null
        }
        return .object(o)
    }

    package init?(json: JSONValue) {
        guard let merchant = json["merchant"]?.stringValue, let provider = json["provider"]?.stringValue,
            let reference = json["reference"]?.stringValue, let ticket = json["ticket"]?.integerValue
        else { return nil }
        let reading = json["granted"]?.boolValue.map { EntitlementReading(granted: $0, expiresAt: json["expiresAt"]?.integerValue) }
        self.init(merchant: merchant, provider: Provider(provider), reference: reference, ticket: ticket, reading: reading)
    }
}

/// One copy of an order's work, named by the dispatch it came from and that dispatch's token.
package struct LeaseClaim: Sendable, Hashable {
    package var key: OrderKey
    package var generation: Int64
    package var token: UInt64
    /// Claims in one request; a submitter splits larger batches.
    package static let maxPerRequest = 1024

    package init(key: OrderKey, generation: Int64, token: UInt64) {
        self.key = key
        self.generation = generation
        self.token = token
    }

    package var ticket: DispatchTicket { DispatchTicket(generation: generation, token: token) }
}

/// Where an order stands in the ledger.
package enum OrderState: String, Sendable, CaseIterable {
    case open, pending, unknown, terminal
    /// Ended `unknown` with NEEDS_REVIEW: never dispatched or checked again; a genuine callback
    /// may still settle it, and operators list it.
    case review
}

/// One stored order as a callback validator sees it.
package struct StoredOrder: Sendable, Equatable {
    package var key: OrderKey
    package var orderJSON: String
    package var state: OrderState
    package var pendingAt: Int64?

    package init(key: OrderKey, orderJSON: String, state: OrderState, pendingAt: Int64?) {
        self.key = key
        self.orderJSON = orderJSON
        self.state = state
        self.pendingAt = pendingAt
    }
}

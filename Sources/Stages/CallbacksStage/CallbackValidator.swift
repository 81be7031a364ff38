import PaypipeCore
import StageRuntime
import StageWire

/// What the callback endpoint answers, and how `/metrics` counts it.
package struct CallbackAnswer: Sendable, Equatable {
    package var status: Int
    /// `applied`, `duplicate`, `no_change`, or the rejection code (e.g. `BAD_CHECKSUM`).
    package var result: String
    package var message: String

    /// `recordedAs`: the label for an event newly recorded that changes no order.
    static func handedOn(applied: Bool, duplicate: Bool, recordedAs: String? = nil) -> CallbackAnswer {
        if !applied, !duplicate, let recordedAs {
            return CallbackAnswer(status: 200, result: recordedAs, message: "recorded; no order change")
        }
        let result = applied ? "applied" : duplicate ? "duplicate" : "no_change"
        return CallbackAnswer(status: 200, result: result, message: duplicate ? "already processed" : applied ? "order updated" : "nothing to change")
    }

    static func rejected(_ rejection: CallbackRejection) -> CallbackAnswer {
        CallbackAnswer(status: rejection.status, result: rejection.code.rawValue, message: rejection.message)
    }

    package var isRejection: Bool { status >= 400 }

    /// `{"status":"applied"}` or `{"error":{"code","message"}}`; messages never carry secrets.
    package var body: String {
        let json: JSONValue =
            isRejection
            ? ["error": ["code": .string(result), "message": .string(message)]]
            : ["status": .string(result), "message": .string(message)]
        return json.serialized
    }
}

/// The callback validator's core (docs/protocol.md, "Callbacks in"): every authenticity and
/// consistency check is the route's connector's; this type finds the orders they ask for and
/// hands an authentic decision to the ledger, answering 2xx only once the ledger has committed
/// it. It keeps no state.
package struct CallbackValidator: Sendable {
    let directory: any OrderDirectory
    let catalog: OrderCatalog
    let http: any ProviderHTTPTransport
    let limiter: CallbackRateLimiter

    package init(
        directory: any OrderDirectory, catalog: OrderCatalog, http: any ProviderHTTPTransport, limiter: CallbackRateLimiter = CallbackRateLimiter()
    ) {
        self.directory = directory
        self.catalog = catalog
        self.http = http
        self.limiter = limiter
    }

    /// Runs one route's connector, then settles what it decided. A route's rate limit is applied
    /// first, before the handler reads the body or asks for an order.
    package func handle(_ route: CallbackRoute, _ request: CallbackRequest, from remoteAddress: String? = nil) async -> CallbackAnswer {
        if let refusal = limiter.refusal(route, from: remoteAddress, body: request.body) { return .rejected(refusal) }
        let decision: CallbackDecision
        do {
            let context = CallbackContext(orders: Orders(directory: directory, catalog: catalog), http: http, remoteAddress: remoteAddress)
            decision = try await route.handle(request, context)
        } catch {
            return .rejected(error)
        }
        return await settle(decision)
    }

    /// Hands an authentic callback to the ledger: terminal verdicts become the order's outcome;
    /// others only record the event so a redelivery is recognised.
    func settle(_ decision: CallbackDecision) async -> CallbackAnswer {
        guard let order = decision.order else { return await record(decision.subscriptionEvents) }
        var outcome: Outcome?
        switch decision.verdict {
        case .succeeded(let result)?: outcome = Outcome(order: order, status: .succeeded, result: result)
        case .failed(let code, let message)?:
            outcome = Outcome(order: order, status: .failed, result: decision.failureResult, error: .init(code: code, message: message))
        case .pending?, .retry?, .unknown?, .neverSeen?, nil: outcome = nil
        }
        // Event ids are namespaced by provider, and long ones are shortened to a digest.
        let eventKey = decision.event.map { event in
            let full = "\(order.provider.rawValue)|\(event)"
            return full.utf8.count <= 300 ? full : "\(full.prefix(40))#\(Digest.sha256Hex(Array(full.utf8)))"
        }
        do {
            guard
                case .settled(let applied, let duplicate, let corrected) = try await directory.call(
                    .settle(order.key, event: eventKey, outcome: outcome))
            else {
                return .rejected(.ledgerUnavailable("unexpected answer from the order store; retry later"))
            }
            let answer =
                corrected
                ? CallbackAnswer(status: 200, result: "correction", message: "order corrected: the provider took the money")
                : .handedOn(applied: applied, duplicate: duplicate, recordedAs: decision.event == nil ? nil : decision.recordedAs)
            guard !decision.subscriptionEvents.isEmpty else { return answer }
            // Also the subscription's event (recorded after the order's result, which may have
            // opened the subscription). One the order did not open (its first payment failed)
            // is nobody's, and not the provider's to send again; one not recorded for want of
            // the ledger is.
            let events = await record(decision.subscriptionEvents)
            return events.status == 503 || events.result == "event" ? events : answer
        } catch {
            return .rejected(.ledgerUnavailable("the order store did not confirm; retry later"))
        }
    }
}

extension CallbackValidator {
    /// Hands what an authentic callback reported about subscriptions to the ledger: 2xx once
    /// recorded (or already recorded), 404 while a subscription it names is not known, so that
    /// the provider delivers it again.
    func record(_ events: [SubscriptionEvent]) async -> CallbackAnswer {
        guard let first = events.first else { return .handedOn(applied: false, duplicate: false) }
        do {
            switch try await directory.call(.subscriptionEvents(events)) {
            case .eventsRecorded(let recorded, _):
                return recorded > 0
                    ? CallbackAnswer(status: 200, result: "event", message: "subscription event recorded")
                    : .handedOn(applied: false, duplicate: true)
            case .unknownSubscription:
                return .rejected(.subscriptionNotFound(first.provider, merchant: first.merchant))
            default:
                return .rejected(.ledgerUnavailable("unexpected answer from the order store; retry later"))
            }
        } catch {
            return .rejected(.ledgerUnavailable("the order store did not confirm; retry later"))
        }
    }
}

/// Order lookups for the connectors, answered by the ledger.
struct Orders: CallbackOrderLookup {
    let directory: any OrderDirectory
    let catalog: OrderCatalog

    func order(_ key: OrderKey, provider: Provider) async throws(CallbackRejection) -> Order {
        try await stored(.lookup(key), merchant: key.merchant, provider: provider)
    }

    func order(reference: String, provider: Provider, merchant: String) async throws(CallbackRejection) -> Order {
        try await stored(.lookupRef(provider, reference, merchant: merchant), merchant: merchant, provider: provider)
    }

    /// The stored order, which must belong to `merchant` and `provider`.
    func stored(_ request: LedgerRequest, merchant: String, provider: Provider) async throws(CallbackRejection) -> Order {
        let reply: LedgerReply
        do {
            reply = try await directory.call(request)
        } catch {
            throw .ledgerUnavailable()
        }
        guard case .order(let stored?) = reply, stored.key.merchant.hasSameUTF8(as: merchant),
            case .order(let order) = Order.decode(frame: Array(stored.orderJSON.utf8), catalog: catalog), order.provider == provider
        else {
            throw .orderNotFound(provider, merchant: merchant)
        }
        return order
    }
}

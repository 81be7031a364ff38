import PaypipeCore

extension Provider {
    public static let phonepe = Provider("phonepe")
}

extension Operation {
    public static let authInit = Operation(.phonepe, "authInit")
}

/// PhonePe recurring auth behind the pipeline's seam: auth/init, the auth status call that
/// resolves it, and the S2S callback.
public struct PhonePeConnector: ProviderConnector {
    public static let provider = Provider.phonepe
    public static let settingsSection: any MerchantSection.Type = PhonePeConfig.self
    public static let operations = [
        // PENNY_DROP authorises without a first debit, so it carries no amount.
        OperationSpec(
            .authInit,
            movesMoney: { params in
                (params["authWorkflowType"]?.stringValue ?? PhonePeAuthWorkflowType.transaction.rawValue)
                    == PhonePeAuthWorkflowType.transaction.rawValue
            }),
        // The notification moves no money; the debit does.
        OperationSpec(.debitNotify, movesMoney: false),
        OperationSpec(.debitExecute, movesMoney: true),
        OperationSpec(.schedulePhonePe, movesMoney: false),
        OperationSpec(.cancelPhonePe, movesMoney: false),
        OperationSpec(.phonePeRefund, movesMoney: true),
    ]

    /// What reading auth/init and auth status answers needs beyond the order.
    public struct Context: ConnectorContext {
        var authRequestId: String
        var merchantId: String

        public init?(json: JSONValue) {
            guard let authRequestId = json["authRequestId"]?.stringValue, let merchantId = json["merchantId"]?.stringValue else { return nil }
            self.authRequestId = authRequestId
            self.merchantId = merchantId
        }

        init(authRequestId: String, merchantId: String) {
            self.authRequestId = authRequestId
            self.merchantId = merchantId
        }

        public var json: JSONValue { ["authRequestId": .string(authRequestId), "merchantId": .string(merchantId)] }
    }

    let config: PaypipeConfig
    /// Every merchant with PhonePe settings, by name.
    let merchants: [String: PhonePeMerchant]

    public init(config: PaypipeConfig) async {
        self.config = config
        merchants = config.merchants.compactMapValues { $0.phonepe.map(PhonePeMerchant.init(config:)) }
    }

    /// The merchant's PhonePe settings; an unknown merchant, or one without PhonePe settings,
    /// gets the config's own rejection.
    func merchant(_ name: String) throws(Rejection) -> PhonePeMerchant {
        // Byte for byte, as `PaypipeConfig.merchant(_:)`: a dictionary lookup also matches
        // canonically equivalent spellings.
        if let index = merchants.index(forKey: name), merchants[index].key.hasSameUTF8(as: name) { return merchants[index].value }
        return PhonePeMerchant(config: try config.merchant(name).require(\.phonepe, .phonepe))
    }

    // MARK: - Signer

    public func sign(_ order: Order, purpose: DispatchPurpose, nowSeconds: Int64) throws(Rejection) -> Signed<Context> {
        if order.operation == .cancelPhonePe {
            let cancel = try PhonePeCancel(order: order)
            let phonepe = try merchant(order.merchant)
            let request = try cancel.request(merchant: phonepe)
            let context = Context(authRequestId: cancel.subscriptionId, merchantId: phonepe.config.merchantId)
            return .request(SignedRequest(request: request, resolve: request, context: context))
        }
        if order.operation == .phonePeRefund { return try signRefund(order, statusOnly: purpose.isStatusCheck) }
        if order.operation != .authInit { return try signDebit(order) }
        let authInit = try PhonePeAuthInit(order: order, merchant: try merchant(order.merchant))
        let context = Context(authRequestId: authInit.authRequestId, merchantId: authInit.merchantId)
        return .request(SignedRequest(request: authInit.request, resolve: authInit.statusRequest, context: context))
    }

    /// The callback never came: only the signed auth status call. The callback scheme (an
    /// auth/init field) is not required, so an order accepted before phonepe.callbackScheme was
    /// configured still resolves.
    public func signStatusCheck(
        _ order: Order, pending: [String: JSONValue], purpose: DispatchPurpose, nowSeconds: Int64
    ) throws(Rejection) -> Signed<Context>? {
        if order.operation == .phonePeRefund { return try signRefund(order, statusOnly: true) }
        if order.operation != .authInit { return try signDebit(order, statusOnly: true) }
        let phonepe = try merchant(order.merchant)
        let status = try PhonePeAuthStatus.request(order: order, config: phonepe.config, checksum: phonepe.checksum)
        let context = Context(authRequestId: try PhonePeAuthInitParams(order: order).authRequestId, merchantId: phonepe.config.merchantId)
        return .request(SignedRequest(request: status, resolve: status, context: context))
    }

    /// A scheduled debit's notification or execution, resolved by the debit-status call.
    func signDebit(_ order: Order, statusOnly: Bool = false) throws(Rejection) -> Signed<Context> {
        let debit = try PhonePeDebit(order: order)
        let phonepe = try merchant(order.merchant)
        let (request, status) = try debit.requests(merchant: phonepe)
        let context = Context(authRequestId: debit.transactionId, merchantId: phonepe.config.merchantId)
        return .request(SignedRequest(request: statusOnly ? status : request, resolve: status, context: context))
    }

    /// A refund, resolved by its own status call.
    func signRefund(_ order: Order, statusOnly: Bool) throws(Rejection) -> Signed<Context> {
        let refund = try PhonePeRefund(order: order)
        let phonepe = try merchant(order.merchant)
        let (request, status) = try refund.requests(merchant: phonepe)
        let context = Context(authRequestId: refund.transactionId, merchantId: phonepe.config.merchantId)
        return .request(SignedRequest(request: statusOnly ? status : request, resolve: status, context: context))
    }

    // MARK: - Submitter

    public func read(_ response: HTTPResponseSpec, to current: HTTPRequestSpec, in exchange: Exchange<Context>) -> ProviderReading {
        let context = exchange.signed.context
        if exchange.order.operation == .cancelPhonePe {
            guard let cancel = try? PhonePeCancel(order: exchange.order) else {
                return .verdict(.unknown(reason: "the cancel order's params no longer read"))
            }
            return .verdict(cancel.classify(response))
        }
        if exchange.order.operation == .phonePeRefund {
            guard let refund = try? PhonePeRefund(order: exchange.order) else {
                return .verdict(.unknown(reason: "the refund order's params no longer read"))
            }
            guard exchange.phase == .resolving || exchange.purpose.isStatusCheck else { return .verdict(refund.classify(response)) }
            return .verdict(
                refund.classifyStatus(
                    response, beforeResubmit: exchange.resolvingBeforeResubmit, finalCheck: exchange.purpose == .expiryCheck))
        }
        if exchange.order.operation != .authInit {
            guard let debit = try? PhonePeDebit(order: exchange.order) else {
                return .verdict(.unknown(reason: "the debit order's params no longer read"))
            }
            return .verdict(
                exchange.phase == .resolving || exchange.purpose.isStatusCheck
                    ? debit.classifyStatus(response, beforeResubmit: exchange.resolvingBeforeResubmit) : debit.classify(response))
        }
        guard exchange.phase == .resolving else {
            return .verdict(PhonePeAuthInit.classify(response, authRequestId: context.authRequestId))
        }
        let verdict = PhonePeAuthStatus.classify(response, order: exchange.order, merchantId: context.merchantId)
        if case .failed(OutcomeErrorCode.authRequestNotFound, let message) = verdict {
            if exchange.resolvingBeforeResubmit { return .verdict(.neverSeen(reason: message)) }
            // The auth/init whose answer was lost may not have reached PhonePe yet (held in a
            // proxy or a queue): "not found" now does not mean it never will be, so the order is
            // not told it failed. It stays unknown, and its redelivery asks again before anything
            // is sent again.
            if exchange.purpose == .submit { return .verdict(.unknown(reason: message)) }
        }
        // A status check's `pending` (the customer has not authorised) keeps the order pending
        // until its last check, which ends it EXPIRED.
        return .verdict(verdict)
    }

    /// PhonePe refuses a repeated authRequestId, so a redelivered auth/init asks the auth status
    /// by that id first; only "not found" sends auth/init again.
    public func redelivery(of exchange: Exchange<Context>) -> Redelivery {
        // A repeated cancel answers the mandate's state (`PhonePeCancel`).
        if exchange.order.operation == .cancelPhonePe { return .resubmit }
        return exchange.signed.resolve.map(Redelivery.resolveFirst) ?? .review
    }

    // MARK: - Callbacks

    public var callbackRoutes: [CallbackRoute] {
        [
            CallbackRoute(path: "/callbacks/phonepe", label: "phonepe", headers: ["X-VERIFY"]) { request, orders throws(CallbackRejection) in
                try await callback(request, orders: orders)
            }
        ]
    }

    /// The checksum with the salt of the merchant the body names, then the order by
    /// authRequestId; the amount and references are checked against the order.
    func callback(_ request: CallbackRequest, orders: any CallbackOrderLookup) async throws(CallbackRejection) -> CallbackDecision {
        let envelope = try PhonePeCallbackEnvelope(body: request.body)
        var lastError = CallbackRejection.forged(.badChecksum, "no merchant is configured with this PhonePe merchantId")
        var authenticated: (String, String, PhonePeCallback)?
        for (name, merchant) in config.merchants.sorted(by: { $0.key < $1.key }) where merchant.phonepe?.merchantId == envelope.claimedMerchantId {
            guard let phonepe = merchant.phonepe, let checksum = merchants[name]?.checksum else { continue }
            do {
                authenticated = (name, phonepe.merchantId, try envelope.authenticate(xVerify: request.header("X-VERIFY"), checksum: checksum))
                break
            } catch {
                lastError = error
            }
        }
        guard let (merchant, merchantId, callback) = authenticated else { throw lastError }
        guard callback.callbackType == .auth else {
            let events = try callback.subscriptionEvent(merchant: merchant).map { [$0] } ?? []
            // A debit paypipe made on schedule is also its order's result.
            guard callback.callbackType == .debit, let transactionId = callback.data["transactionId"]?.stringValue,
                transactionId.hasPrefix(ScheduledAttempt.attemptReferencePrefix)
            else { return CallbackDecision(subscriptionEvents: events) }
            let order = try await orders.order(reference: transactionId, provider: .phonepe, merchant: merchant)
            guard let debit = try? PhonePeDebit(order: order), let transaction = callback.data["transactionDetails"]?.objectValue else {
                return CallbackDecision(subscriptionEvents: events)
            }
            var decision = CallbackDecision(
                order: order, event: "DEBIT|\(transactionId)|\(transaction["state"]?.stringValue ?? "-")", verdict: debit.settles(transaction))
            decision.subscriptionEvents = events
            return decision
        }
        let order = try await orders.order(reference: callback.authRequestId, provider: .phonepe, merchant: merchant)
        switch callback.effect(order: order, merchantId: merchantId) {
        case .ignored:
            return CallbackDecision(order: order, event: callback.dedupeKey, verdict: nil, recordedAs: Self.recordedLabel(callback.callbackType))
        case .verdict(let verdict): return CallbackDecision(order: order, event: callback.dedupeKey, verdict: verdict)
        }
    }

    /// The `result` label in `paypipe_callbacks_total` for an authentic callback that decides
    /// nothing (NOTIFY and DEBIT are about later debits): one per known type, so the label set stays small.
    static func recordedLabel(_ type: PhonePeCallbackType) -> String {
        switch type {
        case .notify: "recorded_notify"
        case .debit: "recorded_debit"
        case .subscription: "recorded_subscription"
        default: "recorded_other"
        }
    }

    // MARK: - Ledger

    /// The authRequestId is derived from the order, so it is indexed before auth/init leaves.
    /// PhonePe assigns no reference of its own: the authRequestId a pending outcome carries is
    /// this one, so `callbackReferences(in:)` keeps the default (none), and the ledger does not
    /// index the same reference a second time. An order whose other params the signer then
    /// rejects keeps its reference: no request under it ever reaches PhonePe.
    public func callbackReferences(for order: Order) -> [String] {
        if order.operation == .debitExecute { return PhonePeDebit.transactionId(of: order).map { [$0] } ?? [] }
        return PhonePeAuthInitParams.authRequestId(of: order).map { [$0] } ?? []
    }

    /// A debit whose DEBIT callback does not come, and a refund PhonePe has not settled yet, are
    /// asked after as a mandate's auth is.
    public func pendingFollowUp(for operation: Operation, timers: PaypipeConfig.Timers) -> PendingFollowUp? {
        operation == .authInit || operation == .debitExecute || operation == .phonePeRefund
            ? .statusCheck(afterMilliseconds: timers[.phonepeCallbackWait]) : nil
    }

    // MARK: - Subscriptions

    /// An authorised mandate is the subscription its later DEBIT, NOTIFY and SUBSCRIPTION
    /// callbacks name by PhonePe's subscriptionId, which the order carries.
    public func opensSubscription(_ operation: Operation) -> Bool { operation == .authInit }

    public var scheduledCharging: (any ScheduledCharging)? { PhonePeScheduledCharging() }

    public func declineClass(of code: String) -> DeclineClass? { PhonePeDeclines.table[code] }
    public var refunding: (any Refunding)? { PhonePeRefunding() }

    public func subscriptionOpening(for order: Order, outcome: Outcome) -> SubscriptionOpening? {
        (try? PhonePeAuthInitParams(order: order)).map { SubscriptionOpening(reference: $0.subscriptionId) }
    }
}

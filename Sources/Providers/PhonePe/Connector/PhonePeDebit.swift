import PaypipeCore

extension Operation {
    /// The pre-debit notification of a scheduled debit (`POST /v3/recurring/debit/init`).
    public static let debitNotify = Operation(.phonepe, "debitNotify")
    /// The debit itself (`POST /v3/recurring/debit/execute`), after its notification.
    public static let debitExecute = Operation(.phonepe, "debitExecute")
    public static let schedulePhonePe = Operation(.phonepe, ScheduleChange.operationName)
}

/// A scheduled debit of a PhonePe mandate (PhonePe's recurring reference, "Recurring INIT",
/// "Recurring Debit Execute", "Debit Execute Status"): the notification, then the debit, both
/// under one `transactionId` the ledger derives from the subscription, the cycle and the
/// attempt. Each is an order of its own; the debit-status call resolves either, so neither is
/// ever sent blind a second time.
public struct PhonePeDebit: Sendable, Equatable {
    public var operation: Operation
    public var subscriptionId: String
    public var merchantUserId: String
    public var transactionId: String
    /// The notification's id (execute only).
    public var notificationId: String?
    /// Paise.
    public var amount: Int64

    static let allowedKeys: Set<String> = ["subscriptionId", "merchantUserId", "transactionId", "notificationId"]

    public init(order: Order) throws(Rejection) {
        guard order.operation == .debitNotify || order.operation == .debitExecute else {
            throw Rejection(.unknownOperation, field: "operation", "expected phonepe debitNotify or debitExecute, got \(order.operation.rawValue)")
        }
        let params = try ParamReader(order.params, allowed: Self.allowedKeys, operation: "phonepe \(order.operation.rawValue)")
        operation = order.operation
        subscriptionId = try params.string("subscriptionId", length: 1...PhonePeRules.subscriptionIdMaxLength, charset: .identifier)
        merchantUserId = try params.string("merchantUserId", length: 1...PhonePeRules.merchantUserIdMaxLength, charset: .identifier)
        transactionId = try params.string("transactionId", length: 1...PhonePeRules.authRequestIdMaxLength, charset: .identifier)
        notificationId =
            order.operation == .debitExecute ? try params.string("notificationId", length: 1...64, charset: .identifier) : nil
        guard let amount = order.amount, amount > 0, order.currency == PhonePeRules.currency else {
            throw Rejection(.invalidCurrency, field: "currency", "a phonepe debit takes a positive amount in paise and currency INR")
        }
        self.amount = amount
    }

    /// The transactionId a debit order names, read alone (the ledger indexes the debit's, which
    /// its DEBIT callback names).
    public static func transactionId(of order: Order) -> String? {
        guard order.operation == .debitExecute, case .string(let id)? = order.params["transactionId"],
            PhonePeRules.isIdentifier(id, maxLength: PhonePeRules.authRequestIdMaxLength)
        else { return nil }
        return id
    }

    /// The signed request, and the signed debit-status call that resolves it.
    func requests(merchant: PhonePeMerchant) throws(Rejection) -> (request: HTTPRequestSpec, status: HTTPRequestSpec) {
        let (baseURL, merchantId) = try merchant.endpoint.get()
        var writer = JSONObjectWriter(capacity: 256)
        let path: String
        if let notificationId {
            path = PhonePeRules.debitExecutePath
            writer.string("merchantId", merchantId)
            writer.string("merchantUserId", merchantUserId)
            writer.string("notificationId", notificationId)
            writer.string("subscriptionId", subscriptionId)
            writer.string("transactionId", transactionId)
        } else {
            path = PhonePeRules.debitInitPath
            writer.integer("amount", amount)
            writer.value("autoDebit", .bool(false))
            writer.string("merchantId", merchantId)
            writer.string("merchantUserId", merchantUserId)
            writer.string("subscriptionId", subscriptionId)
            writer.string("transactionId", transactionId)
        }
        let payload = Base64.encodeToString(writer.finish(), .standard)
        var headers = [
            HTTPHeader("Content-Type", "application/json"), HTTPHeader("X-VERIFY", merchant.checksum.xVerify(payloadBase64: payload, apiPath: path)),
        ]
        if notificationId == nil { headers.append(HTTPHeader("X-CALLBACK-URL", merchant.config.callbackURL)) }
        let request = HTTPRequestSpec(method: .POST, url: baseURL + path, headers: headers, body: Array("{\"request\":\"\(payload)\"}".utf8))
        let statusPath = PhonePeRules.debitStatusPathPrefix + merchantId + "/" + transactionId
        let status = HTTPRequestSpec(
            method: .GET, url: baseURL + statusPath,
            headers: [HTTPHeader("Content-Type", "application/json"), HTTPHeader("X-VERIFY", merchant.checksum.xVerify(path: statusPath))])
        return (request, status)
    }

    /// The answer to the notification or the debit. PhonePe answers terminal failures with
    /// `success: true` and the state in `data`; a refusal with its own code took no effect, but
    /// for a duplicate (`PhonePeRules.duplicateCode`), whose earlier request may have.
    public func classify(_ response: HTTPResponseSpec) -> ProviderVerdict {
        let status = response.status
        if status == 429 || status >= 500 { return .unknown(reason: "PhonePe \(operation.rawValue) answered HTTP \(status)") }
        guard let envelope = PhonePeResponse(json: response.body) else {
            return .unknown(reason: "PhonePe \(operation.rawValue) answered HTTP \(status) without a readable response envelope")
        }
        guard envelope.code == "SUCCESS", envelope.success != false, let data = envelope.data else {
            guard let code = envelope.code, PhonePeRules.isIdentifier(code, maxLength: 64), code != "INTERNAL_SERVER_ERROR" else {
                return .unknown(reason: "PhonePe \(operation.rawValue) answered HTTP \(status) without a code")
            }
            if code == PhonePeRules.duplicateCode {
                return .unknown(reason: "PhonePe has seen this transactionId before; the earlier request decides")
            }
            return .failed(code: .phonePe(code), message: envelope.shortMessage)
        }
        return notificationId == nil ? readNotification(data) : readDebit(data)
    }

    /// The debit-status answer: what became of the notification or the debit. "Not found" before
    /// a resubmit means PhonePe never saw it; anything that does not settle it is `unknown`.
    public func classifyStatus(_ response: HTTPResponseSpec, beforeResubmit: Bool) -> ProviderVerdict {
        let status = response.status
        if status == 429 || status >= 500 { return .unknown(reason: "PhonePe debit status answered HTTP \(status)") }
        guard let envelope = PhonePeResponse(json: response.body) else {
            return .unknown(reason: "PhonePe debit status answered HTTP \(status) without a readable response envelope")
        }
        let code = envelope.code ?? ""
        if PhonePeRules.notFoundCodes.contains(code) {
            let reason = "PhonePe has no debit \(transactionId) (\(code))"
            return beforeResubmit ? .neverSeen(reason: reason) : .unknown(reason: reason)
        }
        guard code == "SUCCESS", let data = envelope.data else {
            return .unknown(reason: "PhonePe debit status answered HTTP \(status) code \(code.isEmpty ? "absent" : String(code.prefix(64)))")
        }
        guard notificationId != nil else {
            guard let notification = data["notificationDetails"]?.objectValue else {
                return beforeResubmit
                    ? .neverSeen(reason: "PhonePe has no notification for \(transactionId)") : .unknown(reason: "no notification yet")
            }
            return readNotification(notification)
        }
        guard let transaction = data["transactionDetails"]?.objectValue else {
            // Notified, but no debit yet: the execute never reached PhonePe.
            return beforeResubmit
                ? .neverSeen(reason: "PhonePe has no debit for \(transactionId)") : .pending(["transactionId": .string(transactionId)])
        }
        return readDebit(transaction)
    }

    private func readNotification(_ data: [String: JSONValue]) -> ProviderVerdict {
        guard let notificationId = data["notificationId"]?.stringValue, PhonePeRules.isIdentifier(notificationId, maxLength: 64) else {
            return .unknown(reason: "PhonePe's notification answer carries no notificationId")
        }
        if data["state"]?.stringValue == "FAILED" {
            return .failed(code: .notifyFailed, message: "PhonePe did not notify the customer of the debit")
        }
        var result: [String: JSONValue] = ["transactionId": .string(transactionId), "notificationId": .string(notificationId)]
        for key in ["validAfter", "validUpto"] {
            if let time = Self.epochMilliseconds(data[key]) { result[key] = .integer(time) }
        }
        return .succeeded(result)
    }

    /// What an authentic DEBIT callback's `transactionDetails` settle: only a final state does.
    public func settles(_ transaction: [String: JSONValue]) -> ProviderVerdict? {
        switch readDebit(transaction) {
        case .pending: nil
        case let verdict: verdict
        }
    }

    private func readDebit(_ data: [String: JSONValue]) -> ProviderVerdict {
        let result: [String: JSONValue] = [
            "transactionId": .string(transactionId), "providerReferenceId": data["providerReferenceId"] ?? .null,
        ]
        if let paid = data["amount"]?.integerValue, paid != amount {
            return .failed(code: .amountMismatch, message: "PhonePe reports a debit of \(paid), the order is for \(amount)")
        }
        switch data["state"]?.stringValue {
        case "COMPLETED"?, "SUCCESS"?: return .succeeded(result.filter { $0.value != .null })
        case "FAILED"?:
            let code = data["payResponseCode"]?.stringValue.flatMap { PhonePeRules.isIdentifier($0, maxLength: 64) ? $0 : nil }
            return .failed(code: code.map { .phonePe($0) } ?? .debitFailed, message: "PhonePe declined the debit")
        default: return .pending(["transactionId": .string(transactionId)])
        }
    }

    /// PhonePe writes its epoch-ms times sometimes as numbers, sometimes as strings.
    static func epochMilliseconds(_ value: JSONValue?) -> Int64? {
        value?.integerValue ?? value?.stringValue.flatMap { Int64($0) }
    }
}

extension OutcomeErrorCode {
    /// `failed`: PhonePe refused to notify the customer of a debit (the attempt is declined).
    public static let notifyFailed = OutcomeErrorCode(rawValue: "NOTIFY_FAILED")
    /// `failed`: the debit failed and PhonePe gave no usable `payResponseCode`.
    public static let debitFailed = OutcomeErrorCode(rawValue: "DEBIT_FAILED")
}

/// PhonePe mandates are debited by the merchant, so paypipe does, on schedule: the notification
/// a day ahead (PhonePe's autopay documentation: the customer is told "their debit is scheduled
/// after 24 hours"), then the debit on the due date, not before the notification's `validAfter`.
struct PhonePeScheduledCharging: ScheduledCharging {
    static let notifyLeadMilliseconds: Int64 = 86_400_000

    var steps: [ScheduledStep] {
        [ScheduledStep(.debitNotify, leadMilliseconds: Self.notifyLeadMilliseconds), ScheduledStep(.debitExecute)]
    }

    func target(of order: Order, outcome: Outcome) -> JSONValue? {
        guard let params = try? PhonePeAuthInitParams(order: order) else { return nil }
        return ["subscriptionId": .string(params.subscriptionId), "merchantUserId": .string(params.merchantUserId)]
    }

    func params(step: Int, target: JSONValue, attempt: ScheduledAttempt, carried: JSONValue?) -> [String: JSONValue] {
        var params: [String: JSONValue] = [
            "subscriptionId": target["subscriptionId"] ?? .null, "merchantUserId": target["merchantUserId"] ?? .null,
            "transactionId": .string(attempt.attemptReference),
        ]
        if step > 0 { params["notificationId"] = carried?["notificationId"] ?? .null }
        return params
    }

    func carry(from outcome: Outcome) -> (carried: JSONValue?, notBefore: Int64?) {
        guard let notificationId = outcome.result?["notificationId"] else { return (nil, nil) }
        return (["notificationId": notificationId], outcome.result?["validAfter"]?.integerValue)
    }

    /// An upstream debit's `transactionId` goes to PhonePe as the scheduled debits' does, and
    /// a mandate's `authRequestId` shares the ledger's index of PhonePe references with it.
    func reservedReferenceParam(in order: Order) -> String? {
        ["transactionId", "authRequestId"].first { order.params[$0]?.stringValue.map(ScheduledAttempt.isReservedReference) ?? false }
    }
}

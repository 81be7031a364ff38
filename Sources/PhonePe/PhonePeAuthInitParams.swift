import Crypto
import PaypipeCore

/// How the mandate is authorised: with a first debit of `amount` (TRANSACTION) or without one
/// (PENNY_DROP), in which case the payload must not carry `amount` (seed).
public enum PhonePeAuthWorkflowType: String, Sendable, CaseIterable, Equatable {
    case transaction = "TRANSACTION"
    case pennyDrop = "PENNY_DROP"
}

/// The `authInit` order's params (PROTOCOL.md §1), validated.
public struct PhonePeAuthInitParams: Sendable, Equatable {
    public var merchantUserId: String
    public var subscriptionId: String
    public var authRequestId: String
    public var authWorkflowType: PhonePeAuthWorkflowType
    public var merchantCallBackScheme: String?
    /// Paise; set exactly when `authWorkflowType` is TRANSACTION.
    public var amount: Int64?

    public static let allowedKeys: Set<String> = [
        "merchantUserId", "subscriptionId", "authRequestId", "authWorkflowType", "merchantCallBackScheme",
    ]

    public init(
        merchantUserId: String, subscriptionId: String, authRequestId: String,
        authWorkflowType: PhonePeAuthWorkflowType, merchantCallBackScheme: String?, amount: Int64?
    ) {
        self.merchantUserId = merchantUserId
        self.subscriptionId = subscriptionId
        self.authRequestId = authRequestId
        self.authWorkflowType = authWorkflowType
        self.merchantCallBackScheme = merchantCallBackScheme
        self.amount = amount
    }

    /// Reads and checks every param; each failure names `params.<field>` and the rule.
    public init(order: Order) throws(Rejection) {
        guard order.operation == .authInit else {
            throw Rejection(.unknownOperation, field: "operation", "operation must be authInit for phonepe, got \(order.operation.rawValue)")
        }
        let params = order.params
        if let unknown = params.keys.filter({ !Self.allowedKeys.contains($0) }).sorted().first {
            throw Rejection(.unknownField, field: "params.\(unknown.prefix(64))",
                "params.\(unknown.prefix(64)) is not a phonepe authInit param (allowed: \(Self.allowedKeys.sorted().joined(separator: ", ")))")
        }

        merchantUserId = try Self.identifier(params, "merchantUserId", maxLength: PhonePeRules.merchantUserIdMaxLength)
        subscriptionId = try Self.identifier(params, "subscriptionId", maxLength: PhonePeRules.subscriptionIdMaxLength)
        if params["authRequestId"] != nil {
            authRequestId = try Self.identifier(params, "authRequestId", maxLength: PhonePeRules.authRequestIdMaxLength)
        } else {
            authRequestId = Self.defaultAuthRequestId(merchant: order.merchant, orderId: order.orderId)
        }

        if let value = params["authWorkflowType"] {
            guard let text = value.stringValue, let type = PhonePeAuthWorkflowType(rawValue: text) else {
                throw Rejection.invalidParam("authWorkflowType", "must be \"TRANSACTION\" or \"PENNY_DROP\"")
            }
            authWorkflowType = type
        } else {
            authWorkflowType = .transaction
        }

        if let value = params["merchantCallBackScheme"] {
            guard let scheme = value.stringValue, PhonePeRules.isURLScheme(scheme) else {
                throw Rejection.invalidParam("merchantCallBackScheme",
                    "must be a URL scheme: a letter, then letters, digits, '+', '-' or '.', at most \(PhonePeRules.callBackSchemeMaxLength) characters")
            }
            merchantCallBackScheme = scheme
        } else {
            merchantCallBackScheme = nil
        }

        switch authWorkflowType {
        case .transaction:
            guard let amount = order.amount else {
                throw Rejection(.missingField, field: "amount", "amount is required for phonepe authInit with authWorkflowType TRANSACTION")
            }
            guard amount > 0 else {
                throw Rejection(.amountNotPositive, field: "amount", "amount must be greater than 0, got \(amount)")
            }
            guard order.currency == PhonePeRules.currency else {
                throw Rejection(.invalidCurrency, field: "currency",
                    "currency must be \(PhonePeRules.currency) for phonepe (amount is in paise), got \(order.currency.map { String($0.prefix(8)) } ?? "none")")
            }
            self.amount = amount
        case .pennyDrop:
            // PROTOCOL.md §1: amount is optional here and, when present, ignored; the seed forbids sending it.
            amount = nil
        }
    }

    /// The `authRequestId` for an order that names none: 32 upper-case hex digits of
    /// SHA-256 over (merchant, orderId), so a replayed order reuses the same id at PhonePe.
    /// orderId cannot contain a newline, so the last newline separates the two unambiguously.
    public static func defaultAuthRequestId(merchant: String, orderId: String) -> String {
        let digest = SHA256.hash(data: Array("paypipe/phonepe/authRequestId\n\(merchant)\n\(orderId)".utf8))
        return Digest.hex(digest.prefix(16)).uppercased()
    }

    private static func identifier(_ params: [String: JSONValue], _ name: String, maxLength: Int) throws(Rejection) -> String {
        guard let value = params[name] else { throw Rejection.missingParam(name) }
        guard let text = value.stringValue else {
            throw Rejection.invalidParam(name, "must be a string, got \(value.typeName)")
        }
        guard PhonePeRules.isIdentifier(text, maxLength: maxLength) else {
            throw Rejection.invalidParam(name, "must be 1-\(maxLength) characters of [A-Za-z0-9_-]")
        }
        return text
    }
}

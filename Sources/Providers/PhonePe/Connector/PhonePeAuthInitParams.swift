import Crypto
import PaypipeCore

/// How the mandate is authorised: with a first debit of `amount` (TRANSACTION) or without one
/// (PENNY_DROP), in which case the payload must not carry `amount` (PhonePe's auth/init
/// documentation).
public enum PhonePeAuthWorkflowType: String, Sendable, CaseIterable, Equatable {
    case transaction = "TRANSACTION"
    case pennyDrop = "PENNY_DROP"
}

/// The `authInit` order's params, validated.
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
        // The ledger's (docs/protocol.md, "Schedules"): nothing PhonePe is sent.
        "schedule",
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
        let params = try ParamReader(order.params, allowed: Self.allowedKeys, operation: "phonepe authInit")

        merchantUserId = try Self.identifier(params, "merchantUserId", maxLength: PhonePeRules.merchantUserIdMaxLength)
        subscriptionId = try Self.identifier(params, "subscriptionId", maxLength: PhonePeRules.subscriptionIdMaxLength)
        if params.contains("authRequestId") {
            authRequestId = try Self.identifier(params, "authRequestId", maxLength: PhonePeRules.authRequestIdMaxLength)
        } else {
            authRequestId = Self.defaultAuthRequestId(merchant: order.merchant, orderId: order.orderId)
        }

        if let text = try params.optionalString("authWorkflowType") {
            guard let type = PhonePeAuthWorkflowType(rawValue: text) else {
                throw params.invalid("authWorkflowType", "must be \"TRANSACTION\" or \"PENNY_DROP\"")
            }
            authWorkflowType = type
        } else {
            authWorkflowType = .transaction
        }

        if let scheme = try params.optionalString("merchantCallBackScheme", length: 1...PhonePeRules.callBackSchemeMaxLength) {
            guard PhonePeRules.isURLScheme(scheme) else {
                throw params.invalid("merchantCallBackScheme", "must be a URL scheme: a letter, then letters, digits, '+', '-' or '.'")
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
                throw Rejection(
                    .invalidCurrency, field: "currency",
                    "currency must be \(PhonePeRules.currency) for phonepe (amount is in paise), got \(order.currency.map { String($0.prefix(8)) } ?? "none")"
                )
            }
            self.amount = amount
        case .pennyDrop:
            // The contract makes amount optional here and ignores it when present; PhonePe's
            // auth/init documentation forbids sending it.
            amount = nil
        }
    }

    /// The `authRequestId` that `init(order:)` gives `order`, read alone: the ledger indexes it
    /// for every order at intake, before the signer checks the rest of the params (checking
    /// them all there too would repeat the signer's work in the ledger).
    /// Nil when the order's own `authRequestId` is not one.
    public static func authRequestId(of order: Order) -> String? {
        guard order.operation == .authInit else { return nil }
        guard let given = order.params["authRequestId"] else { return defaultAuthRequestId(merchant: order.merchant, orderId: order.orderId) }
        guard case .string(let id) = given, PhonePeRules.isIdentifier(id, maxLength: PhonePeRules.authRequestIdMaxLength) else { return nil }
        return id
    }

    /// The `authRequestId` for an order that names none: 32 upper-case hex digits of
    /// SHA-256 over (merchant, orderId), so a replayed order reuses the same id at PhonePe.
    /// orderId cannot contain a newline, so the last newline separates the two unambiguously.
    public static func defaultAuthRequestId(merchant: String, orderId: String) -> String {
        // Bytes appended directly: an interpolated String would cost as much as the hash.
        let prefix: StaticString = "paypipe/phonepe/authRequestId\n"
        var input: [UInt8] = []
        input.reserveCapacity(prefix.utf8CodeUnitCount + merchant.utf8.count + 1 + orderId.utf8.count)
        input.append(contentsOf: UnsafeBufferPointer(start: prefix.utf8Start, count: prefix.utf8CodeUnitCount))
        input.append(contentsOf: merchant.utf8)
        input.append(UInt8(ascii: "\n"))
        input.append(contentsOf: orderId.utf8)
        let digest = SHA256.hash(data: input)
        return digest.withUnsafeBytes { Digest.hex(UnsafeRawBufferPointer(rebasing: $0.prefix(16)), uppercase: true) }
    }

    /// `[A-Za-z0-9_-]` ids (see `PhonePeRules.isIdentifier`): they travel in URL paths and JSON verbatim.
    private static func identifier(_ params: ParamReader, _ name: String, maxLength: Int) throws(Rejection) -> String {
        try params.string(name, length: 1...maxLength, charset: .identifier)
    }
}

import Crypto
import PaypipeCore
import PhonePe
import Sandbox

/// Emulates PhonePe's recurring v3 endpoints for demos, tests and benchmarks: it verifies
/// incoming requests the way PhonePe does and builds realistic responses and S2S callbacks.
/// Pure: the sandbox stage owns the HTTP server, the mandate store and the clock.
public struct PhonePeSandbox: Sendable {
    /// PhonePe's documented paths, kept apart from the client's constants: both go into X-VERIFY.
    public static let authInitPath = "/v3/recurring/auth/init"
    public static let authStatusPathPrefix = "/v3/recurring/auth/status/"

    public let merchantId: String
    /// A `Secret`, so printing or dumping the sandbox never shows the salt.
    package let saltKey: Secret
    public let saltIndex: String

    public init(merchantId: String, saltKey: Secret, saltIndex: String) {
        self.merchantId = merchantId
        self.saltKey = saltKey
        self.saltIndex = saltIndex
    }

    public init(config: PhonePeConfig) {
        self.init(merchantId: config.merchantId, saltKey: config.saltKey, saltIndex: config.saltIndex)
    }
}

/// A mandate request the sandbox accepted (what it must remember to answer status calls and
/// send the S2S callback).
public struct PhonePeSandboxMandate: Sendable, Equatable {
    public var merchantId: String
    public var merchantUserId: String
    public var subscriptionId: String
    public var authRequestId: String
    /// Paise; nil for PENNY_DROP.
    public var amount: Int64?
    public var callbackURL: String
    public var merchantCallBackScheme: String?
    /// What the sandbox will report for this mandate (from the subscriptionId, see `PhonePeSandboxScenario`).
    public var scenario: PhonePeSandboxScenario

    public init(
        merchantId: String, merchantUserId: String, subscriptionId: String, authRequestId: String, amount: Int64?,
        callbackURL: String, merchantCallBackScheme: String? = nil, scenario: PhonePeSandboxScenario = .approve
    ) {
        self.merchantId = merchantId
        self.merchantUserId = merchantUserId
        self.subscriptionId = subscriptionId
        self.authRequestId = authRequestId
        self.amount = amount
        self.callbackURL = callbackURL
        self.merchantCallBackScheme = merchantCallBackScheme
        self.scenario = scenario
    }

    public var workflow: PhonePeAuthWorkflowType { amount == nil ? .pennyDrop : .transaction }

    /// PhonePe's reference for the auth debit: "P" + 22 digits (as in PhonePe's samples), derived
    /// from the ids.
    public var providerReferenceId: String {
        let digest = SHA256.hash(data: Array("\(merchantId)/\(authRequestId)".utf8))
        var digits = "P"
        for byte in digest.prefix(22) { digits.append(Character(Unicode.Scalar(0x30 + byte % 10))) }
        return digits
    }

    /// The outcome the customer's approval leads to, when the scenario creates a mandate at all.
    public var scheduledOutcome: PhonePeSandboxAuthOutcome? { scenario.callbackOutcome }
}

/// Sandbox behaviours chosen by the order's subscriptionId prefix, so a demo can drive every
/// branch of the classification table from ordinary orders.
public enum PhonePeSandboxScenario: String, Sendable, Equatable, CaseIterable {
    case approve
    /// Accepted; the customer's authorisation then fails (`SBX_DECLINE...`).
    case decline
    /// auth/init refused with SUBSCRIPTION_NOT_FOUND (`SBX_NOT_FOUND...`).
    case subscriptionNotFound
    /// auth/init refused with SUBSCRIPTION_EXPIRED (`SBX_EXPIRED...`).
    case subscriptionExpired
    /// auth/init refused with INVALID_SUBSCRIPTION_STATE (`SBX_INVALID_STATE...`).
    case invalidSubscriptionState
    /// auth/init answers HTTP 500 INTERNAL_SERVER_ERROR although the mandate WAS created and is
    /// then approved (`SBX_ISE...`): the ambiguous case an auth-status call must resolve.
    case internalServerError

    public static let prefixes: [(String, PhonePeSandboxScenario)] = [
        ("SBX_DECLINE", .decline), ("SBX_NOT_FOUND", .subscriptionNotFound), ("SBX_EXPIRED", .subscriptionExpired),
        ("SBX_INVALID_STATE", .invalidSubscriptionState), ("SBX_ISE", .internalServerError),
    ]

    public init(subscriptionId: String) {
        self = Self.prefixes.first { subscriptionId.hasPrefix($0.0) }?.1 ?? .approve
    }

    /// The refusal code auth/init answers with, if any.
    package var refusal: (status: Int, code: String, message: String)? {
        switch self {
        case .approve, .decline: nil
        case .subscriptionNotFound: (400, "SUBSCRIPTION_NOT_FOUND", "Subscription not found.")
        case .subscriptionExpired: (400, "SUBSCRIPTION_EXPIRED", "Subscription has expired.")
        case .invalidSubscriptionState: (400, "INVALID_SUBSCRIPTION_STATE", "Subscription is not in a valid state.")
        case .internalServerError: (500, "INTERNAL_SERVER_ERROR", "There is an error trying to process your request.")
        }
    }

    public var callbackOutcome: PhonePeSandboxAuthOutcome? {
        switch self {
        case .approve, .internalServerError: .completed
        case .decline: .failed
        case .subscriptionNotFound, .subscriptionExpired, .invalidSubscriptionState: nil
        }
    }
}

/// The state the sandbox reports for a mandate.
public enum PhonePeSandboxAuthOutcome: String, Sendable, Equatable, CaseIterable {
    /// Waiting for the customer: status shows the subscription CREATED.
    case pending
    /// Auth debit COMPLETED, subscription ACTIVE.
    case completed
    /// Auth debit and subscription FAILED.
    case failed
}

extension PhonePeSandbox {
    /// `{"success", "code", "message", "data"?}` as PhonePe answers.
    package static func envelope(status: Int, success: Bool, code: String, message: String, data: JSONValue? = nil) -> HTTPResponseSpec {
        var object: [String: JSONValue] = ["success": .bool(success), "code": .string(code), "message": .string(message)]
        if let data { object["data"] = data }
        return HTTPResponseSpec(
            status: status, headers: [HTTPHeader("Content-Type", "application/json")], body: JSONValue.object(object).bytes)
    }

    package static func refusal(_ status: Int, _ code: String, _ message: String) -> HTTPResponseSpec {
        envelope(status: status, success: false, code: code, message: message)
    }

    /// PhonePe's refusal of a merchant transaction id it has seen before (PhonePe's
    /// troubleshooting page, developer.phonepe.com/v2/docs/troubleshooting-2: `INVALID_TRANSACTION_ID`,
    /// "Duplicate TransactionID"; fixture `authinitresponse--invalid-transaction-id-duplicate`, HTTP 400).
    /// Nothing is created and the first answer is not replayed, so a second submission shows.
    package static func duplicateTransactionId() -> HTTPResponseSpec {
        refusal(400, "INVALID_TRANSACTION_ID", "Duplicate TransactionID")
    }

    /// PhonePe's refusal of a request whose inputs are wrong (`BAD_REQUEST`, "Please check the
    /// inputs you have provided."; fixture `authinitresponse--bad-request`), with what was wrong.
    package static func badRequest(_ detail: String) -> HTTPResponseSpec {
        refusal(400, "BAD_REQUEST", "Please check the inputs you have provided. [message = \(detail.prefix(200))]")
    }

    /// The unknown transaction a status call names: HTTP 404 (PhonePe's error-codes page: 404
    /// "Resource Not Found") with `TRANSACTION_NOT_FOUND` (PhonePe's PG status code; the v3
    /// recurring pages do not document this answer). The same for auth and debit status.
    package static func transactionNotFound(_ id: String) -> HTTPResponseSpec {
        refusal(404, "TRANSACTION_NOT_FOUND", "No transaction found for \(id.prefix(64))")
    }

    /// `count` decimal digits derived from `seed`: PhonePe's references are digit strings
    /// (providerReferenceId `P` + 22 digits, notificationId `OMN` + 22 digits, a 12-digit UTR).
    package static func digits(_ seed: String, count: Int) -> String {
        var out = ""
        var round = 0
        while out.count < count {
            for byte in SandboxCrypto.sha256Hex(Array("\(round)|\(seed)".utf8)).utf8 where out.count < count {
                out.unicodeScalars.append(Unicode.Scalar(0x30 + byte % 10))
            }
            round += 1
        }
        return out
    }

    package static func header(_ name: String, in headers: [HTTPHeader]) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }

    /// The path of an absolute URL (`http://host:port/path?query` → `/path?query`).
    package static func path(of url: String) -> String {
        guard let schemeEnd = url.range(of: "://") else { return url }
        let rest = url[schemeEnd.upperBound...]
        guard let slash = rest.firstIndex(of: "/") else { return "/" }
        return String(rest[slash...])
    }
}

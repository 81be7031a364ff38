import PaypipeCore

/// A validated Viva Sale request (Viva's Smart Checkout / inter-app documentation): everything the
/// `vivapayclient://pay/v1` URL carries.
///
/// Order params (operation `sale`; amount is the order's `amount`):
/// - `clientTransactionId?`: string, 1–64 characters, no control characters; default the orderId.
/// - `tipAmount?`: integer minor units, 0 ≤ tipAmount ≤ amount.
/// - `installments?`: object `{"preferred": n}` with integer n in 0…36 → `withInstallments=true`,
///   `preferredInstallments=n` (0 asks the customer in the app). Absent → `withInstallments=false`.
///   The object form makes "preferredInstallments is required when withInstallments=true" a plain
///   required key (`params.installments.preferred`).
/// - `callback?`: the app's URI scheme for the result (RFC 3986 scheme); default the config's `callback`.
/// - `isv?`: for ISV partners, object `{"clientId", "amount", "sourceCode"?, "merchantId"?,
///   "merchantSourceCode"?, "customerTrns"?, "clientTransactionId"?}`; when present, clientId and amount
///   are required and 0 ≤ amount ≤ the sale amount. `ISV_clientSecret` comes from the config's
///   `viva.isvClientSecret` (a secret never travels in an order), which is then
///   required too (Viva: ISV_clientId requires ISV_amount and ISV_clientSecret).
/// Read with `ParamReader`'s rules: unknown keys are refused (a typo such as `tipamount` must
/// not silently drop the tip), `null` is a wrong type rather than "absent", lengths count
/// Unicode scalars.
public struct VivaSale: Sendable, Equatable, CustomStringConvertible {
    public var callback: String
    public var merchantKey: String
    public var appId: String
    public var clientTransactionId: String
    /// Minor units, > 0.
    public var amount: Int64
    public var tipAmount: Int64?
    /// nil: `withInstallments=false`; a value: `withInstallments=true&preferredInstallments=n`.
    public var preferredInstallments: Int64?
    public var display: DisplayOptions
    public var isv: VivaISV?

    /// The screens the Viva app shows before returning (`show_receipt`, `show_rating`,
    /// `show_transaction_result`). Not order params in the contract, so the signer chooses them;
    /// the default follows Viva's sample code (all true).
    public struct DisplayOptions: Sendable, Equatable {
        public var showReceipt: Bool
        public var showRating: Bool
        public var showTransactionResult: Bool
        public init(showReceipt: Bool = true, showRating: Bool = true, showTransactionResult: Bool = true) {
            self.showReceipt = showReceipt
            self.showRating = showRating
            self.showTransactionResult = showTransactionResult
        }
        public static let seedDefault = DisplayOptions()
    }

    public enum Limits {
        public static let clientTransactionIdMaxLength = 64
        /// Viva's installment plans top out at 36 (unconfirmed: its documentation only says "max
        /// allowed").
        public static let maxPreferredInstallments: Int64 = 36
        public static let textMaxLength = 256
        public static let customerTrnsMaxLength = 2048
    }

    public static let knownParams: Set<String> = ["clientTransactionId", "tipAmount", "installments", "callback", "isv"]

    public init(
        callback: String, merchantKey: String, appId: String, clientTransactionId: String, amount: Int64,
        tipAmount: Int64? = nil, preferredInstallments: Int64? = nil, display: DisplayOptions = .seedDefault, isv: VivaISV? = nil
    ) {
        self.callback = callback
        self.merchantKey = merchantKey
        self.appId = appId
        self.clientTransactionId = clientTransactionId
        self.amount = amount
        self.tipAmount = tipAmount
        self.preferredInstallments = preferredInstallments
        self.display = display
        self.isv = isv
    }

    /// Reads and validates a viva `sale` order against the merchant's config.
    public init(order: Order, config: VivaConfig, display: DisplayOptions = .seedDefault) throws(Rejection) {
        guard order.operation == .sale else {
            throw Rejection(
                .unknownOperation, field: "operation",
                "operation \(order.operation.rawValue) is not handled by the Viva signer (expected sale)")
        }
        let params = try ParamReader(order.params, allowed: VivaSale.knownParams, operation: "viva sale")
        guard let amount = order.amount else { throw Rejection(.missingField, field: "amount", "amount is required for viva sale") }
        guard amount > 0 else { throw Rejection(.amountNotPositive, field: "amount", "amount must be an integer larger than zero") }

        try VivaParamRules.requireConfigText(config.merchantKey, "merchantKey")
        try VivaParamRules.requireConfigText(config.appId, "appId")
        guard VivaText.isScheme(config.callback) else {
            throw Rejection(
                .missingCredentials, field: "viva.callback", "the configured viva callback must be a URI scheme such as interapp-callback")
        }

        var callback = config.callback
        if let value = try params.optionalString("callback") {
            guard VivaText.isScheme(value) else {
                throw params.invalid("callback", "must be a URI scheme: a letter, then letters, digits, + - . (at most 64)")
            }
            callback = value
        }
        let clientTransactionId =
            try params.vivaOptionalText("clientTransactionId", maxLength: Limits.clientTransactionIdMaxLength) ?? order.orderId

        var tipAmount: Int64?
        if let tip = try params.optionalInteger("tipAmount") {
            guard tip >= 0, tip <= amount else {
                throw params.invalid("tipAmount", "must be between 0 and the amount (\(amount))")
            }
            tipAmount = tip
        }

        var preferredInstallments: Int64?
        if let installments = try params.optionalObject("installments", allowed: ["preferred"]) {
            let count = try installments.integer("preferred")
            guard (0...Limits.maxPreferredInstallments).contains(count) else {
                throw installments.invalid("preferred", "must be between 0 and \(Limits.maxPreferredInstallments) (0 lets the customer choose)")
            }
            preferredInstallments = count
        }

        var isv: VivaISV?
        if params.values["isv"]?.objectValue?["clientSecret"] != nil {
            throw Rejection(
                .unknownField, field: "params.isv.clientSecret",
                "params.isv.clientSecret is no longer taken from an order: configure the merchant's viva.isvClientSecret")
        }
        if let object = try params.optionalObject("isv", allowed: VivaISV.knownKeys) {
            isv = try VivaISV(object, saleAmount: amount, clientSecret: config.isvClientSecret)
        }

        self.init(
            callback: callback, merchantKey: config.merchantKey, appId: config.appId, clientTransactionId: clientTransactionId,
            amount: amount, tipAmount: tipAmount, preferredInstallments: preferredInstallments, display: display, isv: isv)
    }

    public var description: String {
        "VivaSale(clientTransactionId: \(VivaText.printable(clientTransactionId, limit: 64)), amount: \(amount)"
            + (tipAmount.map { ", tipAmount: \($0)" } ?? "")
            + (preferredInstallments.map { ", preferredInstallments: \($0)" } ?? "")
            + (isv.map { ", isv: \($0)" } ?? "") + ")"
    }
}

/// The ISV partner fields (`ISV_*`). The client secret is a credential: it is kept as a `Secret`
/// and never printed; it does travel in the sale URL because Viva's inter-app protocol wants it there.
public struct VivaISV: Sendable, Equatable, CustomStringConvertible {
    public var clientId: String
    /// The ISV's fee in minor units, 0 ≤ amount ≤ the sale amount.
    public var amount: Int64
    public var clientSecret: Secret
    public var sourceCode: String?
    public var merchantId: String?
    public var merchantSourceCode: String?
    public var customerTrns: String?
    public var clientTransactionId: String?

    public static let knownKeys: Set<String> = [
        "clientId", "amount", "sourceCode", "merchantId", "merchantSourceCode", "customerTrns", "clientTransactionId",
    ]

    public init(
        clientId: String, amount: Int64, clientSecret: Secret, sourceCode: String? = nil, merchantId: String? = nil,
        merchantSourceCode: String? = nil, customerTrns: String? = nil, clientTransactionId: String? = nil
    ) {
        self.clientId = clientId
        self.amount = amount
        self.clientSecret = clientSecret
        self.sourceCode = sourceCode
        self.merchantId = merchantId
        self.merchantSourceCode = merchantSourceCode
        self.customerTrns = customerTrns
        self.clientTransactionId = clientTransactionId
    }

    init(_ object: ParamReader, saleAmount: Int64, clientSecret configured: Secret?) throws(Rejection) {
        let limit = VivaSale.Limits.textMaxLength
        // All-or-nothing: naming an ISV without its fee or secret would bill the sale to nobody.
        let clientId = try object.vivaText("clientId", maxLength: limit)
        let amount = try object.integer("amount")
        guard amount >= 0, amount <= saleAmount else {
            throw object.invalid("amount", "must be between 0 and the sale amount (\(saleAmount))")
        }
        guard let secret = configured, !secret.isEmpty else {
            throw Rejection(.missingCredentials, field: "viva.isvClientSecret", "an isv sale needs the merchant's viva.isvClientSecret in the config")
        }
        self.init(
            clientId: clientId, amount: amount, clientSecret: secret,
            sourceCode: try object.vivaOptionalText("sourceCode", maxLength: limit),
            merchantId: try object.vivaOptionalText("merchantId", maxLength: limit),
            merchantSourceCode: try object.vivaOptionalText("merchantSourceCode", maxLength: limit),
            customerTrns: try object.vivaOptionalText("customerTrns", maxLength: VivaSale.Limits.customerTrnsMaxLength),
            clientTransactionId: try object.vivaOptionalText("clientTransactionId", maxLength: VivaSale.Limits.clientTransactionIdMaxLength))
    }

    public static func == (a: VivaISV, b: VivaISV) -> Bool {
        a.clientId == b.clientId && a.amount == b.amount && a.clientSecret.matches(b.clientSecret.utf8)
            && a.sourceCode == b.sourceCode && a.merchantId == b.merchantId && a.merchantSourceCode == b.merchantSourceCode
            && a.customerTrns == b.customerTrns && a.clientTransactionId == b.clientTransactionId
    }

    public var description: String {
        "VivaISV(clientId: \(VivaText.printable(clientId, limit: 64)), amount: \(amount), clientSecret: <redacted>)"
    }
}

/// Viva's value rules on top of the shared `ParamReader`; messages name `params.<field>` and
/// the rule, never the value.
extension ParamReader {
    /// Free text: 1…maxLength characters, no control characters (any other Unicode is fine:
    /// percent-encoding carries it safely).
    func vivaText(_ name: String, maxLength: Int) throws(Rejection) -> String {
        try string(name, length: 1...maxLength, charset: .noControlCharacters)
    }

    func vivaOptionalText(_ name: String, maxLength: Int) throws(Rejection) -> String? {
        try optionalString(name, length: 1...maxLength, charset: .noControlCharacters)
    }
}

enum VivaParamRules {
    static func requireConfigText(_ value: String, _ name: String) throws(Rejection) {
        guard !value.isEmpty, !value.unicodeScalars.contains(where: VivaQuery.isControl) else {
            throw Rejection(
                .missingCredentials, field: "viva.\(name)", "the configured viva \(name) must be non-empty text without control characters")
        }
    }
}

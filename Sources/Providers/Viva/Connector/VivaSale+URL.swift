import PaypipeCore

extension VivaSale {
    public static let baseURL = "vivapayclient://pay/v1"

    /// The signer's work for `sale`: the URL the app opens, every value percent-encoded (RFC 3986).
    /// It carries the ISV client secret when there is one, so treat it as sensitive.
    public static func url(order: Order, config: VivaConfig, display: DisplayOptions = .seedDefault) throws(Rejection) -> String {
        try VivaSale(order: order, config: config, display: display).url
    }

    /// The `pending` outcome's result: `{url}` for the app.
    public var pendingResult: [String: JSONValue] { ["url": .string(url)] }

    /// Fields in the order of Viva's Sale request table.
    public var query: VivaQuery {
        var items: [(key: String, value: String)] = [
            ("callback", callback), ("merchantKey", merchantKey), ("appId", appId), ("action", "sale"),
            ("clientTransactionId", clientTransactionId), ("amount", String(amount)),
        ]
        items.reserveCapacity(22)
        if let tipAmount { items.append(("tipAmount", String(tipAmount))) }
        if let preferredInstallments {
            items.append(("withInstallments", "true"))
            items.append(("preferredInstallments", String(preferredInstallments)))
        } else {
            items.append(("withInstallments", "false"))
        }
        items.append(("show_receipt", String(display.showReceipt)))
        items.append(("show_rating", String(display.showRating)))
        items.append(("show_transaction_result", String(display.showTransactionResult)))
        if let isv {
            items.append(("ISV_amount", String(isv.amount)))
            items.append(("ISV_clientId", isv.clientId))
            items.append(("ISV_clientSecret", isv.clientSecret.reveal()))
            if let value = isv.sourceCode { items.append(("ISV_sourceCode", value)) }
            if let value = isv.merchantId { items.append(("ISV_merchantId", value)) }
            if let value = isv.merchantSourceCode { items.append(("ISV_merchantSourceCode", value)) }
            if let value = isv.customerTrns { items.append(("ISV_customerTrns", value)) }
            if let value = isv.clientTransactionId { items.append(("ISV_clientTransactionId", value)) }
        }
        items.append(("protocol", "int_default"))
        return VivaQuery(items: items)
    }

    public var url: String { VivaSale.baseURL + "?" + query.encoded }

    /// `url` with the value of its `ISV_clientSecret` replaced by a withheld mark; nil when it
    /// has none.
    public static func withholdingISVSecret(in url: String) -> String? {
        let key = "ISV_clientSecret="
        guard let start = url.firstRange(of: key), url[..<start.lowerBound].last.map({ $0 == "?" || $0 == "&" }) == true else { return nil }
        let valueEnd = url[start.upperBound...].firstIndex(of: "&") ?? url.endIndex
        guard valueEnd > start.upperBound else { return nil }
        return String(url[..<start.upperBound]) + Outcome.withheldMark(named: "isvClientSecret") + String(url[valueEnd...])
    }

    /// Reads a sale URL the way the Viva app would (the sandbox's side, and round-trip tests),
    /// applying Viva's Sale rules: action=sale, amount an integer > 0, tipAmount ≤ amount,
    /// preferredInstallments with withInstallments=true, ISV_clientId with ISV_amount and ISV_clientSecret.
    public init(requestURL: String) throws(CallbackRejection) {
        let uri = try VivaURI.parse(requestURL)
        guard uri.scheme == "vivapayclient", uri.host == "pay", uri.path == "/v1" else {
            throw .viva(.wrongHost, "a sale request must start with \(VivaSale.baseURL)")
        }
        let q = uri.query
        func required(_ key: String) throws(CallbackRejection) -> String {
            guard let value = q[key], !value.isEmpty else { throw .viva(.missingField, "\(key) is required") }
            return value
        }
        func integer(_ key: String) throws(CallbackRejection) -> Int64? {
            guard let text = q[key] else { return nil }
            guard let value = VivaText.integer(text) else {
                throw .viva(.invalidField, "\(key) must be an unsigned integer")
            }
            return value
        }
        func flag(_ key: String, default fallback: Bool) throws(CallbackRejection) -> Bool {
            switch q[key] {
            case nil: return fallback
            case "true"?: return true
            case "false"?: return false
            default: throw .viva(.invalidField, "\(key) must be true or false")
            }
        }
        guard try required("action") == "sale" else { throw .viva(.wrongAction, "action must be sale") }
        let callback = try required("callback")
        guard VivaText.isScheme(callback) else { throw .viva(.invalidField, "callback must be a URI scheme") }
        if let proto = q["protocol"], proto != "int_default" {
            throw .viva(.invalidField, "protocol must be int_default")
        }
        guard let amount = try integer("amount"), amount > 0 else {
            throw .viva(.invalidField, "amount must be an integer larger than zero")
        }
        let tipAmount = try integer("tipAmount")
        if let tipAmount, tipAmount > amount {
            throw .viva(.invalidField, "tipAmount must be less than or equal to amount")
        }
        var preferredInstallments: Int64?
        if try flag("withInstallments", default: false) {
            guard let preferred = try integer("preferredInstallments") else {
                throw .viva(.missingField, "preferredInstallments is required when withInstallments=true")
            }
            preferredInstallments = preferred
        }
        var isv: VivaISV?
        if let clientId = q["ISV_clientId"] {
            guard let isvAmount = try integer("ISV_amount") else {
                throw .viva(.missingField, "ISV_amount is required with ISV_clientId")
            }
            guard let secret = q["ISV_clientSecret"], !secret.isEmpty else {
                throw .viva(.missingField, "ISV_clientSecret is required with ISV_clientId")
            }
            isv = VivaISV(
                clientId: clientId, amount: isvAmount, clientSecret: Secret(secret), sourceCode: q["ISV_sourceCode"],
                merchantId: q["ISV_merchantId"], merchantSourceCode: q["ISV_merchantSourceCode"],
                customerTrns: q["ISV_customerTrns"], clientTransactionId: q["ISV_clientTransactionId"])
        } else if q["ISV_amount"] != nil || q["ISV_clientSecret"] != nil {
            throw .viva(.missingField, "ISV_* fields require ISV_clientId")
        }
        self.init(
            callback: callback, merchantKey: try required("merchantKey"), appId: try required("appId"),
            clientTransactionId: q["clientTransactionId"] ?? "", amount: amount, tipAmount: tipAmount,
            preferredInstallments: preferredInstallments,
            display: DisplayOptions(
                showReceipt: try flag("show_receipt", default: true), showRating: try flag("show_rating", default: true),
                showTransactionResult: try flag("show_transaction_result", default: true)),
            isv: isv)
    }
}

import PaypipeCore

/// The Viva app's Sale response, `<callback>://result?status=...` (Viva's inter-app documentation),
/// parsed and checked field by field. Card data: `accountNumber` is only ever held in its masked
/// form (first 6 and last 4 digits); an unmasked number is refused and never quoted.
public struct VivaSaleCallback: Sendable, Equatable {
    public enum Status: String, Sendable { case success, fail }

    /// The URI scheme the result came back on (the app's callback).
    public var callback: String
    public var status: Status
    public var message: String?
    public var action: String
    public var clientTransactionId: String
    public var amount: Int64
    public var tipAmount: Int64?
    public var verificationMethod: String?
    public var rrn: String?
    public var cardType: String?
    /// Masked, e.g. `537489******1831`.
    public var accountNumber: String?
    public var referenceNumber: String?
    public var authorisationCode: String?
    public var tid: String?
    public var orderCode: String?
    public var shortOrderCode: String?
    public var installments: Int64?
    public var transactionDate: String?
    public var transactionId: String?

    public init(
        callback: String, status: Status, message: String? = nil, action: String = "sale", clientTransactionId: String,
        amount: Int64, tipAmount: Int64? = nil, verificationMethod: String? = nil, rrn: String? = nil, cardType: String? = nil,
        accountNumber: String? = nil, referenceNumber: String? = nil, authorisationCode: String? = nil, tid: String? = nil,
        orderCode: String? = nil, shortOrderCode: String? = nil, installments: Int64? = nil, transactionDate: String? = nil,
        transactionId: String? = nil
    ) {
        self.callback = callback
        self.status = status
        self.message = message
        self.action = action
        self.clientTransactionId = clientTransactionId
        self.amount = amount
        self.tipAmount = tipAmount
        self.verificationMethod = verificationMethod
        self.rrn = rrn
        self.cardType = cardType
        self.accountNumber = accountNumber
        self.referenceNumber = referenceNumber
        self.authorisationCode = authorisationCode
        self.tid = tid
        self.orderCode = orderCode
        self.shortOrderCode = shortOrderCode
        self.installments = installments
        self.transactionDate = transactionDate
        self.transactionId = transactionId
    }

    /// Parses and checks a callback URI on its own (no order involved). Empty values count as
    /// absent, as Viva's documentation says failed results may carry
    /// referenceNumber/authorisationCode without values. Unknown keys are ignored (the app may add
    /// fields); known ones must be well-formed.
    public init(uri uriText: String) throws(CallbackRejection) {
        let uri = try VivaURI.parse(uriText)
        guard uri.host == "result", uri.path.isEmpty || uri.path == "/" else {
            throw .viva(.wrongHost, "a sale callback must be <callback>://result?...")
        }
        let q = uri.query
        func optional(_ key: String) -> String? {
            guard let value = q[key], !value.isEmpty else { return nil }
            return value
        }
        func required(_ key: String) throws(CallbackRejection) -> String {
            guard let value = optional(key) else { throw .viva(.missingField, "\(key) is required") }
            return value
        }
        func checked(_ key: String, _ rule: String, _ isValid: (String) -> Bool) throws(CallbackRejection) -> String? {
            guard let value = optional(key) else { return nil }
            guard isValid(value) else { throw .viva(.invalidField, "\(key) must be \(rule)") }
            return value
        }
        func text(_ key: String, maxLength: Int) throws(CallbackRejection) -> String? {
            try checked(key, "at most \(maxLength) characters") { $0.unicodeScalars.count <= maxLength }
        }
        func integer(_ key: String) throws(CallbackRejection) -> Int64? {
            guard let value = optional(key) else { return nil }
            guard let number = VivaText.integer(value) else {
                throw .viva(.invalidField, "\(key) must be an integer in cents without decimal digits")
            }
            return number
        }

        guard let status = Status(rawValue: try required("status")) else {
            throw .viva(.invalidField, "status must be success or fail")
        }
        let action = try required("action")
        guard action == "sale" else { throw .viva(.wrongAction, "action must be sale") }
        guard let amount = try integer("amount") else { throw .viva(.missingField, "amount is required") }
        // A failed result may echo an empty clientTransactionId (the Viva app's user-cancel result
        // does): it is read as "", which matches no order's reference, so it can only fail an order.
        let clientTransactionId: String
        if status == .fail {
            clientTransactionId = optional("clientTransactionId") ?? ""
        } else {
            clientTransactionId = try required("clientTransactionId")
        }

        self.init(
            callback: uri.scheme, status: status, message: try text("message", maxLength: 512), action: action,
            clientTransactionId: clientTransactionId, amount: amount, tipAmount: try integer("tipAmount"),
            verificationMethod: try text("verificationMethod", maxLength: 32),
            rrn: try checked("rrn", "1 to 12 letters or digits") { VivaText.isAlphanumeric($0, maxLength: 12) },
            cardType: try text("cardType", maxLength: 64),
            accountNumber: try VivaSaleCallback.maskedAccountNumber(optional("accountNumber")),
            referenceNumber: try checked("referenceNumber", "1 to 12 digits") { VivaText.isDigits($0, maxLength: 12) },
            authorisationCode: try checked("authorisationCode", "1 to 12 letters or digits") { VivaText.isAlphanumeric($0, maxLength: 12) },
            tid: try checked("tid", "1 to 16 letters or digits") { VivaText.isAlphanumeric($0, maxLength: 16) },
            orderCode: try checked("orderCode", "1 to 20 digits") { VivaText.isDigits($0, maxLength: 20) },
            shortOrderCode: try checked("shortOrderCode", "1 to 20 digits") { VivaText.isDigits($0, maxLength: 20) },
            installments: try integer("installments"),
            transactionDate: try checked("transactionDate", "an ISO 8601 date-time") { VivaSaleCallback.isISO8601DateTime($0) },
            transactionId: try checked("transactionId", "a UUID") { VivaSaleCallback.isUUID($0) })

        // Viva's documented approved response carries these; only failures may lack them.
        if status == .success {
            for (key, value) in [("transactionId", transactionId), ("referenceNumber", referenceNumber), ("authorisationCode", authorisationCode)]
            where value == nil {
                throw .viva(.missingField, "\(key) is required when status is success")
            }
        }
    }

    /// First 6 and last 4 digits, asterisks between (12–19 digit card numbers). Anything holding a
    /// run of 7+ digits is treated as a leaked card number; nothing of the value is echoed either way.
    static func maskedAccountNumber(_ value: String?) throws(CallbackRejection) -> String? {
        guard let value else { return nil }
        let bytes = Array(value.utf8)
        let isDigit = { (b: UInt8) in b >= 0x30 && b <= 0x39 }
        var longestRun = 0
        var run = 0
        for byte in bytes {
            run = isDigit(byte) ? run + 1 : 0
            longestRun = max(longestRun, run)
        }
        if longestRun > 6 {
            throw .viva(.unmaskedPAN, "accountNumber must be masked (first 6 and last 4 digits only)")
        }
        guard (12...19).contains(bytes.count),
            bytes[0..<6].allSatisfy(isDigit), bytes[(bytes.count - 4)...].allSatisfy(isDigit),
            bytes[6..<(bytes.count - 4)].allSatisfy({ $0 == UInt8(ascii: "*") })
        else {
            throw .viva(.invalidField, "accountNumber must be 6 digits, asterisks, then 4 digits")
        }
        return value
    }

    static func isUUID(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard bytes.count == 36 else { return false }
        for (index, byte) in bytes.enumerated() {
            if index == 8 || index == 13 || index == 18 || index == 23 {
                guard byte == UInt8(ascii: "-") else { return false }
            } else {
                guard (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x46) || (byte >= 0x61 && byte <= 0x66) else { return false }
            }
        }
        return true
    }

    /// `YYYY-MM-DDThh:mm:ss[.fraction][Z|±hh:mm]` with a real calendar date (Viva's example has
    /// seven fraction digits and an offset: `2019-09-13T12:14:19.8703452+03:00`).
    static func isISO8601DateTime(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard bytes.count >= 19, bytes.count <= 40, bytes[10] == UInt8(ascii: "T") || bytes[10] == UInt8(ascii: "t"),
            CivilDate(iso8601: String(decoding: bytes[0..<10], as: UTF8.self)) != nil
        else { return false }
        func number(_ range: Range<Int>) -> Int? {
            guard range.upperBound <= bytes.count else { return nil }
            var value = 0
            for b in bytes[range] {
                guard b >= 0x30, b <= 0x39 else { return nil }
                value = value * 10 + Int(b - 0x30)
            }
            return value
        }
        guard bytes[13] == UInt8(ascii: ":"), bytes[16] == UInt8(ascii: ":"),
            let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19),
            hour < 24, minute < 60, second <= 60
        else { return false }
        var index = 19
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            let start = index
            while index < bytes.count, bytes[index] >= 0x30, bytes[index] <= 0x39 { index += 1 }
            guard index > start, index - start <= 9 else { return false }
        }
        if index == bytes.count { return true }
        if bytes[index] == UInt8(ascii: "Z") || bytes[index] == UInt8(ascii: "z") { return index + 1 == bytes.count }
        guard bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-"), bytes.count == index + 6,
            bytes[index + 3] == UInt8(ascii: ":"),
            let offsetHours = number((index + 1)..<(index + 3)), let offsetMinutes = number((index + 4)..<(index + 6)),
            offsetHours < 24, offsetMinutes < 60
        else { return false }
        return true
    }

    /// The details an outcome carries (succeeded or failed), the account number masked as received.
    public var result: [String: JSONValue] {
        var out: [String: JSONValue] = [
            "status": .string(status.rawValue), "clientTransactionId": .string(clientTransactionId), "amount": .integer(amount),
        ]
        func put(_ key: String, _ value: String?) { if let value { out[key] = .string(value) } }
        put("transactionId", transactionId)
        put("referenceNumber", referenceNumber)
        put("authorisationCode", authorisationCode)
        if let tipAmount { out["tipAmount"] = .integer(tipAmount) }
        put("cardType", cardType)
        put("accountNumber", accountNumber)
        put("verificationMethod", verificationMethod)
        put("rrn", rrn)
        put("tid", tid)
        put("orderCode", orderCode)
        put("shortOrderCode", shortOrderCode)
        if let installments { out["installments"] = .integer(installments) }
        put("transactionDate", transactionDate)
        put("message", message)
        return out
    }

    /// The URI the Viva app would send for this result (the sandbox's output), values percent-encoded.
    public var uri: String {
        var items: [(key: String, value: String)] = [
            ("status", status.rawValue), ("message", message ?? ""), ("action", action),
            ("clientTransactionId", clientTransactionId), ("amount", String(amount)),
        ]
        func put(_ key: String, _ value: String?) { items.append((key, value ?? "")) }
        put("tipAmount", tipAmount.map { String($0) })
        put("verificationMethod", verificationMethod)
        put("rrn", rrn)
        put("cardType", cardType)
        put("accountNumber", accountNumber)
        put("referenceNumber", referenceNumber)
        put("authorisationCode", authorisationCode)
        put("tid", tid)
        put("orderCode", orderCode)
        put("shortOrderCode", shortOrderCode)
        put("installments", installments.map { String($0) })
        put("transactionDate", transactionDate)
        put("transactionId", transactionId)
        return callback + "://result?" + VivaQuery(items: items).encoded
    }
}

import PaypipeCore

/// Trust Payments URL notifications (its URL notification documentation): a form POST whose
/// `responsesitesecurity` is hex SHA-256 over the values of every other received field (except
/// `notificationreference`), blank values omitted, ordered by field name (ASCII), concatenated,
/// with the agreed notification password appended.
public enum TPNotification {
    public static let signatureField = "responsesitesecurity"
    static let unsignedFields: Set<String> = ["responsesitesecurity", "notificationreference"]

    public typealias Field = (name: String, value: String)

    /// The `responsesitesecurity` value for these fields (what Trust Payments computes).
    public static func signature(fields: [Field], password: Secret) -> String {
        let signed =
            fields
            .filter { !unsignedFields.contains($0.name) && !$0.value.isEmpty }
            .sorted { Array($0.name.utf8).lexicographicallyPrecedes(Array($1.name.utf8)) }
        var material: [UInt8] = []
        for field in signed { material += Array(field.value.utf8) }
        material += password.utf8
        return Digest.sha256Hex(material)
    }

    /// Whether the received `responsesitesecurity` matches (constant-time comparison). Not
    /// enough to believe a notification: see `verify`.
    public static func isAuthentic(fields: [Field], password: Secret) -> Bool {
        guard let received = fields.first(where: { $0.name == signatureField })?.value, !received.isEmpty else { return false }
        return ConstantTime.hexEquals(signature(fields: fields, password: password), received)
    }

    /// The fields paypipe reads from a notification, each with the only values it takes. The
    /// signature covers the values alone, concatenated in name order, so a captured notification
    /// could be split differently into fields (a decline's `70000` becoming another field's
    /// `7000` and an `errorcode` of `0`) under the same signature: no value that another field's
    /// format could absorb. Other fields (a merchant selects them in MyST) are carried, but a
    /// notification with one decides nothing by itself (`TPNotificationEvent.decidesAlone`).
    static let fieldFormats: [String: @Sendable (String) -> Bool] = [
        "accounttypedescription": { upper($0, 1...20) },
        "authcode": { alphanumeric($0, 1...20) },
        "baseamount": { number($0, 1...13) },
        "currencyiso3a": { upper($0, 3...3) },
        "enrolled": { upper($0, 1...1) },
        "errorcode": { number($0, 1...5) },
        "errordata": { text($0, 1...256) },
        "errormessage": { text($0, 1...256) },
        "livestatus": { number($0, 1...1) },
        "maskedpan": { maskedPAN($0) },
        "notificationreference": { text($0, 1...128) },
        "orderreference": { Order.isValidOrderId($0) },
        "parenttransactionreference": { transactionReference($0) },
        "paymenttypedescription": { upper($0, 1...30) },
        // Trust Payments writes its own as `W57-aubk3dr3` / `W23-rd55dned`, its SDKs `A1wqmc662`:
        // capitals first, then lower case, digits and '-'. Its neighbours in name order
        // (paymenttypedescription, requesttypedescription) are capitals, so a value that took
        // "AUTH" or "THREEDQUERY" from requesttypedescription (leaving it blank, read as the AUTH)
        // has capitals after the lower-case part and is refused.
        "requestreference": { requestReference($0) },
        "requesttypedescription": { upper($0, 1...30) },
        "responsesitesecurity": { $0.utf8.count == 64 && $0.utf8.allSatisfy { isHexDigit($0) } },
        "securityresponseaddress": { number($0, 1...1) },
        "securityresponsepostcode": { number($0, 1...1) },
        "securityresponsesecuritycode": { number($0, 1...1) },
        "settlestatus": { number($0, 1...3) },
        "sitereference": { alphanumeric(String($0.filter { $0 != "_" }), 1...64) && $0.utf8.count <= 64 },
        "subscriptionfinalnumber": { number($0, 1...5) },
        "subscriptionnumber": { number($0, 1...5) },
        "transactionreference": { transactionReference($0) },
    ]

    /// The field that breaks `fieldFormats`, and how; nil when every field keeps them. A field
    /// outside them needs only printable text of a bounded length.
    static func fieldRefusal(_ fields: [Field]) -> CallbackRejection? {
        for field in fields {
            guard let format = fieldFormats[field.name] else {
                guard text(field.name, 1...64), field.value.isEmpty || text(field.value, 1...1024) else {
                    return .malformed("field \(field.name.prefix(64)) is not printable text of at most 1024 bytes", code: .invalidField)
                }
                continue
            }
            guard field.value.isEmpty || format(field.value) else {
                return .malformed("field \(field.name) does not have the form Trust Payments gives it", code: .invalidField)
            }
        }
        return nil
    }

    /// Digits without a leading zero (but "0" itself): one way to write each number.
    static func number(_ text: String, _ length: ClosedRange<Int>) -> Bool {
        let bytes = Array(text.utf8)
        return length.contains(bytes.count) && bytes.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }
            && (bytes.count == 1 || bytes[0] != UInt8(ascii: "0"))
    }

    static func upper(_ text: String, _ length: ClosedRange<Int>) -> Bool {
        length.contains(text.utf8.count) && text.utf8.allSatisfy { (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) }
    }

    static func alphanumeric(_ text: String, _ length: ClosedRange<Int>) -> Bool {
        length.contains(text.utf8.count)
            && text.utf8.allSatisfy {
                (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0)
            }
    }

    /// A request reference as Trust Payments and its SDKs make them (`W57-aubk3dr3`, `A1wqmc662`,
    /// `RR555`): 1...64 characters, a run of capitals, then lower-case letters, digits and '-'.
    static func requestReference(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard (1...64).contains(bytes.count) else { return false }
        let tail = bytes.drop { (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) }
        return tail.allSatisfy {
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0)
                || $0 == UInt8(ascii: "-")
        }
    }

    /// Free text of printable characters (a message), bounded.
    static func text(_ text: String, _ length: ClosedRange<Int>) -> Bool {
        length.contains(text.utf8.count) && text.unicodeScalars.allSatisfy { $0.value >= 0x20 && $0.value != 0x7F }
    }

    /// `<digits>-<digits>-<digits>`, e.g. 57-9-100.
    static func transactionReference(_ text: String) -> Bool {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        return text.utf8.count <= 64 && parts.count == 3 && parts.allSatisfy { number(String($0), 1...20) }
    }

    /// First six and last four digits with `#` or `*` between.
    static func maskedPAN(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        let digits = bytes.filter { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }.count
        return (12...19).contains(bytes.count) && digits <= 10
            && bytes.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || $0 == UInt8(ascii: "#") || $0 == UInt8(ascii: "*") }
    }

    static func isHexDigit(_ byte: UInt8) -> Bool { hexValue(byte) != nil }

    /// Authenticates a notification and reads what the pipeline needs from it.
    public static func verify(fields: [Field], password: Secret) throws(CallbackRejection) -> TPNotificationEvent {
        var values: [String: String] = [:]
        for field in fields {
            // A repeated name would let a second value hide behind the signed first one.
            guard values.updateValue(field.value, forKey: field.name) == nil else {
                throw .malformed("field \(field.name.prefix(64)) appears more than once")
            }
        }
        guard let received = values[signatureField], !received.isEmpty else {
            throw .forged(.missingSignature, "the notification has no responsesitesecurity")
        }
        let expected = signature(fields: fields, password: password)
        guard ConstantTime.hexEquals(expected, received) else {
            throw .forged(.badSignature, "responsesitesecurity does not match the notification's fields")
        }
        if let refusal = fieldRefusal(fields) { throw refusal }
        // An automated payment is the subscription's, named by its parent; whether it carries
        // the first order's orderreference is not documented.
        let orderReference = values["orderreference"] ?? ""
        guard !orderReference.isEmpty || values["accounttypedescription"] == "RECUR" else {
            throw .malformed("the notification has no orderreference")
        }
        guard let errorcode = values["errorcode"], !errorcode.isEmpty else {
            throw .malformed("the notification has no errorcode")
        }
        values[signatureField] = nil
        let unread = values.keys.filter { fieldFormats[$0] == nil }.sorted()
        return TPNotificationEvent(fields: values, orderReference: orderReference, errorcode: errorcode, unreadFields: unread)
    }

    /// Parses an `application/x-www-form-urlencoded` body into fields, in order.
    public static func parseForm(_ body: [UInt8]) throws(CallbackRejection) -> [Field] {
        guard body.count <= 64 * 1024 else { throw .tooLarge("the notification is larger than 64 KiB") }
        var fields: [Field] = []
        for pair in body.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true) {
            let parts = pair.split(separator: UInt8(ascii: "="), maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = percentDecode(parts[0]), !name.isEmpty else {
                throw .malformed("a form field name is not valid percent-encoded UTF-8")
            }
            guard let value = parts.count > 1 ? percentDecode(parts[1]) : "" else {
                throw .malformed("the value of \(name.prefix(64)) is not valid percent-encoded UTF-8")
            }
            fields.append((name, value))
        }
        return fields
    }

    /// A signed notification body as Trust Payments would POST it (for the sandbox).
    public static func formBody(fields: [Field], password: Secret) -> [UInt8] {
        let all = fields + [(signatureField, signature(fields: fields, password: password))]
        var body: [UInt8] = []
        for (index, field) in all.enumerated() {
            if index > 0 { body.append(UInt8(ascii: "&")) }
            percentEncode(field.name, into: &body)
            body.append(UInt8(ascii: "="))
            percentEncode(field.value, into: &body)
        }
        return body
    }

    static func percentDecode(_ bytes: ArraySlice<UInt8>) -> String? {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var index = bytes.startIndex
        while index < bytes.endIndex {
            let byte = bytes[index]
            if byte == UInt8(ascii: "+") {
                out.append(UInt8(ascii: " "))
            } else if byte == UInt8(ascii: "%") {
                guard index + 2 < bytes.endIndex, let high = hexValue(bytes[index + 1]), let low = hexValue(bytes[index + 2])
                else { return nil }
                out.append(high << 4 | low)
                index += 2
            } else {
                out.append(byte)
            }
            index += 1
        }
        return String(validating: out, as: UTF8.self)
    }

    static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    static func percentEncode(_ text: String, into out: inout [UInt8]) {
        let digits: [UInt8] = Array("0123456789ABCDEF".utf8)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.append(byte)
            default:
                out.append(UInt8(ascii: "%"))
                out.append(digits[Int(byte >> 4)])
                out.append(digits[Int(byte & 0x0F)])
            }
        }
    }
}

/// An authentic URL notification.
public struct TPNotificationEvent: Sendable, Equatable {
    /// Every received field except `responsesitesecurity`.
    public var fields: [String: String]
    /// Names the order (Trust Payments echoes the SDK JWT's `orderreference` = orderId).
    public var orderReference: String
    public var errorcode: String
    /// Fields outside `TPNotification.fieldFormats`, carried but not read.
    public var unreadFields: [String] = []

    /// Whether the notification alone may decide a payment. The signature binds values, not
    /// names: an `authcode` and an `errorcode` could trade digits unless a stated `baseamount`
    /// sits between them, pinned by the order's amount (`amountPinned`) or followed by a stated
    /// `currencyiso3a`; and a field paypipe does not know the form of could absorb another's.
    /// A notification that cannot decide still names its order, whose result is then read back
    /// from Trust Payments (its status check).
    public func decidesAlone(amountPinned: Bool) -> Bool {
        unreadFields.isEmpty && !(fields["baseamount"] ?? "").isEmpty && (amountPinned || !(fields["currencyiso3a"] ?? "").isEmpty)
    }

    public var transactionReference: String? { fields["transactionreference"] }
    public var requestType: String? { fields["requesttypedescription"] }

    /// The key to drop redeliveries on: Trust Payments' own reference of the transaction.
    public var dedupeKey: String { transactionReference ?? fields["notificationreference"] ?? orderReference }

    /// What a notification reports about a subscription rather than an order (Trust Payments'
    /// subscription engine, and its URL notifications): an automated payment
    /// (`accounttypedescription` RECUR, naming the first AUTH as `parenttransactionreference`)
    /// authorised, settled or declined; or the first AUTH itself settling (the subscription
    /// active), suspended or cancelled after its order ended. nil for a notification that
    /// decides an order (the first payment's result).
    public func subscriptionEvent(merchant: String) throws(CallbackRejection) -> SubscriptionEvent? {
        // An automated payment is known from its notification alone: one that cannot decide is
        // refused, so that Trust Payments sends it again and the operators see why.
        if fields["accounttypedescription"] == "RECUR", !decidesAlone(amountPinned: false) {
            throw .malformed(
                "an automated payment's notification must state baseamount and currencyiso3a and carry only the fields paypipe reads"
                    + (unreadFields.isEmpty ? "" : " (not \(unreadFields.prefix(3).joined(separator: ", ")))"),
                code: unreadFields.isEmpty ? .missingField : .unknownField)
        }
        let settleStatus = fields["settlestatus"] ?? ""
        let amount = fields["baseamount"].flatMap { Int64($0) }
        let currency = fields["currencyiso3a"]
        if fields["accounttypedescription"] == "RECUR" {
            guard let parent = fields["parenttransactionreference"], !parent.isEmpty else {
                throw .malformed("an automated payment's notification needs parenttransactionreference", code: .missingField)
            }
            guard let reference = transactionReference, !reference.isEmpty else {
                throw .malformed("an automated payment's notification needs transactionreference", code: .missingField)
            }
            let kind: SubscriptionEvent.Kind
            var reason: String?
            switch (errorcode, settleStatus) {
            case ("0", "100"), ("0", "10"): kind = .renewalSettled
            case ("0", "2"), ("0", "3"):
                kind = .renewalFailed
                reason = "SETTLESTATUS_\(settleStatus)"
            case ("0", _): kind = .renewalSucceeded
            default:
                kind = .renewalFailed
                reason = errorcode
            }
            return SubscriptionEvent(
                merchant: merchant, provider: Provider("trustpayments"), subscription: parent,
                dedupeKey: "\(reference)|\(kind == .renewalSucceeded ? "authorised" : kind.rawValue)", kind: kind, amount: amount,
                currency: currency, providerReference: reference, cycle: fields["subscriptionnumber"].flatMap { Int64($0) }, reason: reason)
        }
        // A first payment's own notification that cannot decide leaves its subscription to the
        // order's result, which is then read back.
        guard decidesAlone(amountPinned: false), errorcode == "0", isPaymentResult, let reference = transactionReference, !reference.isEmpty else {
            return nil
        }
        let kind: SubscriptionEvent.Kind
        switch settleStatus {
        case "10", "100": kind = .subscriptionActivated
        case "2": kind = .subscriptionSuspended
        case "3": kind = .subscriptionCancelled
        default: return nil
        }
        return SubscriptionEvent(
            merchant: merchant, provider: Provider("trustpayments"), subscription: reference, dedupeKey: "\(reference)|\(kind.rawValue)",
            kind: kind, amount: amount, currency: currency, providerReference: reference, reason: "SETTLESTATUS_\(settleStatus)")
    }

    /// Whether this notification reports the order's payment (AUTH, or ACCOUNTCHECK for a free
    /// trial; a notification without `requesttypedescription` is read as the AUTH). Others
    /// (a SUBSCRIPTION, a THREEDQUERY) are acknowledged and change nothing.
    public var isPaymentResult: Bool {
        guard let type = requestType, !type.isEmpty else { return true }
        return type == "AUTH" || type == "ACCOUNTCHECK"
    }

    /// The order's verdict: AUTH errorcode "0" → `succeeded`, any other → `failed`; a different
    /// site, order or amount → `REFERENCE_MISMATCH` / `AMOUNT_MISMATCH`. Nil when the
    /// notification is not about the payment (`isPaymentResult` is false).
    public func verdict(for expected: TPExpectedOrder) -> ProviderVerdict? {
        guard isPaymentResult else { return nil }
        var entry = fields.mapValues(JSONValue.string)
        if entry["requesttypedescription"] == nil { entry["requesttypedescription"] = "AUTH" }
        // Notification fields are chosen per site in MyST, so absent site/amount fields are tolerated.
        let verdict = TPResponseCheck.evaluate([entry], expected: expected, requireStatedFields: false)
        switch verdict {
        case .succeeded, .failed:
            guard decidesAlone(amountPinned: expected.amount != nil) else {
                let missing = (expected.amount == nil ? ["baseamount", "currencyiso3a"] : ["baseamount"]).filter { (fields[$0] ?? "").isEmpty }
                let why = unreadFields.isEmpty ? "has no \(missing.joined(separator: " or "))" : "carries fields paypipe does not read"
                return .unknown(reason: "the notification \(why), so Trust Payments is asked for the payment's result")
            }
            return verdict
        case .pending, .retry, .unknown, .neverSeen: return verdict
        }
    }
}

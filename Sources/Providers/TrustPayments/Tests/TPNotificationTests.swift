import PaypipeCore
import Testing
import TrustPaymentsTesting

@testable import TrustPayments

@Suite struct TPNotificationTests {
    static let vector: [TPNotification.Field] = [
        ("errorcode", "0"), ("orderreference", "Order"), ("paymenttypedescription", "VISA"), ("requestreference", "RR555"),
        ("settlestatus", "0"), ("sitereference", "test_site12345"), ("transactionreference", "2-44-66"),
    ]
    static let vectorSignature = "1a8b45c137c1d1df8ce6ff923421043f879a85a181e9c0d96a8904211af8b0b0"
    let password = Secret("PASSWORD")

    var signed: [TPNotification.Field] { Self.vector + [("notificationreference", "N-1"), ("responsesitesecurity", Self.vectorSignature)] }

    @Test func providersVector() {
        #expect(TPNotification.signature(fields: Self.vector, password: password) == Self.vectorSignature)
        // Order of arrival, the notificationreference and blank values do not change it.
        let shuffled: [TPNotification.Field] = Self.vector.reversed() + [("notificationreference", "N-77"), ("maskedpan", "")]
        #expect(TPNotification.signature(fields: shuffled, password: password) == Self.vectorSignature)
        #expect(TPNotification.isAuthentic(fields: signed, password: password))
        #expect(TPNotification.isAuthentic(fields: Self.vector + [("responsesitesecurity", Self.vectorSignature.uppercased())], password: password))
    }

    @Test func anyTamperingFails() {
        for index in Self.vector.indices {
            var fields = signed
            fields[index].value += "1"
            #expect(!TPNotification.isAuthentic(fields: fields, password: password), "tampered \(fields[index].name)")
        }
        #expect(!TPNotification.isAuthentic(fields: signed + [("baseamount", "1")], password: password))
        #expect(!TPNotification.isAuthentic(fields: signed, password: Secret("PASSWORD2")))
        #expect(!TPNotification.isAuthentic(fields: Self.vector, password: password))
        // Moving a value to another field name changes the sort order, hence the signature.
        var renamed = signed
        renamed[1].name = "zorderreference"
        #expect(!TPNotification.isAuthentic(fields: renamed, password: password))
    }

    @Test func reasonsForRefusal() {
        func reason(_ fields: [TPNotification.Field]) -> String? {
            do {
                _ = try TPNotification.verify(fields: fields, password: password)
                return nil
            } catch { return error.code.rawValue }
        }
        #expect(reason(Self.vector) == "MISSING_SIGNATURE")
        #expect(reason(Self.vector + [("responsesitesecurity", String(repeating: "0", count: 64))]) == "BAD_SIGNATURE")
        #expect(reason(signed + [("orderreference", "Order")]) == "MALFORMED")
        let withoutOrder = Array(Self.vector.filter { $0.name != "orderreference" })
        #expect(reason(withoutOrder + [("responsesitesecurity", TPNotification.signature(fields: withoutOrder, password: password))]) == "MALFORMED")
    }

    /// The signature covers the values alone, in name order: a captured decline can be split
    /// differently into fields under the same signature. Neither a field no notification
    /// carries nor a value another field's form would not take is believed.
    @Test func aCapturedDeclineCannotBeReSplitIntoASuccess() {
        let decline: [TPNotification.Field] = [
            ("baseamount", "1050"), ("currencyiso3a", "GBP"), ("errorcode", "70000"), ("orderreference", "tp-1"),
            ("requesttypedescription", "AUTH"), ("settlestatus", "3"), ("sitereference", "test_site12345"), ("transactionreference", "57-9-100"),
        ]
        let captured = TPNotification.signature(fields: decline, password: password)
        let expected = TPExpectedOrder(orderId: "tp-1", siteReference: "test_site12345", amount: 1050, currency: "GBP")
        func verdict(_ fields: [TPNotification.Field], for expected: TPExpectedOrder = expected) -> String {
            do {
                let event = try TPNotification.verify(fields: fields + [("responsesitesecurity", captured)], password: password)
                return TPFixtures.kind(event.verdict(for: expected))
            } catch { return error.code.rawValue }
        }
        #expect(verdict(decline) == "failed:DECLINED")
        func split(_ extra: (String, String), currency: String = "GBP") -> [TPNotification.Field] {
            decline.map { $0.name == "errorcode" ? ($0.name, "0") : $0.name == "currencyiso3a" ? ($0.name, currency) : $0 } + [extra]
        }
        // "7000" moved into a field that sorts between currencyiso3a and errorcode: same signature.
        // A field paypipe does not read is carried, so the notification decides nothing alone.
        #expect(TPNotification.signature(fields: split(("decision", "7000")), password: password) == captured)
        #expect(verdict(split(("decision", "7000"))) == "unknown")
        #expect(verdict(split(("enrolled", "7000"))) == "INVALID_FIELD")
        #expect(
            verdict(decline.map { $0.name == "errorcode" ? ($0.name, "0") : $0.name == "currencyiso3a" ? ($0.name, "GBP7000") : $0 })
                == "INVALID_FIELD")
        // Without baseamount and currencyiso3a, authcode and errorcode are neighbours: "70000" can
        // become authcode "7000" and errorcode "0" under the same signature.
        let bare: [TPNotification.Field] = [("errorcode", "70000"), ("orderreference", "tp-1"), ("transactionreference", "57-9-100")]
        let bareSignature = TPNotification.signature(fields: bare, password: password)
        let resplit: [TPNotification.Field] = [
            ("authcode", "7000"), ("errorcode", "0"), ("orderreference", "tp-1"), ("transactionreference", "57-9-100"),
        ]
        #expect(TPNotification.signature(fields: resplit, password: password) == bareSignature)
        let resplitEvent = try? TPNotification.verify(fields: resplit + [("responsesitesecurity", bareSignature)], password: password)
        #expect({ if case .unknown? = resplitEvent?.verdict(for: expected) { true } else { false } }())
        // baseamount pinned by the order's amount sits between them, currency or not.
        let pinned: [TPNotification.Field] = [("baseamount", "1050")] + bare
        let pinnedEvent = try? TPNotification.verify(
            fields: pinned + [("responsesitesecurity", TPNotification.signature(fields: pinned, password: password))], password: password)
        #expect(TPFixtures.kind(pinnedEvent?.verdict(for: expected)) == "failed:DECLINED")
        let unpinned = TPExpectedOrder(orderId: "tp-1", siteReference: "test_site12345", amount: nil, currency: nil)
        #expect({ if case .unknown? = pinnedEvent?.verdict(for: unpinned) { true } else { false } }())
        // One way to write each number: "00000" is not "0".
        #expect(!TPNotification.number("00", 1...5) && TPNotification.number("0", 1...5) && TPNotification.number("70000", 1...5))
    }

    /// An oversized body is 413 TOO_LARGE, as for every provider.
    @Test func oversizedNotificationsAreTooLarge() {
        #expect(throws: CallbackRejection.tooLarge("the notification is larger than 64 KiB")) {
            try TPNotification.parseForm(Array(repeating: UInt8(ascii: "a"), count: 64 * 1024 + 1))
        }
    }

    @Test func interpretation() throws {
        let bare = try TPNotification.verify(fields: signed, password: password)
        #expect(bare.orderReference == "Order")
        #expect(bare.transactionReference == "2-44-66")
        #expect(bare.dedupeKey == "2-44-66")
        let expected = TPExpectedOrder(orderId: "Order", siteReference: "test_site12345", amount: 1050, currency: "GBP")
        // No baseamount: the signature cannot tell authcode's digits from errorcode's, so the
        // order's result is read back.
        #expect({ if case .unknown? = bare.verdict(for: expected) { true } else { false } }())
        let stated = Self.vector + [("baseamount", "1050"), ("currencyiso3a", "GBP")]
        let event = try TPNotification.verify(
            fields: stated + [("responsesitesecurity", TPNotification.signature(fields: stated, password: password))], password: password)
        guard case .succeeded(let result)? = event.verdict(for: expected) else {
            Issue.record("expected success")
            return
        }
        #expect(result["transactionReference"] == "2-44-66")

        let declinedFields: [TPNotification.Field] = stated.map { $0.name == "errorcode" ? ($0.name, "70000") : $0 }
        let declined = try TPNotification.verify(
            fields: declinedFields + [("responsesitesecurity", TPNotification.signature(fields: declinedFields, password: password))],
            password: password)
        #expect({ if case .failed(code: "DECLINED", _)? = declined.verdict(for: expected) { true } else { false } }())

        let otherOrder = TPExpectedOrder(orderId: "Other", siteReference: "test_site12345", amount: 1050, currency: "GBP")
        #expect({ if case .failed(code: "REFERENCE_MISMATCH", _)? = event.verdict(for: otherOrder) { true } else { false } }())

        let subscriptionFields = Self.vector + [("requesttypedescription", "SUBSCRIPTION")]
        let subscription = try TPNotification.verify(
            fields: subscriptionFields + [("responsesitesecurity", TPNotification.signature(fields: subscriptionFields, password: password))],
            password: password)
        #expect(subscription.verdict(for: expected) == nil)
    }

    @Test func formRoundTrip() throws {
        let fields: [TPNotification.Field] = [("orderreference", "ord 1&2=3"), ("errorcode", "0"), ("note", "caf\u{e9}+")]
        let body = TPNotification.formBody(fields: fields, password: password)
        let parsed = try TPNotification.parseForm(body)
        #expect(parsed.map(\.name) == ["orderreference", "errorcode", "note", "responsesitesecurity"])
        #expect(parsed[0].value == "ord 1&2=3")
        #expect(parsed[2].value == "caf\u{e9}+")
        #expect(TPNotification.isAuthentic(fields: parsed, password: password))
        #expect(try TPNotification.parseForm(Array("a=b+c&d=%41".utf8)).map(\.value) == ["b c", "A"])
        #expect(throws: CallbackRejection.self) { try TPNotification.parseForm(Array("a=%4".utf8)) }
        #expect(throws: CallbackRejection.self) { try TPNotification.parseForm(Array("a=%FF".utf8)) }
    }
}

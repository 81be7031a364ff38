import NetsEasy
import PaypipeCore
import Testing

@Suite struct NetsWebhookTests {
    /// Shaped like Nets' documented payment.checkout.completed example.
    static let checkoutCompleted = #"""
        {"id":"f1bd7e0a17b0413a8a3d84cc2a1a2a2c","merchantId":100017120,"timestamp":"2021-05-04T22:09:08.4342+02:00",
         "event":"payment.checkout.completed",
         "data":{"order":{"amount":{"amount":1050,"currency":"SEK"},"reference":"sub-42",
                 "orderItems":[{"reference":"sub-42","name":"Subscription","quantity":1,"unit":"pcs","unitPrice":1050,"taxRate":0,
                                "taxAmount":0,"netTotalAmount":1050,"grossTotalAmount":1050}]},
                 "consumer":{"ip":"10.230.197.32"},"paymentId":"02a900006091a9a96937598058c4e474"}}
        """#

    static var order: Order { Fixtures.createOrder() }

    func verify(
        _ body: String, authorization: String? = Fixtures.webhookSecret, config: NetsConfig = Fixtures.config
    ) -> Result<NetsWebhookEvent, CallbackRejection> {
        Result { () throws(CallbackRejection) in try NetsWebhook.verify(authorization: authorization, body: Array(body.utf8), config: config) }
    }

    func verify(headers: [HTTPHeader], _ body: String = NetsWebhookTests.checkoutCompleted) -> Result<NetsWebhookEvent, CallbackRejection> {
        Result { () throws(CallbackRejection) in try NetsWebhook.verify(headers: headers, body: Array(body.utf8), config: Fixtures.config) }
    }

    @Test func authenticCheckoutCompletedSucceedsTheOrder() throws {
        guard case .success(let event) = verify(Self.checkoutCompleted) else {
            Issue.record("expected authentic")
            return
        }
        #expect(event.id == "f1bd7e0a17b0413a8a3d84cc2a1a2a2c")
        #expect(event.kind == .checkoutCompleted)
        #expect(event.paymentId == "02a900006091a9a96937598058c4e474")
        #expect(event.merchantId == "100017120")
        #expect(event.amount == 1050)
        #expect(event.currency == "SEK")
        #expect(event.reference == "sub-42")
        #expect(
            NetsWebhook.interpret(event, for: Self.order) == .apply(.succeeded(["paymentId": "02a900006091a9a96937598058c4e474", "amount": 1050])))
    }

    @Test(arguments: [
        ("whAuth12345679", "BAD_AUTHORIZATION"),
        ("whAuth1234567", "BAD_AUTHORIZATION"),
        ("whAuth123456789", "BAD_AUTHORIZATION"),
        ("WHAUTH12345678", "BAD_AUTHORIZATION"),
        ("Bearer whAuth12345678", "BAD_AUTHORIZATION"),
        ("", "MISSING_AUTHORIZATION"),
    ])
    func wrongAuthorizationIsForged(_ authorization: String, code: String) {
        guard case .failure(let rejection) = verify(Self.checkoutCompleted, authorization: authorization) else {
            Issue.record("expected forged for \(authorization)")
            return
        }
        #expect(rejection.status == 401)
        #expect(rejection.isForged)
        #expect(rejection.code.rawValue == code)
        #expect(!rejection.message.contains(Fixtures.webhookSecret))
    }

    /// Nexi's own payment.checkout.completed example quotes the amount ("10000"): read as the
    /// same integer, never anything but digits.
    @Test func aQuotedAmountIsReadAsItsInteger() throws {
        let quoted = Self.checkoutCompleted.replacingOccurrences(of: #""amount":1050,"currency""#, with: #""amount":"1050","currency""#)
        guard case .success(let event) = verify(quoted) else {
            Issue.record("the documented shape must be read")
            return
        }
        #expect(event.amount == 1050)
        for bad in [#""10.50""#, #""-1050""#, #""""#, #""1e3""#] {
            let body = Self.checkoutCompleted.replacingOccurrences(of: #""amount":1050,"currency""#, with: #""amount":\#(bad),"currency""#)
            guard case .failure(let rejection) = verify(body) else {
                Issue.record("amount \(bad) must be refused")
                continue
            }
            #expect(rejection.code == "INVALID_FIELD")
        }
    }

    @Test func headersAreSearchedCaseInsensitivelyAndDuplicatesRefused() {
        guard case .success = verify(headers: [HTTPHeader("authorization", Fixtures.webhookSecret)]) else {
            Issue.record("lowercase header name")
            return
        }
        guard case .failure(let missing) = verify(headers: []) else {
            Issue.record("no header")
            return
        }
        #expect(missing.code == "MISSING_AUTHORIZATION")
        let twice = [HTTPHeader("Authorization", Fixtures.webhookSecret), HTTPHeader("Authorization", "other")]
        guard case .failure(let duplicate) = verify(headers: twice), duplicate.isForged else {
            Issue.record("duplicate header")
            return
        }
    }

    @Test func unconfiguredSecretAcceptsNothing() {
        var config = Fixtures.config
        config.webhookAuthorization = Secret("")
        guard case .failure(let rejection) = verify(Self.checkoutCompleted, authorization: "", config: config) else {
            Issue.record("an empty secret must not match an empty header")
            return
        }
        #expect(
            rejection
                == CallbackRejection(status: 401, code: "WEBHOOK_NOT_CONFIGURED", "no nets webhookAuthorization is configured for this merchant"))
    }

    @Test(arguments: [
        ("not json", "INVALID_JSON"),
        ("[1]", "INVALID_JSON"),
        (#"{"event":"payment.checkout.completed","data":{"paymentId":"p1"}}"#, "INVALID_FIELD"),
        (#"{"id":"e1","data":{"paymentId":"p1"}}"#, "INVALID_FIELD"),
        (#"{"id":"e1","event":"payment.checkout.completed"}"#, "INVALID_FIELD"),
        (#"{"id":"e1","event":"payment.checkout.completed","data":{}}"#, "INVALID_FIELD"),
        (#"{"id":"e1","event":"payment.checkout.completed","data":{"paymentId":"p/1"}}"#, "INVALID_FIELD"),
        (#"{"id":"e1","event":"payment.checkout.completed","data":{"paymentId":"p1","order":{"amount":{"amount":10.5}}}}"#, "INVALID_FIELD"),
    ])
    func authenticButUnreadableIsMalformed(body: String, code: String) {
        guard case .failure(let rejection) = verify(body) else {
            Issue.record("expected malformed for \(body)")
            return
        }
        #expect(rejection.status == 400)
        #expect(!rejection.isForged)
        #expect(rejection.code.rawValue == code)
    }

    /// An oversized body is 413 TOO_LARGE, as for every provider.
    @Test func oversizedBodiesAreTooLarge() {
        let huge = "{\"id\":\"" + String(repeating: "a", count: NetsWebhook.maxBodyBytes) + "\"}"
        guard case .failure(let rejection) = verify(huge) else {
            Issue.record("expected too large")
            return
        }
        #expect(rejection.status == 413)
        #expect(rejection.code == "TOO_LARGE")
    }

    @Test func forgedBodiesAreNotEvenParsed() {
        guard case .failure(let rejection) = verify("not json", authorization: "nope"), rejection.isForged else {
            Issue.record("authorization is checked first")
            return
        }
    }

    @Test func inconsistentEventsFailTheOrderForReview() throws {
        let amount = NetsWebhookEvent(
            id: "e1", event: "payment.checkout.completed", paymentId: "p1", amount: 100, currency: "SEK", reference: "sub-42")
        #expect(
            NetsWebhook.interpret(amount, for: Self.order)
                == .apply(.failed(code: "AMOUNT_MISMATCH", message: "webhook payment.checkout.completed amount 100 != order amount 1050")))
        let currency = NetsWebhookEvent(id: "e1", event: "payment.checkout.completed", paymentId: "p1", amount: 1050, currency: "EUR")
        guard case .apply(.failed("AMOUNT_MISMATCH", _)) = NetsWebhook.interpret(currency, for: Self.order) else {
            Issue.record("currency mismatch")
            return
        }
        let reference = NetsWebhookEvent(
            id: "e1", event: "payment.checkout.completed", paymentId: "p1", amount: 1050, currency: "SEK", reference: "other")
        guard case .apply(.failed("REFERENCE_MISMATCH", _)) = NetsWebhook.interpret(reference, for: Self.order) else {
            Issue.record("reference mismatch")
            return
        }
        let informational = NetsWebhookEvent(id: "e2", event: "payment.reservation.created.v2", paymentId: "p1", amount: 1)
        guard case .apply(.failed("AMOUNT_MISMATCH", _)) = NetsWebhook.interpret(informational, for: Self.order) else {
            Issue.record("informational events are checked too")
            return
        }
    }

    @Test func reservationFailedFailsTheOrder() {
        let body =
            #"{"id":"e9","event":"payment.reservation.failed","timestamp":"2026-11-21T05:00:00.000Z","merchantId":"100017120","data":{"paymentId":"p1","amount":{"amount":1050,"currency":"SEK"},"error":{"code":"99","message":"Auth Failed","source":"Internal"}}}"#
        guard case .success(let event) = verify(body) else {
            Issue.record("expected authentic")
            return
        }
        #expect(event.merchantId == "100017120")
        #expect(event.errorMessage == "Auth Failed")
        #expect(
            NetsWebhook.interpret(event, for: Self.order)
                == .apply(.failed(code: "NETS_RESERVATION_FAILED", message: "reservation failed: Auth Failed")))
    }

    @Test(arguments: [
        "payment.reservation.created", "payment.reservation.created.v2", "payment.charge.created.v2", "payment.charge.failed",
        "payment.cancel.created",
    ])
    func otherEventsChangeNothing(_ name: String) throws {
        let body = #"{"id":"e3","event":"\#(name)","data":{"paymentId":"p1","chargeId":"c1","amount":{"amount":1050,"currency":"SEK"}}}"#
        guard case .success(let event) = verify(body) else {
            Issue.record("expected authentic for \(name)")
            return
        }
        #expect(event.event == name)
        guard case .noChange = NetsWebhook.interpret(event, for: Self.order) else {
            Issue.record("\(name) must not change the order")
            return
        }
        if name == "payment.cancel.created" { #expect(event.kind == .other(name)) }
        if name == "payment.charge.created.v2" { #expect(event.chargeId == "c1") }
    }
}

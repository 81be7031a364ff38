import PaypipeCore
import Testing

@testable import PhonePe

@Suite struct PhonePeAuthInitClassificationTests {
    let id = "D2500CEFBBE481095A43D6D5B7A787F"

    @Test func seedSuccessIsPendingWithTheRedirect() {
        let verdict = PhonePeAuthInit.classify(Fixtures.response(200, Fixtures.seedSuccessResponse), authRequestId: id)
        guard case .pending(let result) = verdict else {
            Issue.record("expected pending, got \(verdict)")
            return
        }
        #expect(result["authRequestId"] == .string(id))
        #expect(result["redirectURL"]?.stringValue?.hasPrefix("ppe://mandate?pn=SUBSCRIBEMID&pa=MID12345@ybl") == true)
        #expect(result.count == 2)
    }

    /// The envelope read member by member is the envelope of the parsed object, for every
    /// answer: PhonePe's documented one, nginx's, others spelled or laid out otherwise, and the
    /// malformed, which the full parse refuses (nil) too.
    @Test func everyAnswerReadsAsItsParsedObject() {
        func parsed(_ text: String) -> PhonePeResponse? {
            guard case .object(let object)? = try? JSONValue.parse(Array(text.utf8)) else { return nil }
            return PhonePeResponse(
                success: object["success"]?.boolValue, code: object["code"]?.stringValue, message: object["message"]?.stringValue,
                data: object["data"]?.objectValue)
        }
        let answers = [
            Fixtures.seedSuccessResponse,
            #"{"success":true,"code":"SUCCESS","data":{"redirectType":"INTENT","redirectURL":"ppe://mandate?x=1"}}"#,
            #" { "data" : {"redirectURL":"ppe://m"} , "message":"Your request has been successfully completed.", "code":"SUCCESS","success":true } "#,
            #"{"success":false,"code":"BAD_REQUEST","message":"Bad \u0041 request\n"}"#,
            #"{"success":true,"code":"SUCCESS","extra":1}"#,
            #"{"success":true,"\u0063ode":"SUCCESS"}"#,
            #"{"success":true,"code":"SUCCESS","code":"FAIL"}"#,
            #"{"success":true,"x":1,"x":2}"#,
            #"{"success":"true","code":7,"message":null,"data":[]}"#,
            #"{"códe":"SUCCESS"}"#,
            "{}", "[]", "null", "", #"{"success":true}x"#, #"{"success":true,}"#, #"{"success":tru}"#,
        ]
        for answer in answers {
            #expect(PhonePeResponse(json: Array(answer.utf8)) == parsed(answer), "\(answer)")
        }
        #expect(PhonePeResponse(json: Array(#"{"success":true,"code":"SUCCESS","code":"FAIL"}"#.utf8)) == nil)
        #expect(PhonePeResponse(json: Array(#"{"success":true,"\u0063ode":"SUCCESS"}"#.utf8))?.code == "SUCCESS")
    }

    @Test func acceptsTheTableSpellingRedirectUrl() {
        let body = Fixtures.envelope(code: "SUCCESS", success: true, data: ["redirectType": "INTENT", "redirectUrl": "upi://mandate?pa=x@ybl"])
        #expect(
            PhonePeAuthInit.classify(Fixtures.response(200, body), authRequestId: id)
                == .pending(["redirectURL": "upi://mandate?pa=x@ybl", "authRequestId": .string(id)]))
    }

    @Test func successWithoutAUsableRedirectIsUnknown() {
        for data: JSONValue in [
            [:], ["redirectType": "INTENT", "redirectURL": "javascript:alert(1)"],
            ["redirectType": "INTENT", "redirectURL": "ppe://mandate? x"], ["redirectType": "WEB", "redirectURL": "ppe://mandate?a=1"],
        ] {
            let verdict = PhonePeAuthInit.classify(
                Fixtures.response(200, Fixtures.envelope(code: "SUCCESS", success: true, data: data)), authRequestId: id)
            guard case .unknown = verdict else {
                Issue.record("expected unknown for \(data), got \(verdict)")
                continue
            }
        }
        let contradictory = Fixtures.envelope(code: "SUCCESS", success: false, data: ["redirectType": "INTENT", "redirectURL": "ppe://mandate?a=1"])
        guard case .unknown = PhonePeAuthInit.classify(Fixtures.response(200, contradictory), authRequestId: id) else {
            Issue.record("success false with SUCCESS must be unknown")
            return
        }
    }

    @Test func internalServerErrorIsUnknownWhateverTheStatus() {
        for status in [200, 500] {
            let verdict = PhonePeAuthInit.classify(Fixtures.response(status, Fixtures.envelope(code: "INTERNAL_SERVER_ERROR")), authRequestId: id)
            guard case .unknown = verdict else {
                Issue.record("HTTP \(status): expected unknown, got \(verdict)")
                continue
            }
        }
    }

    @Test func refusalsFailWithTheirCode() {
        for code in [
            "SUBSCRIPTION_NOT_FOUND", "SUBSCRIPTION_EXPIRED", "INVALID_SUBSCRIPTION_STATE", "BAD_REQUEST", "SOMETHING_NEW",
        ] {
            let verdict = PhonePeAuthInit.classify(Fixtures.response(400, Fixtures.envelope(code: code)), authRequestId: id)
            #expect(verdict == .failed(code: OutcomeErrorCode(rawValue: code), message: "m"))
        }
    }

    /// A duplicate is this order's own earlier request: it may have created the mandate, so the
    /// auth status decides, and the order is never failed while PhonePe holds its request.
    @Test func aDuplicateIsResolvedByTheStatusCall() {
        let verdict = PhonePeAuthInit.classify(Fixtures.response(400, Fixtures.envelope(code: "INVALID_TRANSACTION_ID")), authRequestId: id)
        guard case .unknown = verdict else {
            Issue.record("expected unknown, got \(verdict)")
            return
        }
    }

    @Test func transportLevelAnswers() {
        guard case .unknown = PhonePeAuthInit.classify(Fixtures.response(502, "<html>bad gateway</html>"), authRequestId: id) else {
            Issue.record("5xx must be unknown")
            return
        }
        guard case .unknown = PhonePeAuthInit.classify(Fixtures.response(503, Fixtures.envelope(code: "BAD_REQUEST")), authRequestId: id) else {
            Issue.record("5xx must be unknown even with a refusal code")
            return
        }
        guard case .unknown = PhonePeAuthInit.classify(Fixtures.response(200, "not json"), authRequestId: id) else {
            Issue.record("2xx non-JSON must be unknown")
            return
        }
        guard case .retry = PhonePeAuthInit.classify(Fixtures.response(429, ""), authRequestId: id) else {
            Issue.record("429 must be retry")
            return
        }
        #expect(PhonePeAuthInit.classify(Fixtures.response(401, ""), authRequestId: id).failureCode == "HTTP_401")
    }
}

@Suite struct PhonePeAuthStatusTests {
    let order = Fixtures.seedCallbackOrder()
    let merchantId = "MID12345"

    func status(_ data: JSONValue, code: String = "SUCCESS", order: Order? = nil) -> ProviderVerdict {
        PhonePeAuthStatus.classify(
            Fixtures.response(200, Fixtures.envelope(code: code, success: true, data: data)), order: order ?? self.order, merchantId: merchantId)
    }

    let subscriptionCreated: JSONValue = ["subscriptionId": "OMS2006110139450123456789", "state": "CREATED"]
    let subscriptionActive: JSONValue = ["subscriptionId": "OMS2006110139450123456789", "state": "ACTIVE"]
    let subscriptionFailed: JSONValue = ["subscriptionId": "OMS2006110139450123456789", "state": "FAILED"]
    func transaction(_ state: String, amount: JSONValue = 39900, code: String = "SUCCESS") -> JSONValue {
        [
            "providerReferenceId": "P1806151323093900554957", "amount": amount, "state": .string(state), "payResponseCode": .string(code),
            "paymentModes": [["mode": "ACCOUNT", "amount": 399000, "utr": "816626521616"]],
        ]
    }

    @Test func createdIsStillPending() {
        #expect(
            status(["merchantId": "MID12345", "authRequestId": "TX123456789", "subscriptionDetails": subscriptionCreated])
                == .pending(["authRequestId": "TX123456789", "subscriptionState": "CREATED"]))
    }

    /// PhonePe's own status sample has paymentModes[0].amount 399000 against an amount of 39900:
    /// only transactionDetails.amount is compared.
    @Test func activeAndCompletedSucceeds() {
        let verdict = status([
            "merchantId": "MID12345", "authRequestId": "TX123456789",
            "transactionDetails": transaction("COMPLETED"), "subscriptionDetails": subscriptionActive,
        ])
        guard case .succeeded(let result) = verdict else {
            Issue.record("expected succeeded, got \(verdict)")
            return
        }
        #expect(result["providerReferenceId"] == "P1806151323093900554957")
        #expect(result["amount"] == 39900)
        #expect(result["subscriptionState"] == "ACTIVE")
        #expect(status(["transactionDetails": transaction("SUCCESS"), "subscriptionDetails": subscriptionActive]).failureCode == nil)
    }

    @Test func failedFailsWithThePayResponseCode() {
        #expect(
            status(["transactionDetails": transaction("FAILED", code: "AUTHORIZATION_FAILED"), "subscriptionDetails": subscriptionFailed])
                .failureCode == "AUTHORIZATION_FAILED")
        #expect(status(["subscriptionDetails": subscriptionFailed]).failureCode == "SUBSCRIPTION_FAILED")
        #expect(status(["subscriptionDetails": ["state": "REVOKED"]]).failureCode == "SUBSCRIPTION_REVOKED")
    }

    @Test func amountAndReferencesMustMatchTheOrder() {
        #expect(
            status(["transactionDetails": transaction("COMPLETED", amount: 100), "subscriptionDetails": subscriptionActive])
                .failureCode == "AMOUNT_MISMATCH")
        #expect(status(["subscriptionDetails": subscriptionActive]).failureCode == "AMOUNT_MISMATCH")
        #expect(
            status(["merchantId": "OTHER", "transactionDetails": transaction("COMPLETED"), "subscriptionDetails": subscriptionActive])
                .failureCode == "REFERENCE_MISMATCH")
        #expect(status(["authRequestId": "TX999", "transactionDetails": transaction("COMPLETED")]).failureCode == "REFERENCE_MISMATCH")
        #expect(
            status(["transactionDetails": transaction("COMPLETED"), "subscriptionDetails": ["subscriptionId": "OMS1", "state": "ACTIVE"]])
                .failureCode == "REFERENCE_MISMATCH")
    }

    @Test func pennyDropSucceedsWithoutAnAmount() {
        let pennyDrop = Fixtures.seedCallbackOrder(workflow: "PENNY_DROP")
        guard case .succeeded = status(["subscriptionDetails": subscriptionActive], order: pennyDrop) else {
            Issue.record("PENNY_DROP with an ACTIVE mandate must succeed")
            return
        }
        guard
            case .succeeded = status(
                ["transactionDetails": transaction("COMPLETED", amount: 100), "subscriptionDetails": subscriptionActive], order: pennyDrop)
        else {
            Issue.record("PENNY_DROP amounts are not compared")
            return
        }
    }

    @Test func contradictoryOrUnknownStatesAreUnknown() {
        for data: JSONValue in [
            ["transactionDetails": transaction("COMPLETED"), "subscriptionDetails": subscriptionFailed],
            ["transactionDetails": transaction("REVERSED")],
            ["subscriptionDetails": ["state": "SOMETHING"]],
            ["transactionDetails": transaction("COMPLETED", amount: "39900")],
        ] {
            guard case .unknown = status(data) else {
                Issue.record("expected unknown for \(data)")
                continue
            }
        }
    }

    @Test func notFoundMeansTheInitNeverTookEffect() {
        let response = Fixtures.response(404, Fixtures.envelope(code: "TRANSACTION_NOT_FOUND"))
        #expect(PhonePeAuthStatus.classify(response, order: order, merchantId: merchantId).failureCode == "AUTH_REQUEST_NOT_FOUND")
    }

    @Test func unresolvedAnswersAreUnknownNeverRetry() {
        for response in [
            Fixtures.response(500, ""), Fixtures.response(429, ""), Fixtures.response(200, "<html>"),
            Fixtures.response(200, Fixtures.envelope(code: "INTERNAL_SERVER_ERROR")), Fixtures.response(400, Fixtures.envelope(code: "BAD_REQUEST")),
        ] {
            guard case .unknown = PhonePeAuthStatus.classify(response, order: order, merchantId: merchantId) else {
                Issue.record("expected unknown for HTTP \(response.status)")
                continue
            }
        }
    }
}

extension ProviderVerdict {
    var failureCode: String? { if case .failed(let code, _) = self { code.rawValue } else { nil } }
}

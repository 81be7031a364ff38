import Foundation
import PaypipeCore
import Testing

@testable import PhonePe

@Suite struct PhonePeCallbackTests {
    let checksum = PhonePeChecksum(saltKey: Secret(Fixtures.salt), saltIndex: "1")

    func signed(_ body: String) -> (body: [UInt8], xVerify: String) {
        (Array(body.utf8), checksum.xVerify(callbackResponse: Fixtures.responseField(body)))
    }

    func authenticate(_ body: String) throws -> PhonePeCallback {
        let (bytes, xVerify) = signed(body)
        return try PhonePeCallback.authenticate(body: bytes, xVerify: xVerify, checksum: checksum)
    }

    func error(_ body: [UInt8], _ xVerify: String?) -> CallbackRejection? {
        do {
            _ = try PhonePeCallback.authenticate(body: body, xVerify: xVerify, checksum: checksum)
            return nil
        } catch {
            return error
        }
    }

    /// A body whose `response` is base64 of the given JSON text.
    func body(decoded json: String) -> String { "{\"response\":\"\(Data(json.utf8).base64EncodedString())\"}" }

    @Test func seedActiveCallbackDecodesAndSucceeds() throws {
        let callback = try authenticate(Fixtures.seedActiveCallbackBody)
        #expect(callback.callbackType == .auth)
        #expect(callback.merchantId == "MID12345")
        #expect(callback.authRequestId == "TX123456789")
        #expect(callback.success == true)
        #expect(callback.message == "Your subscription is active.")
        #expect(
            callback.state.transaction
                == PhonePeTransactionDetails(
                    providerReferenceId: "P1806151323093900554957", amount: 39900, state: "COMPLETED", payResponseCode: "SUCCESS",
                    paymentModes: [PhonePePaymentMode(mode: "ACCOUNT", amount: 39900, utr: "816626521616")]))
        #expect(callback.state.subscription == PhonePeSubscriptionDetails(subscriptionId: "OMS2006110139450123456789", state: "ACTIVE"))

        let effect = callback.effect(order: Fixtures.seedCallbackOrder(), merchantId: "MID12345")
        guard case .verdict(.succeeded(let result)) = effect else {
            Issue.record("expected succeeded, got \(effect)")
            return
        }
        #expect(result["providerReferenceId"] == "P1806151323093900554957")
        #expect(result["authRequestId"] == "TX123456789")
    }

    @Test func seedFailedCallbackFails() throws {
        let callback = try authenticate(Fixtures.seedFailedCallbackBody)
        #expect(
            callback.effect(order: Fixtures.seedCallbackOrder(), merchantId: "MID12345")
                == .verdict(.failed(code: "AUTHORIZATION_FAILED", message: "PhonePe auth failed (transaction FAILED, subscription FAILED)")))
    }

    @Test func dedupeKeySeparatesStatesAndRepeatsForRedelivery() throws {
        let active = try authenticate(Fixtures.seedActiveCallbackBody)
        let failed = try authenticate(Fixtures.seedFailedCallbackBody)
        #expect(active.dedupeKey == "TX123456789|AUTH|COMPLETED|ACTIVE")
        #expect(active.dedupeKey != failed.dedupeKey)
        #expect(try authenticate(Fixtures.seedActiveCallbackBody).dedupeKey == active.dedupeKey)
    }

    @Test func amountMustEqualTheOrdersForTransaction() throws {
        let callback = try authenticate(Fixtures.seedActiveCallbackBody)
        guard
            case .verdict(.failed(let code, let message)) = callback.effect(order: Fixtures.seedCallbackOrder(amount: 50000), merchantId: "MID12345")
        else {
            Issue.record("expected a failed verdict")
            return
        }
        #expect(code == "AMOUNT_MISMATCH")
        #expect(message.contains("39900") && message.contains("50000"))
        guard case .verdict(.succeeded) = callback.effect(order: Fixtures.seedCallbackOrder(workflow: "PENNY_DROP"), merchantId: "MID12345") else {
            Issue.record("PENNY_DROP orders carry no amount to compare")
            return
        }
    }

    @Test func referencesMustMatch() throws {
        let callback = try authenticate(Fixtures.seedActiveCallbackBody)
        #expect(callback.effect(order: Fixtures.seedCallbackOrder(), merchantId: "MERCHANTUAT").verdictCode == "REFERENCE_MISMATCH")
        let otherRequest = Fixtures.order(params: ["merchantUserId": "U1", "subscriptionId": "OMS2006110139450123456789", "authRequestId": "TX0"])
        #expect(callback.effect(order: otherRequest, merchantId: "MID12345").verdictCode == "REFERENCE_MISMATCH")
    }

    @Test func forgedCallbacksAreRefused() throws {
        let (bytes, xVerify) = signed(Fixtures.seedActiveCallbackBody)
        #expect(error(bytes, xVerify) == nil)
        #expect(error(bytes, nil)?.code == "MISSING_CHECKSUM")
        #expect(error(bytes, "")?.code == "MISSING_CHECKSUM")
        #expect(error(bytes, String(xVerify.dropLast()) + "2")?.code == "BAD_CHECKSUM")
        #expect(error(bytes, xVerify.uppercased()) == nil)
        let other = PhonePeChecksum(saltKey: Secret("wrong-salt"), saltIndex: "1").xVerify(
            callbackResponse: Fixtures.responseField(Fixtures.seedActiveCallbackBody))
        let refused = try #require(error(bytes, other))
        #expect(refused.code == "BAD_CHECKSUM")
        #expect(refused.status == 401)
        #expect(!refused.description.contains(Fixtures.salt) && !refused.description.contains(other))

        // The FAILED body presented with the ACTIVE body's checksum.
        #expect(error(Array(Fixtures.seedFailedCallbackBody.utf8), xVerify)?.code == "BAD_CHECKSUM")
    }

    @Test func malformedCallbacksAreRefusedWithTheReason() {
        func reason(_ text: String) -> String? {
            let response = Fixtures.responseField(text)
            return error(Array(text.utf8), checksum.xVerify(callbackResponse: response))?.code.rawValue
        }
        #expect(reason("not json") == "MALFORMED")
        #expect(reason(#"{"response": 5}"#) == "MALFORMED")
        #expect(reason(#"{"response":"!!!not base64"}"#) == "MALFORMED")
        #expect(reason(body(decoded: "{\u{00A0}\"data\": {}}")) == "MALFORMED")
        #expect(reason(body(decoded: #"{"success":true,"data":{"callbackType":"AUTH","merchantId":"MID12345"}}"#)) == "MALFORMED")
        #expect(
            reason(
                body(
                    decoded:
                        #"{"data":{"callbackType":"AUTH","merchantId":"MID12345","authRequestId":"TX1","transactionDetails":{"amount":"39900"}}}"#))
                == "MALFORMED")
        #expect(
            reason(
                body(
                    decoded: #"{"data":{"callbackType":"AUTH","merchantId":"MID12345","authRequestId":"TX1","transactionDetails":{"amount":399.0}}}"#)
            ) == "MALFORMED")
        #expect(reason(body(decoded: #"{"data":{"callbackType":"AUTH","merchantId":"MID12345","authRequestId":"TX1"}}"#)) == nil)
        let huge = "{\"response\":\"" + String(repeating: "A", count: 70_000) + "\"}"
        #expect(error(Array(huge.utf8), "x")?.code == "TOO_LARGE")
    }

    @Test func unknownFieldsAreIgnored() throws {
        let json =
            #"{"success":true,"code":"SUCCESS","extra":{"a":[1,2]},"data":{"callbackType":"AUTH","merchantId":"MID12345","authRequestId":"TX123456789","newField":"x","transactionDetails":{"amount":39900,"state":"COMPLETED","bank":"HDFC"},"subscriptionDetails":{"subscriptionId":"OMS2006110139450123456789","state":"ACTIVE","frequency":"MONTHLY"}}}"#
        let callback = try authenticate(body(decoded: json))
        guard case .verdict(.succeeded) = callback.effect(order: Fixtures.seedCallbackOrder(), merchantId: "MID12345") else {
            Issue.record("unknown fields must not change the verdict")
            return
        }
    }

    @Test func otherCallbackTypesDoNotDecideTheOrder() throws {
        let json =
            #"{"success":true,"code":"SUCCESS","data":{"callbackType":"DEBIT","merchantId":"MID12345","authRequestId":"TX123456789","transactionDetails":{"amount":1,"state":"FAILED"}}}"#
        let callback = try authenticate(body(decoded: json))
        #expect(callback.callbackType == .debit)
        guard case .ignored = callback.effect(order: Fixtures.seedCallbackOrder(), merchantId: "MID12345") else {
            Issue.record("a DEBIT callback must be ignored for an authInit order")
            return
        }
    }

    /// NOTIFY, DEBIT and SUBSCRIPTION callbacks are the mandate's events, named by its
    /// subscriptionId (PhonePe's recurring reference): a debit completed or failed, a pre-debit
    /// notification, the user revoking or pausing. None needs an authRequestId or an order.
    @Test func laterCallbacksAreTheSubscriptionsEvents() async throws {
        struct NoOrders: CallbackOrderLookup {
            func order(_ key: OrderKey, provider: Provider) async throws(CallbackRejection) -> Order {
                throw .orderNotFound(provider, merchant: key.merchant)
            }
            func order(reference: String, provider: Provider, merchant: String) async throws(CallbackRejection) -> Order {
                throw .orderNotFound(provider, merchant: merchant)
            }
        }
        let config = PaypipeConfig(merchants: ["default": MerchantConfig(Fixtures.config(merchantId: "MID12345"))])
        let connector = await PhonePeConnector(config: config)
        let cases: [(String, SubscriptionEvent.Kind?, String?)] = [
            (
                #""callbackType":"NOTIFY","transactionId":"T1","notificationDetails":{"notificationId":"N1","amount":39900,"state":"NOTIFIED"}"#,
                .renewalScheduled, "NOTIFY|N1"
            ),
            (
                #""callbackType":"DEBIT","transactionId":"T1","transactionDetails":{"amount":39900,"state":"COMPLETED"}"#, .renewalSucceeded,
                "DEBIT|T1|COMPLETED"
            ),
            (
                #""callbackType":"DEBIT","transactionId":"T2","transactionDetails":{"amount":39900,"state":"FAILED","payResponseCode":"Z9"}"#,
                .renewalFailed, "DEBIT|T2|FAILED"
            ),
            (#""callbackType":"DEBIT","transactionId":"T3","transactionDetails":{"amount":39900,"state":"PENDING"}"#, nil, nil),
            (
                #""callbackType":"SUBSCRIPTION","subscriptionDetails":{"subscriptionId":"SUB1","state":"REVOKED","stateStartDate":1700000000000}"#,
                .mandateRevoked, "SUBSCRIPTION|REVOKED|1700000000000"
            ),
            (
                #""callbackType":"SUBSCRIPTION","subscriptionDetails":{"subscriptionId":"SUB1","state":"PAUSED"}"#, .mandatePaused,
                "SUBSCRIPTION|PAUSED|"
            ),
        ]
        for (fields, kind, key) in cases {
            var data = fields
            if !fields.contains("subscriptionDetails") { data += #","subscriptionDetails":{"subscriptionId":"SUB1","state":"ACTIVE"}"# }
            let json = #"{"success":true,"code":"SUCCESS","data":{"merchantId":"MID12345",\#(data)}}"#
            let (bytes, xVerify) = signed(body(decoded: json))
            let decision = try await connector.callback(CallbackRequest(headers: [HTTPHeader("X-VERIFY", xVerify)], body: bytes), orders: NoOrders())
            #expect(decision.order == nil)
            #expect(decision.subscriptionEvents.first?.kind == kind, "\(fields)")
            #expect(decision.subscriptionEvents.first?.dedupeKey == key)
            #expect(decision.subscriptionEvents.allSatisfy { $0.subscription == "SUB1" && $0.merchant == "default" })
        }
        // Without the subscription it names, such a callback cannot be read.
        let json =
            #"{"success":true,"code":"SUCCESS","data":{"merchantId":"MID12345","callbackType":"DEBIT","transactionId":"T1","transactionDetails":{"state":"COMPLETED"}}}"#
        let (bytes, xVerify) = signed(body(decoded: json))
        await #expect(throws: CallbackRejection.self) {
            _ = try await connector.callback(CallbackRequest(headers: [HTTPHeader("X-VERIFY", xVerify)], body: bytes), orders: NoOrders())
        }
    }

    @Test func envelopeGivesLookupIdsThenAuthenticates() throws {
        let (bytes, xVerify) = signed(Fixtures.seedActiveCallbackBody)
        let envelope = try PhonePeCallbackEnvelope(body: bytes)
        #expect(envelope.claimedAuthRequestId == "TX123456789")
        #expect(envelope.claimedMerchantId == "MID12345")
        #expect(try envelope.authenticate(xVerify: xVerify, checksum: checksum) == (try authenticate(Fixtures.seedActiveCallbackBody)))
        #expect(throws: CallbackRejection.self) {
            try envelope.authenticate(xVerify: xVerify, checksum: PhonePeChecksum(saltKey: Secret("x"), saltIndex: "1"))
        }
    }
}

extension PhonePeCallbackEffect {
    var verdictCode: String? { if case .verdict(let verdict) = self { verdict.failureCode } else { nil } }
}

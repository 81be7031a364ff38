import Foundation
import PaypipeCore
import Testing

@testable import PhonePe

@Suite struct PhonePeAuthInitParamsTests {
    private func rejection(_ order: Order) -> Rejection? {
        do {
            _ = try PhonePeAuthInitParams(order: order)
            return nil
        } catch {
            return error
        }
    }

    @Test func readsATransactionOrder() throws {
        let params = try PhonePeAuthInitParams(order: Fixtures.orderWith(["merchantCallBackScheme": "iOSIntentIntegration"]))
        #expect(params.merchantUserId == "5330F4FB-C66C-4646-8691-11544B580547")
        #expect(params.subscriptionId == "OMS2301191527473651197003")
        #expect(params.authWorkflowType == .transaction)
        #expect(params.amount == 39900)
        #expect(params.merchantCallBackScheme == "iOSIntentIntegration")
    }

    @Test func derivesAStableAuthRequestIdFromMerchantAndOrderId() throws {
        let a = try PhonePeAuthInitParams(order: Fixtures.order(orderId: "ord-1")).authRequestId
        let again = try PhonePeAuthInitParams(order: Fixtures.order(orderId: "ord-1")).authRequestId
        let otherOrder = try PhonePeAuthInitParams(order: Fixtures.order(orderId: "ord-2")).authRequestId
        let otherMerchant = try PhonePeAuthInitParams(order: Fixtures.order(orderId: "ord-1", merchant: "shop2")).authRequestId
        #expect(a == again)
        #expect(a != otherOrder)
        #expect(a != otherMerchant)
        #expect(a.utf8.count == 32)
        #expect(PhonePeRules.isIdentifier(a, maxLength: PhonePeRules.authRequestIdMaxLength))
        #expect(a == a.uppercased())
        // From Python's hashlib: the id must not change between versions, since a redelivered
        // order's status call and its callback are matched by it.
        #expect(a == "C6AEBB71C18F78AC2F504893809B7FB0")
    }

    @Test func takesAnExplicitAuthRequestIdAndRejectsUnsafeOnes() throws {
        #expect(
            try PhonePeAuthInitParams(order: Fixtures.orderWith(["authRequestId": "D2500CEFBBE481095A43D6D5B7A787F"])).authRequestId
                == "D2500CEFBBE481095A43D6D5B7A787F")
        for bad: JSONValue in ["../x", "a b", "", .string(String(repeating: "A", count: 36)), 12345] {
            #expect(rejection(Fixtures.orderWith(["authRequestId": bad]))?.field == "params.authRequestId")
        }
        #expect(rejection(Fixtures.orderWith(["authRequestId": .string(String(repeating: "A", count: 35))])) == nil)
    }

    /// The ledger indexes the id read alone; a callback then finds the order by the id its
    /// auth/init carried, so the two must agree whenever the signer signs the order.
    @Test func theIndexedAuthRequestIdIsTheOneSigned() throws {
        let orders = [
            Fixtures.order(), Fixtures.order(orderId: "ord-2", merchant: "shop2"), Fixtures.orderWith(["authRequestId": "TX123456789"]),
            Fixtures.orderWith(["authRequestId": .string(String(repeating: "A", count: 35)), "authWorkflowType": "PENNY_DROP"], amount: nil),
        ]
        for order in orders {
            #expect(PhonePeAuthInitParams.authRequestId(of: order) == (try PhonePeAuthInitParams(order: order)).authRequestId)
        }
        #expect(PhonePeAuthInitParams.authRequestId(of: Fixtures.order(orderId: "ord-1")) == "C6AEBB71C18F78AC2F504893809B7FB0")
        for bad: JSONValue in ["../x", "a b", "", .string(String(repeating: "A", count: 36)), 12345, .null] {
            #expect(PhonePeAuthInitParams.authRequestId(of: Fixtures.orderWith(["authRequestId": bad])) == nil)
        }
        // Params the signer refuses do not change the id (no request under it ever leaves).
        let refused = Fixtures.orderWith(["merchantUserId": "../x"])
        #expect(rejection(refused)?.field == "params.merchantUserId")
        #expect(
            PhonePeAuthInitParams.authRequestId(of: refused) == PhonePeAuthInitParams.defaultAuthRequestId(merchant: "default", orderId: "ord-000123")
        )
    }

    @Test func requiresMerchantUserIdAndSubscriptionId() {
        let noUser = Fixtures.order(params: ["subscriptionId": "OMS2301191527473651197003"])
        #expect(rejection(noUser) == Rejection.missingParam("merchantUserId"))
        let noSubscription = Fixtures.order(params: ["merchantUserId": "U1"])
        #expect(rejection(noSubscription) == Rejection.missingParam("subscriptionId"))
    }

    @Test func checksIdCharsetsLengthsAndTypes() {
        #expect(rejection(Fixtures.orderWith(["merchantUserId": "user@example.com"]))?.field == "params.merchantUserId")
        #expect(rejection(Fixtures.orderWith(["merchantUserId": .string(String(repeating: "u", count: 37))]))?.field == "params.merchantUserId")
        #expect(rejection(Fixtures.orderWith(["subscriptionId": 42]))?.field == "params.subscriptionId")
        #expect(rejection(Fixtures.orderWith(["subscriptionId": "OMS/../admin"]))?.field == "params.subscriptionId")
        #expect(
            rejection(Fixtures.orderWith(["subscriptionId": "OMS?x=1"]))?.message == "params.subscriptionId must be 1-64 characters of [A-Za-z0-9_-]")
        #expect(rejection(Fixtures.orderWith(["authRequestId": .null]))?.message == "params.authRequestId must be a string, got null")
    }

    @Test func checksTheWorkflowType() throws {
        #expect(try PhonePeAuthInitParams(order: Fixtures.orderWith(["authWorkflowType": "PENNY_DROP"])).authWorkflowType == .pennyDrop)
        #expect(rejection(Fixtures.orderWith(["authWorkflowType": "penny_drop"]))?.field == "params.authWorkflowType")
        #expect(rejection(Fixtures.orderWith(["authWorkflowType": true]))?.field == "params.authWorkflowType")
        // A wrong type names the types; null is a wrong type, not the default.
        #expect(rejection(Fixtures.orderWith(["authWorkflowType": true]))?.message == "params.authWorkflowType must be a string, got a boolean")
        #expect(rejection(Fixtures.orderWith(["authWorkflowType": .null]))?.message == "params.authWorkflowType must be a string, got null")
    }

    @Test func checksTheCallBackScheme() {
        #expect(rejection(Fixtures.orderWith(["merchantCallBackScheme": "my.app+v2"])) == nil)
        #expect(rejection(Fixtures.orderWith(["merchantCallBackScheme": "1app"]))?.field == "params.merchantCallBackScheme")
        #expect(rejection(Fixtures.orderWith(["merchantCallBackScheme": "app://x"]))?.field == "params.merchantCallBackScheme")
        #expect(
            rejection(Fixtures.orderWith(["merchantCallBackScheme": .string(String(repeating: "a", count: 65))]))?.message
                == "params.merchantCallBackScheme must be 1-64 characters")
        #expect(
            rejection(Fixtures.orderWith(["merchantCallBackScheme": .null]))?.message == "params.merchantCallBackScheme must be a string, got null")
    }

    @Test func rejectsUnknownParamsByName() {
        let r = rejection(Fixtures.orderWith(["authWorkflowtype": "PENNY_DROP"]))
        #expect(r?.code == .unknownField)
        #expect(r?.field == "params.authWorkflowtype")
        #expect(
            r?.message
                == "params.authWorkflowtype is not a parameter of phonepe authInit (allowed: authRequestId, authWorkflowType, merchantCallBackScheme, merchantUserId, schedule, subscriptionId)"
        )
    }

    @Test func transactionNeedsAPositiveINRAmount() {
        #expect(rejection(Fixtures.orderWith([:], amount: nil))?.field == "amount")
        #expect(rejection(Fixtures.orderWith([:], amount: 0))?.field == "amount")
        #expect(rejection(Fixtures.orderWith([:], currency: "GBP"))?.field == "currency")
        #expect(rejection(Fixtures.orderWith([:], currency: nil))?.field == "currency")
    }

    @Test func pennyDropIgnoresAnyAmount() throws {
        #expect(try PhonePeAuthInitParams(order: Fixtures.orderWith(["authWorkflowType": "PENNY_DROP"], amount: nil, currency: nil)).amount == nil)
        #expect(try PhonePeAuthInitParams(order: Fixtures.orderWith(["authWorkflowType": "PENNY_DROP"], amount: 500)).amount == nil)
    }

    @Test func rejectsOtherOperations() {
        let order = Order(orderId: "o1", operation: Operation(Provider("viva"), "sale"), amount: 1, currency: "INR", params: [:])
        #expect(rejection(order)?.field == "operation")
    }
}

@Suite struct PhonePeAuthInitRequestTests {
    @Test func buildsTheSignedPost() throws {
        let order = Fixtures.orderWith(["merchantCallBackScheme": "iOSIntentIntegration"])
        let built = try PhonePeAuthInit(order: order, config: Fixtures.config())
        let request = built.request
        #expect(request.method == .POST)
        #expect(request.url == "http://127.0.0.1:9103/v3/recurring/auth/init")
        #expect(request.header("Content-Type") == "application/json")
        #expect(request.header("X-CALLBACK-URL") == "https://merchant.example/callbacks/phonepe")

        let body = try #require(try? JSONValue.parse(request.body).objectValue)
        #expect(Array(body.keys) == ["request"])
        let b64 = try #require(body["request"]?.stringValue)
        #expect(request.header("X-VERIFY") == Digest.sha256Hex(b64 + "/v3/recurring/auth/init" + Fixtures.salt) + "###1")

        let payload = try #require(Fixtures.decodedPayload(request))
        #expect(
            payload == [
                "merchantId": "MERCHANTUAT", "merchantUserId": "5330F4FB-C66C-4646-8691-11544B580547",
                "subscriptionId": "OMS2301191527473651197003", "authRequestId": .string(built.authRequestId),
                "amount": 39900, "paymentScope": "PHONEPE",
                "deviceContext": ["deviceOS": "IOS", "merchantCallBackScheme": "iOSIntentIntegration"],
            ])
    }

    /// The payload is written member by member; its bytes must be canonical JSON (keys sorted,
    /// compact: what its own parse serializes to), with and without an amount and a scheme.
    @Test func thePayloadBytesAreItsCanonicalJSON() throws {
        let orders = [
            Fixtures.order(), Fixtures.orderWith(["merchantCallBackScheme": "iOSIntentIntegration"]),
            Fixtures.orderWith(["authWorkflowType": "PENNY_DROP"], amount: 500), Fixtures.orderWith(["authRequestId": "AR-explicit_1"]),
        ]
        for order in orders {
            let built = try PhonePeAuthInit(order: order, config: Fixtures.config(callbackScheme: "merchantapp"))
            let body = try #require(try? JSONValue.parse(built.request.body).objectValue)
            let b64 = try #require(body["request"]?.stringValue)
            let bytes = Array(try #require(Data(base64Encoded: b64)))
            let payload = try JSONValue.parse(bytes)
            #expect(bytes == payload.bytes)
            #expect(payload["authRequestId"] == .string(built.authRequestId) && payload["merchantUserId"] == .string(built.params.merchantUserId))
        }
    }

    @Test func pennyDropPayloadHasNoAmount() throws {
        let built = try PhonePeAuthInit(order: Fixtures.orderWith(["authWorkflowType": "PENNY_DROP"], amount: 500), config: Fixtures.config())
        let payload = try #require(Fixtures.decodedPayload(built.request))
        #expect(payload["amount"] == nil)
        #expect(payload["deviceContext"] == ["deviceOS": "IOS", "merchantCallBackScheme": .string(Fixtures.callbackScheme)])
    }

    /// PhonePe's auth/init request table marks deviceContext.merchantCallBackScheme mandatory: the
    /// order's own, else the merchant's phonepe.callbackScheme, else the order is rejected naming
    /// the field.
    @Test func alwaysSendsACallBackScheme() throws {
        func scheme(_ order: Order, _ config: PhonePeConfig) throws -> JSONValue? {
            try #require(Fixtures.decodedPayload(try PhonePeAuthInit(order: order, config: config).request))["deviceContext"]?[
                "merchantCallBackScheme"]
        }
        #expect(try scheme(Fixtures.order(), Fixtures.config(callbackScheme: "merchantapp")) == "merchantapp")
        #expect(
            try scheme(Fixtures.orderWith(["merchantCallBackScheme": "ordered.app"]), Fixtures.config(callbackScheme: "merchantapp")) == "ordered.app"
        )
        #expect(
            try PhonePeAuthInit(order: Fixtures.order(), config: Fixtures.config(callbackScheme: "merchantapp")).params.merchantCallBackScheme
                == "merchantapp")

        for workflow in ["TRANSACTION", "PENNY_DROP"] {
            do {
                _ = try PhonePeAuthInit(
                    order: Fixtures.orderWith(["authWorkflowType": .string(workflow)]), config: Fixtures.config(callbackScheme: nil))
                Issue.record("an order with no scheme anywhere must be rejected")
            } catch {
                #expect(error.code == .missingParam)
                #expect(error.field == "params.merchantCallBackScheme")
                #expect(error.message.contains("phonepe.callbackScheme"))
                #expect(error.message.contains("mandatory"))
            }
        }
        do {
            _ = try PhonePeAuthInit(order: Fixtures.order(), config: Fixtures.config(callbackScheme: "not a scheme"))
            Issue.record("an unusable configured scheme must be rejected")
        } catch {
            #expect(error.code.rawValue == "INVALID_CONFIG")
            #expect(error.field == "phonepe.callbackScheme")
        }
    }

    @Test func theConnectorRejectsAnOrderWithoutAScheme() async throws {
        let config = PaypipeConfig(merchants: ["default": MerchantConfig(Fixtures.config(callbackScheme: nil))])
        let connector = await PhonePeConnector(config: config)
        do {
            _ = try connector.sign(Fixtures.order(), purpose: .submit, nowSeconds: 1_700_000_000)
            Issue.record("expected a rejection")
        } catch {
            #expect(error.field == "params.merchantCallBackScheme")
        }
        // A status check sends no auth/init, so it needs no scheme.
        guard
            case .request(let status)? = try connector.signStatusCheck(
                Fixtures.order(), pending: [:], purpose: .statusCheck, nowSeconds: 1_700_000_000)
        else {
            Issue.record("a status check is a request")
            return
        }
        #expect(status.request.method == .GET)
        #expect(status.request == status.resolve)
        #expect(
            status.request
                == (try PhonePeAuthStatus.request(
                    order: Fixtures.order(), config: Fixtures.config(), checksum: PhonePeChecksum(config: Fixtures.config()))))
    }

    /// The connector checks each merchant's settings once, when it is built: every order still
    /// gets its own merchant's request, or the rejection that names what is wrong.
    @Test func theConnectorSignsEachMerchantWithItsOwnSettings() async throws {
        var broken = Fixtures.config(merchantId: "BROKEN")
        broken.baseURL = "ftp://host"
        let second = Fixtures.config(merchantId: "SECONDMID", saltIndex: "2")
        let config = PaypipeConfig(merchants: [
            "default": MerchantConfig(Fixtures.config()), "second": MerchantConfig(second),
            "broken": MerchantConfig(broken), "no-phonepe": MerchantConfig(), "caf\u{E9}": MerchantConfig(Fixtures.config()),
        ])
        let connector = await PhonePeConnector(config: config)
        func signed(_ merchant: String) throws(Rejection) -> SignedRequest<PhonePeConnector.Context> {
            guard case .request(let signed) = try connector.sign(Fixtures.order(merchant: merchant), purpose: .submit, nowSeconds: 1_700_000_000)
            else {
                throw Rejection(.missingField, field: "test", "not a request")
            }
            return signed
        }
        func rejection(_ merchant: String) -> Rejection? {
            do {
                _ = try signed(merchant)
                return nil
            } catch {
                return error
            }
        }
        for (merchant, settings) in [("default", Fixtures.config()), ("second", second)] {
            let expected = try PhonePeAuthInit(order: Fixtures.order(merchant: merchant), config: settings)
            let got = try signed(merchant)
            #expect(got.request == expected.request)
            #expect(got.resolve == expected.statusRequest)
            #expect(got.request.header("X-VERIFY")?.hasSuffix("###\(settings.saltIndex)") == true)
        }
        // Checked once, rejected every time.
        for _ in 0..<2 {
            #expect(rejection("broken")?.field == "phonepe.baseURL")
            #expect(rejection("broken")?.code == .phonePeInvalidConfig)
        }
        #expect(rejection("no-phonepe")?.code == .missingCredentials)
        #expect(rejection("ghost")?.code == .unknownMerchant)
        // A canonically equivalent spelling is another merchant: names match byte for byte.
        #expect(rejection("cafe\u{301}")?.code == .unknownMerchant)
        #expect(rejection("caf\u{E9}") == nil)
    }

    @Test func isDeterministicForAReplayedOrder() throws {
        let first = try PhonePeAuthInit(order: Fixtures.order(), config: Fixtures.config())
        let second = try PhonePeAuthInit(order: Fixtures.order(), config: Fixtures.config())
        #expect(first.request == second.request)
    }

    @Test func buildsTheMatchingStatusRequest() throws {
        var config = Fixtures.config()
        config.baseURL = "http://127.0.0.1:9103/"
        let built = try PhonePeAuthInit(order: Fixtures.orderWith(["authRequestId": "TX123456789"]), config: config)
        let path = "/v3/recurring/auth/status/MERCHANTUAT/TX123456789"
        #expect(built.request.url == "http://127.0.0.1:9103/v3/recurring/auth/init")
        #expect(built.statusRequest.method == .GET)
        #expect(built.statusRequest.url == "http://127.0.0.1:9103" + path)
        #expect(built.statusRequest.header("X-VERIFY") == Digest.sha256Hex(path + Fixtures.salt) + "###1")
        #expect(built.statusRequest.header("X-MERCHANT-ID") == nil)
        #expect(
            try PhonePeAuthStatus.request(
                order: Fixtures.orderWith(["authRequestId": "TX123456789"]), config: config,
                checksum: PhonePeChecksum(config: config)) == built.statusRequest)
    }

    @Test func rejectsUnusableConfigWithoutRevealingTheSalt() {
        func field(_ change: (inout PhonePeConfig) -> Void) -> String? {
            var config = Fixtures.config()
            change(&config)
            do {
                _ = try PhonePeAuthInit(order: Fixtures.order(), config: config)
                return nil
            } catch {
                #expect(!error.message.contains(Fixtures.salt))
                return error.field
            }
        }
        #expect(field { _ in } == nil)
        #expect(field { $0.merchantId = "MID/../x" } == "phonepe.merchantId")
        #expect(field { $0.callbackURL = "https://x.example/cb\r\nX-Evil: 1" } == "phonepe.callbackURL")
        #expect(field { $0.baseURL = "ftp://host" } == "phonepe.baseURL")
        #expect(field { $0.saltIndex = "1#" } == "phonepe.saltIndex")
        #expect(field { $0.saltKey = Secret("") } == "phonepe.saltKey")
    }

    @Test func redactsTheChecksumInDescriptions() throws {
        let built = try PhonePeAuthInit(order: Fixtures.order(), config: Fixtures.config())
        #expect(!built.request.description.contains(try #require(built.request.header("X-VERIFY"))))
        #expect(!"\(Fixtures.config())".contains(Fixtures.salt))
    }

    /// PhonePe's auth/init request samples are documentation only: they decode to text with U+00A0
    /// (no-break space) indentation, which strict JSON rejects. With those turned into plain
    /// spaces they show the field names and nesting this module sends. The PENNY_DROP sample is
    /// the very same string and so carries `amount`, contradicting its own table.
    @Test func seedRequestSamplesAreDocumentationOnly() throws {
        let data = try #require(Data(base64Encoded: Fixtures.seedRequestSample))
        let text = String(decoding: data, as: UTF8.self)
        #expect(text.unicodeScalars.contains("\u{00A0}"))
        #expect(throws: JSONParseError.self) { try JSONValue.parse(Array(data)) }

        let cleaned = try JSONValue.parse(text.replacingOccurrences(of: "\u{00A0}", with: " "))
        #expect(cleaned["merchantId"] == "MERCHANTUAT")
        #expect(cleaned["authRequestId"] == "D2500CEFBBE481095A43D6D5B7A787F")
        #expect(cleaned["paymentScope"] == "PHONEPE")
        #expect(cleaned["amount"] == 39900)
        #expect(cleaned["deviceContext"]?["deviceOS"] == "IOS")
        #expect(cleaned["deviceContext"]?["merchantCallBackScheme"] == "iOSIntentIntegration")
        #expect(Fixtures.seedPennyDropRequestSample == Fixtures.seedRequestSample)

        // Our payload for the same values uses exactly the documented names for every field we
        // send.
        let order = Fixtures.orderWith([
            "merchantUserId": "5330F4FB-C66C-4646-8691-11544B580547", "authRequestId": "D2500CEFBBE481095A43D6D5B7A787F",
            "merchantCallBackScheme": "iOSIntentIntegration",
        ])
        let payload = try #require(Fixtures.decodedPayload(try PhonePeAuthInit(order: order, config: Fixtures.config()).request))
        let seed = try #require(cleaned.objectValue)
        for (key, value) in payload where key != "deviceContext" { #expect(seed[key] == value, "field \(key)") }
        for (key, value) in payload["deviceContext"]?.objectValue ?? [:] { #expect(seed["deviceContext"]?[key] == value, "deviceContext.\(key)") }
    }
}

/// An auth/init whose answer was lost is resolved with the auth status call; PhonePe's "not
/// found" then only says it has not arrived yet, so the order is not told it failed.
@Suite struct PhonePeUnknownResolutionTests {
    @Test func notFoundAfterALostAnswerIsUnknownNeverFailed() async throws {
        let connector = await PhonePeConnector(config: PaypipeConfig(merchants: ["default": MerchantConfig(Fixtures.config())]))
        guard case .request(let signed) = try connector.sign(Fixtures.order(), purpose: .submit, nowSeconds: 1_700_000_000) else {
            Issue.record("auth/init is a request")
            return
        }
        let notFound = Fixtures.response(404, Fixtures.envelope(code: "TRANSACTION_NOT_FOUND"))
        func reading(_ exchange: Exchange<PhonePeConnector.Context>) -> ProviderReading {
            connector.read(notFound, to: signed.resolve!, in: exchange)
        }
        let lost = Exchange(order: Fixtures.order(), signed: signed, purpose: .submit, phase: .resolving)
        guard case .verdict(.unknown) = reading(lost) else {
            Issue.record("a lost auth/init's not-found must stay unknown, got \(reading(lost))")
            return
        }
        let redelivered = Exchange(order: Fixtures.order(), signed: signed, purpose: .submit, phase: .resolving, resolvingBeforeResubmit: true)
        guard case .verdict(.neverSeen) = reading(redelivered) else {
            Issue.record("before a resubmission, not-found means never seen")
            return
        }
        let checked = Exchange(order: Fixtures.order(), signed: signed, purpose: .statusCheck, phase: .resolving)
        // A pending order's status check: its auth/init was answered, so not-found ends it.
        guard case .verdict(let verdict) = reading(checked) else {
            Issue.record("a status check reads a verdict")
            return
        }
        #expect(verdict.failureCode == "AUTH_REQUEST_NOT_FOUND")
    }
}

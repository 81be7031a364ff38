import FixtureCorpus
import Foundation
import PaypipeCore
import PhonePe
import PhonePeTesting
import Testing

@testable import PhonePeEmulation
@testable import Sandbox

@Suite struct PhonePeSandboxTests {
    static func order(_ orderId: String, merchant: String = "default", subscriptionId: String = "SUB-1001") -> Order {
        Order(
            orderId: orderId, merchant: merchant, operation: .authInit, amount: 39900, currency: "INR",
            params: ["merchantUserId": "U123456", "subscriptionId": .string(subscriptionId), "merchantCallBackScheme": "paypipe"])
    }

    @Test func authInitIsAcceptedTheCallbackArrivesSignedAndStatusTurnsTerminal() async throws {
        try await Receiver.run { receiver, callbackPort in
            // Long enough that the status call right after auth/init still sees the mandate pending on a busy machine.
            let settings = SandboxConfiguration().with { $0.phonePe.callbackDelayMilliseconds = 3000 }
            try await withSandbox(settings, callbackPort: callbackPort) { sandbox in
                let config = try #require(try Fixtures.merchant(sandbox.config).phonepe)
                let order = Self.order("pp-flow")
                let authInit = try PhonePeAuthInit(order: order, config: config)
                #expect(authInit.request.url == "http://127.0.0.1:\(sandbox.port)/phonepe/v3/recurring/auth/init")

                let response = try await sandbox.send(authInit.request)
                #expect(response.status == 200)
                let verdict = PhonePeAuthInit.classify(response, authRequestId: authInit.authRequestId)
                #expect(verdict.kind == "pending")

                // Before the callback delay the status call still reports the mandate pending.
                let early = try await sandbox.send(authInit.statusRequest)
                #expect(PhonePeAuthStatus.classify(early, order: order, merchantId: config.merchantId).kind == "pending")

                let callbacks = try await receiver.wait(for: 1)
                let callback = try #require(callbacks.first)
                #expect(callback.path == "/callbacks/phonepe")
                let authentic = try PhonePeCallback.authenticate(
                    body: callback.body, xVerify: callback.header("X-VERIFY"), checksum: PhonePeChecksum(config: config))
                #expect(authentic.authRequestId == authInit.authRequestId)
                guard case .verdict(let outcome) = authentic.effect(order: order, merchantId: config.merchantId) else {
                    Issue.record("callback was ignored")
                    return
                }
                #expect(outcome.kind == "succeeded")

                let late = try await sandbox.send(authInit.statusRequest)
                #expect(PhonePeAuthStatus.classify(late, order: order, merchantId: config.merchantId).kind == "succeeded")
                #expect(sandbox.ledger.effects("phonepe:" + authInit.authRequestId) == 1)
            }
        }
    }

    /// PhonePe refuses an authRequestId it has seen (INVALID_TRANSACTION_ID "Duplicate
    /// TransactionID", HTTP 400 as the corpus fixture shows); the sandbox neither replays the
    /// first answer nor creates a second mandate.
    @Test func aRepeatedAuthRequestIdIsRefusedAsADuplicateAndCreatesNoSecondMandate() async throws {
        try await Receiver.run { receiver, callbackPort in
            let settings = SandboxConfiguration().with { $0.phonePe.callbackDelayMilliseconds = 50 }
            try await withSandbox(settings, callbackPort: callbackPort) { sandbox in
                let config = try #require(try Fixtures.merchant(sandbox.config).phonepe)
                let authInit = try PhonePeAuthInit(order: Self.order("pp-replay"), config: config)
                let first = try await sandbox.send(authInit.request)
                let second = try await sandbox.send(authInit.request)
                #expect(first.status == 200)
                let duplicate = PhonePeCorpus.all.named("authinitresponse--invalid-transaction-id-duplicate")
                #expect(second.status == duplicate.status)
                #expect(try JSONValue.parse(second.body) == duplicate.json)
                // The refusal is read as "ask the status call", never as a decline.
                #expect(PhonePeAuthInit.classify(second, authRequestId: authInit.authRequestId).isUnknown)
                let key = "phonepe:" + authInit.authRequestId
                #expect(sandbox.ledger.requests(key) == 2)
                #expect(sandbox.ledger.effects(key) == 1)
                // One mandate, one callback.
                _ = try await receiver.wait(for: 1)
                try await Task.sleep(for: .milliseconds(200))
                #expect(receiver.received.withLock { $0.count } == 1)
            }
        }
    }

    @Test func aRepeatedAuthRequestIdWithAnotherPayloadIsRefusedToo() async throws {
        // A callback delay the status call below beats even on a loaded machine.
        try await withSandbox(SandboxConfiguration().with { $0.phonePe.callbackDelayMilliseconds = 10_000 }) { sandbox in
            let config = try #require(try Fixtures.merchant(sandbox.config).phonepe)
            let first = try PhonePeAuthInit(order: Self.order("pp-same-id"), config: config)
            var changed = Self.order("pp-same-id")
            changed.amount = 50000
            let second = try PhonePeAuthInit(order: changed, config: config)
            #expect(first.authRequestId == second.authRequestId)
            #expect(first.request.body != second.request.body)
            let firstAnswer = try await sandbox.send(first.request)
            let secondAnswer = try await sandbox.send(second.request)
            #expect(firstAnswer.status == 200)
            #expect(secondAnswer.status == 400)
            #expect(try JSONValue.parse(secondAnswer.body)["code"] == "INVALID_TRANSACTION_ID")
            #expect(sandbox.ledger.effects("phonepe:" + first.authRequestId) == 1)
            // The status call still reports the first mandate (its amount, still pending).
            let status = try await sandbox.send(second.statusRequest)
            #expect(PhonePeAuthStatus.classify(status, order: Self.order("pp-same-id"), merchantId: config.merchantId).kind == "pending")
        }
    }

    @Test func aWrongSaltIsRefusedWith401() async throws {
        try await withSandbox { sandbox in
            var config = try #require(try Fixtures.merchant(sandbox.config).phonepe)
            config.saltKey = Secret("not-the-salt")
            let authInit = try PhonePeAuthInit(order: Self.order("pp-401"), config: config)
            let response = try await sandbox.send(authInit.request)
            #expect(response.status == 401)
            #expect(PhonePeAuthInit.classify(response, authRequestId: authInit.authRequestId).kind.hasPrefix("failed"))
            #expect(sandbox.ledger.effects("phonepe:" + authInit.authRequestId) == 0)
            let status = try await sandbox.send(authInit.statusRequest)
            #expect(status.status == 401)
        }
    }

    @Test func theMerchantIsChosenByMerchantId() async throws {
        try await withSandbox { sandbox in
            let config = try #require(try Fixtures.merchant(sandbox.config, "second").phonepe)
            let authInit = try PhonePeAuthInit(order: Self.order("pp-second", merchant: "second"), config: config)
            let response = try await sandbox.send(authInit.request)
            #expect(response.status == 200)
            #expect(PhonePeAuthInit.classify(response, authRequestId: authInit.authRequestId).kind == "pending")
        }
    }

    @Test func aWrongChecksumVariantIsSentWhenAsked() async throws {
        try await Receiver.run { receiver, callbackPort in
            let settings = SandboxConfiguration().with {
                $0.phonePe.callbackDelayMilliseconds = 0
                $0.phonePe.callbackVariant = .wrongChecksum
            }
            try await withSandbox(settings, callbackPort: callbackPort) { sandbox in
                let config = try #require(try Fixtures.merchant(sandbox.config).phonepe)
                let authInit = try PhonePeAuthInit(order: Self.order("pp-forged"), config: config)
                _ = try await sandbox.send(authInit.request)
                let callback = try #require(try await receiver.wait(for: 1).first)
                #expect(throws: CallbackRejection.self) {
                    try PhonePeCallback.authenticate(
                        body: callback.body, xVerify: callback.header("X-VERIFY"), checksum: PhonePeChecksum(config: config))
                }
            }
        }
    }

    @Test func aFailedCallbackIsRetried() async throws {
        try await Receiver.run(failFirst: 1) { receiver, callbackPort in
            let settings = SandboxConfiguration(outboundRetryBaseMilliseconds: 20).with { $0.phonePe.callbackDelayMilliseconds = 0 }
            try await withSandbox(settings, callbackPort: callbackPort) { sandbox in
                let config = try #require(try Fixtures.merchant(sandbox.config).phonepe)
                let authInit = try PhonePeAuthInit(order: Self.order("pp-retry"), config: config)
                _ = try await sandbox.send(authInit.request)
                let callbacks = try await receiver.wait(for: 2)
                #expect(callbacks.count == 2)
                #expect(callbacks.first?.body == callbacks.last?.body)
            }
        }
    }
}

// MARK: The emulator on its own, without the server

extension PhonePeSandboxTests {
    var config: PhonePeConfig { PhonePeFixtures.config() }
    var sandbox: PhonePeSandbox { PhonePeSandbox(config: config) }

    func signed(_ order: Order) throws -> PhonePeAuthInit { try PhonePeAuthInit(order: order, config: config) }

    func mandate(_ order: Order, workflow: PhonePeAuthWorkflowType? = nil) throws -> PhonePeSandboxMandate {
        try #require(sandbox.handleAuthInit(try signed(order).request, authWorkflowType: workflow).mandate)
    }

    @Test func acceptsTheSignersRequestAndAnswersLikeTheSeed() throws {
        let built = try signed(PhonePeFixtures.orderWith(["merchantCallBackScheme": "iOSIntentIntegration"]))
        let reply = sandbox.handleAuthInit(built.request, authWorkflowType: .transaction)
        #expect(reply.response.status == 200)
        let mandate = try #require(reply.mandate)
        #expect(mandate.amount == 39900)
        #expect(mandate.authRequestId == built.authRequestId)
        #expect(mandate.callbackURL == "https://merchant.example/callbacks/phonepe")
        #expect(mandate.merchantCallBackScheme == "iOSIntentIntegration")

        guard case .pending(let result) = PhonePeAuthInit.classify(reply.response, authRequestId: built.authRequestId) else {
            Issue.record("the sandbox's success must classify as pending")
            return
        }
        let url = try #require(result["redirectURL"]?.stringValue)
        #expect(url.hasPrefix("ppe://mandate?pn=MERCHANTUAT&pa=merchantuat@ybl&tid=YBL"))
        #expect(url.contains("&am=399.00&mam=399.00&cu=INR&"))
        #expect(url.contains("&tn=Payment%20for%20\(built.authRequestId)&"))
        #expect(url.hasSuffix("&utm_campaign=SUBSCRIBE_AUTH"))
    }

    @Test func enforcesTheAmountRulePerWorkflow() throws {
        let transaction = try signed(PhonePeFixtures.order()).request
        let pennyDrop = try signed(PhonePeFixtures.orderWith(["authWorkflowType": "PENNY_DROP"], amount: nil, currency: nil)).request
        #expect(sandbox.handleAuthInit(pennyDrop, authWorkflowType: .pennyDrop).response.status == 200)
        #expect(sandbox.handleAuthInit(pennyDrop).mandate?.amount == nil)
        #expect(sandbox.handleAuthInit(transaction, authWorkflowType: .pennyDrop).response.status == 400)
        #expect(sandbox.handleAuthInit(pennyDrop, authWorkflowType: .transaction).response.status == 400)
        #expect(sandbox.handleAuthInit(pennyDrop, authWorkflowType: .transaction).mandate == nil)
    }

    @Test func refusesForgedOrBrokenRequests() throws {
        let good = try signed(PhonePeFixtures.order()).request

        var badChecksum = good
        badChecksum.headers = good.headers.map { $0.name == "X-VERIFY" ? HTTPHeader("X-VERIFY", "0" + $0.value.dropFirst()) : $0 }
        #expect(sandbox.handleAuthInit(badChecksum).response.status == 401)

        // Payload swapped for one with a bigger amount, checksum left as it was.
        var tampered = good
        var payload = try #require(PhonePeFixtures.decodedPayload(good))
        payload["amount"] = 1
        tampered.body = Array("{\"request\":\"\(Data(JSONValue.object(payload).serialized.utf8).base64EncodedString())\"}".utf8)
        #expect(sandbox.handleAuthInit(tampered).response.status == 401)

        var noCallback = good
        noCallback.headers.removeAll { $0.name == "X-CALLBACK-URL" }
        #expect(sandbox.handleAuthInit(noCallback).response.status == 400)

        // PhonePe's auth/init request table: deviceContext.merchantCallBackScheme is mandatory;
        // correctly signed without it, still refused.
        var withoutScheme = try #require(PhonePeFixtures.decodedPayload(good))
        withoutScheme["deviceContext"] = ["deviceOS": "IOS"]
        let schemelessBase64 = Data(JSONValue.object(withoutScheme).serialized.utf8).base64EncodedString()
        var schemeless = good
        schemeless.body = Array("{\"request\":\"\(schemelessBase64)\"}".utf8)
        schemeless.headers = good.headers.map {
            $0.name == "X-VERIFY"
                ? HTTPHeader("X-VERIFY", PhonePeChecksum(config: config).xVerify(payloadBase64: schemelessBase64, apiPath: PhonePeRules.authInitPath))
                : $0
        }
        let refusedSchemeless = sandbox.handleAuthInit(schemeless).response
        #expect(refusedSchemeless.status == 400)
        #expect(String(decoding: refusedSchemeless.body, as: UTF8.self).contains("merchantCallBackScheme"))

        var wrongPath = good
        wrongPath.url = "http://127.0.0.1:9103/v3/recurring/auth/initx"
        #expect(sandbox.handleAuthInit(wrongPath).response.status == 404)

        let otherMerchant = try PhonePeAuthInit(order: PhonePeFixtures.order(), config: PhonePeFixtures.config(merchantId: "OTHERMID")).request
        #expect(sandbox.handleAuthInit(otherMerchant).response.status == 401)

        let wrongIndex = PhonePeSandbox(merchantId: "MERCHANTUAT", saltKey: Secret(PhonePeFixtures.salt), saltIndex: "2")
        #expect(wrongIndex.handleAuthInit(good).response.status == 401)
    }

    @Test func scenariosDriveTheClassificationTable() throws {
        func verdict(_ subscriptionId: String) throws -> (ProviderVerdict, PhonePeSandboxAuthInitReply) {
            let built = try signed(PhonePeFixtures.orderWith(["subscriptionId": .string(subscriptionId)]))
            let reply = sandbox.handleAuthInit(built.request)
            return (PhonePeAuthInit.classify(reply.response, authRequestId: built.authRequestId), reply)
        }
        #expect(try verdict("SBX_NOT_FOUND_1").0.failureCode == "SUBSCRIPTION_NOT_FOUND")
        #expect(try verdict("SBX_EXPIRED_1").0.failureCode == "SUBSCRIPTION_EXPIRED")
        #expect(try verdict("SBX_INVALID_STATE_1").0.failureCode == "INVALID_SUBSCRIPTION_STATE")
        #expect(try verdict("SBX_NOT_FOUND_1").1.mandate == nil)

        let (ise, reply) = try verdict("SBX_ISE_1")
        guard case .unknown = ise else {
            Issue.record("INTERNAL_SERVER_ERROR must be unknown")
            return
        }
        #expect(reply.response.status == 500)
        #expect(reply.mandate?.scheduledOutcome == .completed)
        #expect(try verdict("SBX_DECLINE_1").1.mandate?.scheduledOutcome == .failed)
    }

    @Test func genuineCallbacksPassTheValidator() throws {
        let order = PhonePeFixtures.order()
        let mandate = try mandate(order)
        let checksum = PhonePeChecksum(config: config)

        let completed = sandbox.callback(for: mandate, outcome: .completed)
        #expect(completed.url == config.callbackURL)
        #expect(completed.request.header("X-VERIFY") == completed.xVerify)
        let callback = try PhonePeCallback.authenticate(body: completed.body, xVerify: completed.xVerify, checksum: checksum)
        guard case .verdict(.succeeded) = callback.effect(order: order, merchantId: config.merchantId) else {
            Issue.record("a genuine COMPLETED callback must succeed")
            return
        }

        let failed = sandbox.callback(for: mandate, outcome: .failed)
        let failedCallback = try PhonePeCallback.authenticate(body: failed.body, xVerify: failed.xVerify, checksum: checksum)
        #expect(failedCallback.effect(order: order, merchantId: config.merchantId).verdictCode == "AUTHORIZATION_FAILED")
    }

    @Test func brokenCallbacksAreCaught() throws {
        let order = PhonePeFixtures.order()
        let mandate = try mandate(order)
        let checksum = PhonePeChecksum(config: config)

        let forged = sandbox.callback(for: mandate, outcome: .completed, variant: .wrongChecksum)
        #expect(throws: CallbackRejection.forged("BAD_CHECKSUM", "X-VERIFY does not match the response and the configured salt index")) {
            try PhonePeCallback.authenticate(body: forged.body, xVerify: forged.xVerify, checksum: checksum)
        }

        let wrongAmount = sandbox.callback(for: mandate, outcome: .completed, variant: .wrongAmount)
        let callback = try PhonePeCallback.authenticate(body: wrongAmount.body, xVerify: wrongAmount.xVerify, checksum: checksum)
        #expect(callback.state.transaction?.amount == 39901)
        #expect(callback.effect(order: order, merchantId: config.merchantId).verdictCode == "AMOUNT_MISMATCH")
    }

    @Test func pennyDropCallbackSucceedsWithoutAnAmount() throws {
        let order = PhonePeFixtures.orderWith(["authWorkflowType": "PENNY_DROP"], amount: nil, currency: nil)
        let mandate = try mandate(order, workflow: .pennyDrop)
        let genuine = sandbox.callback(for: mandate, outcome: .completed)
        let callback = try PhonePeCallback.authenticate(body: genuine.body, xVerify: genuine.xVerify, checksum: PhonePeChecksum(config: config))
        #expect(callback.state.transaction == nil)
        guard case .verdict(.succeeded) = callback.effect(order: order, merchantId: config.merchantId) else {
            Issue.record("an ACTIVE PENNY_DROP mandate must succeed")
            return
        }
    }

    @Test func statusCallsResolveUnknowns() throws {
        let order = PhonePeFixtures.orderWith(["subscriptionId": "SBX_ISE_2"])
        let built = try signed(order)
        let mandate = try #require(sandbox.handleAuthInit(built.request).mandate)

        #expect(sandbox.verifyAuthStatus(built.statusRequest) == .valid(authRequestId: built.authRequestId))
        var forged = built.statusRequest
        forged.headers = [HTTPHeader("X-VERIFY", Digest.sha256Hex("x") + "###1")]
        guard case .rejected(let refusal) = sandbox.verifyAuthStatus(forged) else {
            Issue.record("forged status call accepted")
            return
        }
        #expect(refusal.status == 401)
        var otherPath = built.statusRequest
        otherPath.url = "http://127.0.0.1:9103/v3/recurring/auth/status/MERCHANTUAT/../x"
        guard case .rejected = sandbox.verifyAuthStatus(otherPath) else {
            Issue.record("bad path accepted")
            return
        }

        let merchantId = config.merchantId
        #expect(
            PhonePeAuthStatus.classify(sandbox.authStatusResponse(for: mandate, outcome: .pending), order: order, merchantId: merchantId)
                == .pending(["authRequestId": .string(built.authRequestId), "subscriptionState": "CREATED"]))
        guard
            case .succeeded = PhonePeAuthStatus.classify(
                sandbox.authStatusResponse(for: mandate, outcome: .completed), order: order, merchantId: merchantId)
        else {
            Issue.record("completed status must succeed")
            return
        }
        #expect(
            PhonePeAuthStatus.classify(sandbox.authStatusResponse(for: mandate, outcome: .failed), order: order, merchantId: merchantId)
                .failureCode == "AUTHORIZATION_FAILED")
        #expect(
            PhonePeAuthStatus.classify(sandbox.authStatusNotFound(authRequestId: built.authRequestId), order: order, merchantId: merchantId)
                .failureCode == "AUTH_REQUEST_NOT_FOUND")
    }

    @Test func neverPrintsOrReflectsTheSalt() {
        let saltBytes = Array(PhonePeFixtures.salt.utf8).map(String.init).joined(separator: ", ")
        var dumped = ""
        dump(sandbox, to: &dumped)
        for text in ["\(sandbox)", String(reflecting: sandbox), dumped] {
            #expect(!text.contains(PhonePeFixtures.salt))
            #expect(!text.contains(saltBytes))
        }
        #expect(dumped.contains("saltIndex"))
    }

    @Test func formatsRupeesWithoutFloatingPoint() {
        #expect(PhonePeSandbox.rupees(39900) == "399.00")
        #expect(PhonePeSandbox.rupees(5) == "0.05")
        #expect(PhonePeSandbox.rupees(123_456_789_01) == "123456789.01")
    }
}

extension PhonePeCallbackEffect {
    var verdictCode: String? { if case .verdict(let verdict) = self { verdict.failureCode } else { nil } }
}

extension ProviderVerdict {
    var failureCode: String? { if case .failed(let code, _) = self { code.rawValue } else { nil } }
    var isUnknown: Bool { if case .unknown = self { true } else { false } }
}

import Foundation
import PaypipeCore
import Testing
@testable import PhonePe

@Suite struct PhonePeSandboxTests {
    let config = Fixtures.config()
    var sandbox: PhonePeSandbox { PhonePeSandbox(config: config) }

    func signed(_ order: Order) throws -> PhonePeAuthInit { try PhonePeAuthInit(order: order, config: config) }

    func mandate(_ order: Order, workflow: PhonePeAuthWorkflowType? = nil) throws -> PhonePeSandboxMandate {
        try #require(sandbox.handleAuthInit(try signed(order).request, authWorkflowType: workflow).mandate)
    }

    @Test func acceptsTheSignersRequestAndAnswersLikeTheSeed() throws {
        let built = try signed(Fixtures.orderWith(["merchantCallBackScheme": "iOSIntentIntegration"]))
        let reply = sandbox.handleAuthInit(built.request, authWorkflowType: .transaction)
        #expect(reply.response.status == 200)
        let mandate = try #require(reply.mandate)
        #expect(mandate.amount == 39900)
        #expect(mandate.authRequestId == built.authRequestId)
        #expect(mandate.callbackURL == "https://merchant.example/callbacks/phonepe")
        #expect(mandate.merchantCallBackScheme == "iOSIntentIntegration")

        guard case .pending(let result) = PhonePeAuthInit.classify(reply.response, authRequestId: built.authRequestId) else {
            Issue.record("the sandbox's success must classify as pending"); return
        }
        let url = try #require(result["redirectURL"]?.stringValue)
        #expect(url.hasPrefix("ppe://mandate?pn=MERCHANTUAT&pa=merchantuat@ybl&tid=YBL"))
        #expect(url.contains("&am=399.00&mam=399.00&cu=INR&"))
        #expect(url.contains("&tn=Payment%20for%20\(built.authRequestId)&"))
        #expect(url.hasSuffix("&utm_campaign=SUBSCRIBE_AUTH"))
    }

    @Test func enforcesTheAmountRulePerWorkflow() throws {
        let transaction = try signed(Fixtures.order()).request
        let pennyDrop = try signed(Fixtures.orderWith(["authWorkflowType": "PENNY_DROP"], amount: nil, currency: nil)).request
        #expect(sandbox.handleAuthInit(pennyDrop, authWorkflowType: .pennyDrop).response.status == 200)
        #expect(sandbox.handleAuthInit(pennyDrop).mandate?.amount == nil)
        #expect(sandbox.handleAuthInit(transaction, authWorkflowType: .pennyDrop).response.status == 400)
        #expect(sandbox.handleAuthInit(pennyDrop, authWorkflowType: .transaction).response.status == 400)
        #expect(sandbox.handleAuthInit(pennyDrop, authWorkflowType: .transaction).mandate == nil)
    }

    @Test func refusesForgedOrBrokenRequests() throws {
        let good = try signed(Fixtures.order()).request

        var badChecksum = good
        badChecksum.headers = good.headers.map { $0.name == "X-VERIFY" ? HTTPHeader("X-VERIFY", "0" + $0.value.dropFirst()) : $0 }
        #expect(sandbox.handleAuthInit(badChecksum).response.status == 401)

        // Payload swapped for one with a bigger amount, checksum left as it was.
        var tampered = good
        var payload = try #require(Fixtures.decodedPayload(good))
        payload["amount"] = 1
        tampered.body = Array("{\"request\":\"\(Data(JSONValue.object(payload).serialized.utf8).base64EncodedString())\"}".utf8)
        #expect(sandbox.handleAuthInit(tampered).response.status == 401)

        var noCallback = good
        noCallback.headers.removeAll { $0.name == "X-CALLBACK-URL" }
        #expect(sandbox.handleAuthInit(noCallback).response.status == 400)

        var wrongPath = good
        wrongPath.url = "http://127.0.0.1:9103/v3/recurring/auth/initx"
        #expect(sandbox.handleAuthInit(wrongPath).response.status == 404)

        let otherMerchant = try PhonePeAuthInit(order: Fixtures.order(), config: Fixtures.config(merchantId: "OTHERMID")).request
        #expect(sandbox.handleAuthInit(otherMerchant).response.status == 401)

        let wrongIndex = PhonePeSandbox(merchantId: "MERCHANTUAT", checksum: PhonePeChecksum(saltKey: Secret(Fixtures.salt), saltIndex: "2"))
        #expect(wrongIndex.handleAuthInit(good).response.status == 401)
    }

    @Test func scenariosDriveTheClassificationTable() throws {
        func verdict(_ subscriptionId: String) throws -> (ProviderVerdict, PhonePeSandboxAuthInitReply) {
            let built = try signed(Fixtures.orderWith(["subscriptionId": .string(subscriptionId)]))
            let reply = sandbox.handleAuthInit(built.request)
            return (PhonePeAuthInit.classify(reply.response, authRequestId: built.authRequestId), reply)
        }
        #expect(try verdict("SBX_NOT_FOUND_1").0.failureCode == "SUBSCRIPTION_NOT_FOUND")
        #expect(try verdict("SBX_EXPIRED_1").0.failureCode == "SUBSCRIPTION_EXPIRED")
        #expect(try verdict("SBX_INVALID_STATE_1").0.failureCode == "INVALID_SUBSCRIPTION_STATE")
        #expect(try verdict("SBX_NOT_FOUND_1").1.mandate == nil)

        let (ise, reply) = try verdict("SBX_ISE_1")
        guard case .unknown = ise else { Issue.record("INTERNAL_SERVER_ERROR must be unknown"); return }
        #expect(reply.response.status == 500)
        #expect(reply.mandate?.scheduledOutcome == .completed)
        #expect(try verdict("SBX_DECLINE_1").1.mandate?.scheduledOutcome == .failed)
    }

    @Test func genuineCallbacksPassTheValidator() throws {
        let order = Fixtures.order()
        let mandate = try mandate(order)
        let checksum = PhonePeChecksum(config: config)

        let completed = sandbox.callback(for: mandate, outcome: .completed)
        #expect(completed.url == config.callbackURL)
        #expect(completed.request.header("X-VERIFY") == completed.xVerify)
        let callback = try PhonePeCallback.authenticate(body: completed.body, xVerify: completed.xVerify, checksum: checksum)
        guard case .verdict(.succeeded) = callback.effect(order: order, merchantId: config.merchantId) else {
            Issue.record("a genuine COMPLETED callback must succeed"); return
        }

        let failed = sandbox.callback(for: mandate, outcome: .failed)
        let failedCallback = try PhonePeCallback.authenticate(body: failed.body, xVerify: failed.xVerify, checksum: checksum)
        #expect(failedCallback.effect(order: order, merchantId: config.merchantId).verdictCode == "AUTHORIZATION_FAILED")
    }

    @Test func brokenCallbacksAreCaught() throws {
        let order = Fixtures.order()
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
        let order = Fixtures.orderWith(["authWorkflowType": "PENNY_DROP"], amount: nil, currency: nil)
        let mandate = try mandate(order, workflow: .pennyDrop)
        let genuine = sandbox.callback(for: mandate, outcome: .completed)
        let callback = try PhonePeCallback.authenticate(body: genuine.body, xVerify: genuine.xVerify, checksum: PhonePeChecksum(config: config))
        #expect(callback.state.transaction == nil)
        guard case .verdict(.succeeded) = callback.effect(order: order, merchantId: config.merchantId) else {
            Issue.record("an ACTIVE PENNY_DROP mandate must succeed"); return
        }
    }

    @Test func statusCallsResolveUnknowns() throws {
        let order = Fixtures.orderWith(["subscriptionId": "SBX_ISE_2"])
        let built = try signed(order)
        let mandate = try #require(sandbox.handleAuthInit(built.request).mandate)

        #expect(sandbox.verifyAuthStatus(built.statusRequest) == .valid(authRequestId: built.authRequestId))
        var forged = built.statusRequest
        forged.headers = [HTTPHeader("X-VERIFY", Digest.sha256Hex("x") + "###1")]
        guard case .rejected(let refusal) = sandbox.verifyAuthStatus(forged) else { Issue.record("forged status call accepted"); return }
        #expect(refusal.status == 401)
        var otherPath = built.statusRequest
        otherPath.url = "http://127.0.0.1:9103/v3/recurring/auth/status/MERCHANTUAT/../x"
        guard case .rejected = sandbox.verifyAuthStatus(otherPath) else { Issue.record("bad path accepted"); return }

        let merchantId = config.merchantId
        #expect(PhonePeAuthStatus.classify(sandbox.authStatusResponse(for: mandate, outcome: .pending), order: order, merchantId: merchantId)
            == .pending(["authRequestId": .string(built.authRequestId), "subscriptionState": "CREATED"]))
        guard case .succeeded = PhonePeAuthStatus.classify(sandbox.authStatusResponse(for: mandate, outcome: .completed), order: order, merchantId: merchantId) else {
            Issue.record("completed status must succeed"); return
        }
        #expect(PhonePeAuthStatus.classify(sandbox.authStatusResponse(for: mandate, outcome: .failed), order: order, merchantId: merchantId)
            .failureCode == "AUTHORIZATION_FAILED")
        #expect(PhonePeAuthStatus.classify(sandbox.authStatusNotFound(authRequestId: built.authRequestId), order: order, merchantId: merchantId)
            .failureCode == "AUTH_REQUEST_NOT_FOUND")
    }

    @Test func formatsRupeesWithoutFloatingPoint() {
        #expect(PhonePeSandbox.rupees(39900) == "399.00")
        #expect(PhonePeSandbox.rupees(5) == "0.05")
        #expect(PhonePeSandbox.rupees(123_456_789_01) == "123456789.01")
    }
}

import PaypipeCore
import PhonePe
import Testing

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
            let settings = SandboxConfiguration(phonePeCallbackDelayMilliseconds: 400)
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

    @Test func aReplayedAuthRequestIdGetsTheFirstAnswerAndNoSecondMandate() async throws {
        try await Receiver.run { receiver, callbackPort in
            let settings = SandboxConfiguration(phonePeCallbackDelayMilliseconds: 50)
            try await withSandbox(settings, callbackPort: callbackPort) { sandbox in
                let config = try #require(try Fixtures.merchant(sandbox.config).phonepe)
                let authInit = try PhonePeAuthInit(order: Self.order("pp-replay"), config: config)
                let first = try await sandbox.send(authInit.request)
                let second = try await sandbox.send(authInit.request)
                #expect(first.status == 200)
                #expect(first.body == second.body)
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

    @Test func aReplayWithAnotherPayloadStillGetsTheFirstAnswer() async throws {
        try await withSandbox { sandbox in
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
            #expect(secondAnswer.body == firstAnswer.body)
            #expect(sandbox.ledger.effects("phonepe:" + first.authRequestId) == 1)
            // The status reports the first mandate's amount.
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
            let settings = SandboxConfiguration(phonePeCallbackDelayMilliseconds: 0, phonePeCallbackVariant: .wrongChecksum)
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
            let settings = SandboxConfiguration(phonePeCallbackDelayMilliseconds: 0, outboundRetryBaseMilliseconds: 20)
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

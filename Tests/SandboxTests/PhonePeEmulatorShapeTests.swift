import FixtureCorpus
import Foundation
import PaypipeCore
import PhonePe
import PhonePeTesting
import TestSupport
import Testing

@testable import PhonePeEmulation
@testable import Sandbox

/// The PhonePe emulator says only what PhonePe publishes: every answer and callback it makes is
/// compared with the corpus (`Sources/Providers/PhonePe/Fixtures`) member path by member path,
/// and its codes, HTTP statuses and value forms with the fixtures'. A repeated transaction id is
/// refused as PhonePe refuses it, never replayed.
@Suite struct PhonePeEmulatorShapeTests {
    struct ShapeTestError: Error, CustomStringConvertible {
        let description: String
    }

    /// The member paths of `answer` that no published message of `kind` has.
    /// The fixture of `kind` whose envelope carries `code` (a refusal's documented HTTP status).
    static func fixture(kind: String, code: String) -> Fixture? {
        PhonePeCorpus.all.of(kind: kind).first { $0.json?["code"]?.stringValue == code }
    }

    /// The decoded `response` of an S2S callback body `{"response": base64(JSON)}`.
    static func decoded(_ body: [UInt8]) throws -> JSONValue {
        let encoded = try #require(try JSONValue.parse(body)["response"]?.stringValue)
        let bytes = try #require(Data(base64Encoded: encoded))
        return try JSONValue.parse(Array(bytes))
    }

    /// Every callback received so far, decoded, of `callbackType`.
    static func callbacks(_ receiver: Receiver, type: String) throws -> [JSONValue] {
        try receiver.received.withLock { $0 }.map { try decoded($0.body) }.filter { $0["data"]?["callbackType"]?.stringValue == type }
    }

    static func isDigits(_ text: some StringProtocol, count: Int) -> Bool {
        text.count == count && text.allSatisfy { $0.isASCII && $0.isNumber }
    }

    /// `OMN` + 22 digits (Recurring INIT sample `OMN2006110154420123456789`).
    static func isNotificationId(_ text: String?) -> Bool {
        guard let text, text.hasPrefix("OMN") else { return false }
        return isDigits(text.dropFirst(3), count: 22)
    }

    /// `P` + 22 digits (`P1806151323093900554957`).
    static func isProviderReference(_ text: String?) -> Bool {
        guard let text, text.hasPrefix("P") else { return false }
        return isDigits(text.dropFirst(), count: 22)
    }

    static func authOrder(_ orderId: String, subscriptionId: String) -> Order {
        Order(
            orderId: orderId, operation: .authInit, amount: 39900, currency: "INR",
            params: ["merchantUserId": "U123456789", "subscriptionId": .string(subscriptionId), "merchantCallBackScheme": "paypipe"])
    }

    static func notifyOrder(_ transactionId: String, subscriptionId: String) -> Order {
        Order(
            orderId: "notify-" + transactionId, operation: .debitNotify, amount: 39900, currency: "INR",
            params: ["subscriptionId": .string(subscriptionId), "merchantUserId": "U123456789", "transactionId": .string(transactionId)])
    }

    static func executeOrder(_ transactionId: String, subscriptionId: String, notificationId: String) -> Order {
        Order(
            orderId: "execute-" + transactionId, operation: .debitExecute, amount: 39900, currency: "INR",
            params: [
                "subscriptionId": .string(subscriptionId), "merchantUserId": "U123456789", "transactionId": .string(transactionId),
                "notificationId": .string(notificationId),
            ])
    }

    /// The request paypipe's signer makes of `order`, and the status call that resolves it.
    static func signed(_ connector: PhonePeConnector, _ order: Order) throws -> SignedRequest<PhonePeConnector.Context> {
        guard case .request(let signed) = try connector.sign(order, purpose: .submit, nowSeconds: 1_800_000_000) else {
            throw ShapeTestError(description: "\(order.orderId) was not signed into a request")
        }
        return signed
    }

    static func post(_ sandbox: Sandbox, _ path: String, _ body: JSONValue) async throws -> HTTPResponseSpec {
        try await sandbox.send(
            HTTPRequestSpec(
                method: .POST, url: "http://127.0.0.1:\(sandbox.port)\(path)", headers: [HTTPHeader("Content-Type", "application/json")],
                body: body.bytes))
    }

    /// A mandate the sandbox accepted for `subscriptionId` (auth/init through paypipe's signer).
    static func mandate(_ sandbox: Sandbox, subscriptionId: String) async throws {
        let config = try #require(try Fixtures.merchant(sandbox.config).phonepe)
        let authInit = try PhonePeAuthInit(order: authOrder("auth-" + subscriptionId, subscriptionId: subscriptionId), config: config)
        #expect(try await sandbox.send(authInit.request).status == 200)
    }

    // MARK: - auth/init, auth status, AUTH callback (the emulator's pure answers)

    var config: PhonePeConfig { PhonePeFixtures.config() }
    var sandbox: PhonePeSandbox { PhonePeSandbox(config: config) }

    @Test func authInitAnswersInThePublishedShapesWithTheDocumentedStatuses() throws {
        let success = sandbox.handleAuthInit(try PhonePeAuthInit(order: PhonePeFixtures.order(), config: config).request).response
        #expect(success.status == 200)
        let answer = try JSONValue.parse(success.body)
        #expect(
            PhonePeCorpus.all.unpublishedPaths(in: answer, kind: "authInitResponse").isEmpty,
            "\(PhonePeCorpus.all.unpublishedPaths(in: answer, kind: "authInitResponse"))")
        #expect(answer["data"]?["redirectType"] == "INTENT")
        #expect(answer["data"]?["redirectURL"]?.stringValue?.hasPrefix("ppe://mandate?") == true)

        // The scenario refusals: each code with the HTTP status its fixture shows.
        for subscriptionId in ["SBX_NOT_FOUND_1", "SBX_EXPIRED_1", "SBX_INVALID_STATE_1", "SBX_ISE_1"] {
            let order = PhonePeFixtures.orderWith(["subscriptionId": .string(subscriptionId)])
            let refusal = sandbox.handleAuthInit(try PhonePeAuthInit(order: order, config: config).request).response
            let body = try JSONValue.parse(refusal.body)
            #expect(PhonePeCorpus.all.unpublishedPaths(in: body, kind: "authInitResponse").isEmpty)
            let code = try #require(body["code"]?.stringValue)
            let fixture = try #require(Self.fixture(kind: "authInitResponse", code: code), "no fixture shows \(code)")
            #expect(refusal.status == fixture.status, "\(code)")
            #expect(body["success"] == .bool(false))
        }

        // A wrong checksum: AUTHORIZATION_FAILED with the fixture's 401.
        var forged = try PhonePeAuthInit(order: PhonePeFixtures.order(), config: config).request
        forged.headers = forged.headers.map { $0.name == "X-VERIFY" ? HTTPHeader("X-VERIFY", "0" + $0.value.dropFirst()) : $0 }
        let refused = sandbox.handleAuthInit(forged).response
        #expect(refused.status == Self.fixture(kind: "authInitResponse", code: "AUTHORIZATION_FAILED")?.status)
        #expect(PhonePeCorpus.all.unpublishedPaths(in: try JSONValue.parse(refused.body), kind: "authInitResponse").isEmpty)
    }

    @Test func authStatusAndAuthCallbacksAnswerInThePublishedShapes() throws {
        let order = PhonePeFixtures.order()
        let built = try PhonePeAuthInit(order: order, config: config)
        let mandate = try #require(sandbox.handleAuthInit(built.request).mandate)
        for outcome in PhonePeSandboxAuthOutcome.allCases {
            let status = try JSONValue.parse(sandbox.authStatusResponse(for: mandate, outcome: outcome).body)
            #expect(
                PhonePeCorpus.all.unpublishedPaths(in: status, kind: "authStatusResponse").isEmpty,
                "\(outcome): \(PhonePeCorpus.all.unpublishedPaths(in: status, kind: "authStatusResponse"))")
            if outcome == .completed {
                let mode = try #require(status["data"]?["transactionDetails"]?["paymentModes"]?.arrayValue?.first)
                #expect(Self.isDigits(try #require(mode["utr"]?.stringValue), count: 12))
                #expect(mode["maskedAccountNumber"]?.stringValue?.hasPrefix("XXXXXX") == true)
                #expect(mode["umn"]?.stringValue?.hasSuffix("@ybl") == true)
                #expect(Self.isProviderReference(status["data"]?["transactionDetails"]?["providerReferenceId"]?.stringValue))
            }
            guard outcome != .pending else { continue }
            let callback = try Self.decoded(sandbox.callback(for: mandate, outcome: outcome).body)
            #expect(
                PhonePeCorpus.all.unpublishedPaths(in: callback, kind: "authCallback").isEmpty,
                "\(outcome): \(PhonePeCorpus.all.unpublishedPaths(in: callback, kind: "authCallback"))")
        }
        let notFound = sandbox.authStatusNotFound(authRequestId: built.authRequestId)
        #expect(notFound.status == 404)
        let body = try JSONValue.parse(notFound.body)
        #expect(body["code"] == "TRANSACTION_NOT_FOUND" && body["success"] == .bool(false))
        #expect(PhonePeCorpus.all.unpublishedPaths(in: body, kind: "authStatusResponse").isEmpty)
    }

    // MARK: - A repeated auth/init, through the sandbox

    /// The duplicate refusal is the fixture's, word for word and status for status; what paypipe
    /// makes of it is a failed auth/init, and the status call by the same authRequestId still
    /// tells what became of the first request (how a redelivered auth/init is resolved).
    @Test func aRepeatedAuthInitIsRefusedAsPhonePeRefusesItAndTheStatusCallStillResolvesTheFirst() async throws {
        try await withSandbox(SandboxConfiguration().with { $0.phonePe.callbackDelayMilliseconds = 0 }) { sandbox in
            let config = try #require(try Fixtures.merchant(sandbox.config).phonepe)
            let order = Self.authOrder("pp-dup-1", subscriptionId: "SUB-dup-1")
            let authInit = try PhonePeAuthInit(order: order, config: config)
            #expect(try await sandbox.send(authInit.request).status == 200)
            let again = try await sandbox.send(authInit.request)
            let fixture = PhonePeCorpus.all.named("authinitresponse--invalid-transaction-id-duplicate")
            #expect(again.status == fixture.status)
            let body = try JSONValue.parse(again.body)
            #expect(body == fixture.json)
            #expect(PhonePeCorpus.all.unpublishedPaths(in: body, kind: "authInitResponse").isEmpty)
            // The refusal is read as "ask the status call", never as a decline.
            #expect(PhonePeAuthInit.classify(again, authRequestId: authInit.authRequestId).isUnknown)
            #expect(sandbox.ledger.requests("phonepe:" + authInit.authRequestId) == 2)
            let status = try await sandbox.send(authInit.statusRequest)
            #expect(PhonePeAuthStatus.classify(status, order: order, merchantId: config.merchantId).kind == "succeeded")
        }
    }

    // MARK: - Debits: Recurring INIT, Debit Execute, Debit Execute Status, NOTIFY and DEBIT callbacks

    @Test func aDebitIsNotifiedAndExecutedInThePublishedShapesAndNeitherIsTakenTwice() async throws {
        try await Receiver.run { receiver, callbackPort in
            try await withSandbox(SandboxConfiguration().with { $0.phonePe.callbackDelayMilliseconds = 0 }, callbackPort: callbackPort) { sandbox in
                let connector = await PhonePeConnector(config: sandbox.config)
                try await Self.mandate(sandbox, subscriptionId: "SUB-debit-1")

                // Recurring INIT: the sample's shape, ACCEPTED, an OMN… notificationId, epoch-ms numbers.
                let notifyOrder = Self.notifyOrder("TXDEBIT1", subscriptionId: "SUB-debit-1")
                let notify = try Self.signed(connector, notifyOrder)
                let notified = try await sandbox.send(notify.request)
                #expect(notified.status == 200)
                let initAnswer = try JSONValue.parse(notified.body)
                #expect(
                    PhonePeCorpus.all.unpublishedPaths(in: initAnswer, kind: "debitInitResponse").isEmpty,
                    "\(PhonePeCorpus.all.unpublishedPaths(in: initAnswer, kind: "debitInitResponse"))")
                #expect(initAnswer["message"] == "Your request has been successfully submitted.")
                #expect(initAnswer["data"]?["state"] == "ACCEPTED")
                #expect(initAnswer["data"]?["amount"] == .integer(39900))
                let notificationId = try #require(initAnswer["data"]?["notificationId"]?.stringValue)
                #expect(Self.isNotificationId(notificationId))
                for key in ["notifiedAt", "validAfter", "validUpto"] { #expect(initAnswer["data"]?[key]?.integerValue != nil, "\(key)") }
                let notifyDebit = try PhonePeDebit(order: notifyOrder)
                #expect(notifyDebit.classify(notified).result?["notificationId"] == .string(notificationId))

                // The same transactionId again: PhonePe's duplicate refusal, nothing notified twice.
                let repeated = try await sandbox.send(notify.request)
                #expect(repeated.status == 400)
                #expect(try JSONValue.parse(repeated.body) == PhonePeCorpus.all.named("authinitresponse--invalid-transaction-id-duplicate").json)
                // The refusal is read as "ask the status call", never as a decline.
                #expect(notifyDebit.classify(repeated).isUnknown)
                #expect(try Self.callbacks(receiver, type: "NOTIFY").count == 1)
                let notifyCallback = try #require(try Self.callbacks(receiver, type: "NOTIFY").first)
                #expect(
                    PhonePeCorpus.all.unpublishedPaths(in: notifyCallback, kind: "notifyCallback").isEmpty,
                    "\(PhonePeCorpus.all.unpublishedPaths(in: notifyCallback, kind: "notifyCallback"))")

                // A redelivered notification is resolved by the status call: notified, not sent again.
                let notifiedStatus = try await sandbox.send(try #require(notify.resolve))
                let statusAnswer = try JSONValue.parse(notifiedStatus.body)
                #expect(PhonePeCorpus.all.unpublishedPaths(in: statusAnswer, kind: "debitStatusResponse").isEmpty)
                #expect(statusAnswer["data"]?["notificationDetails"]?["validAfter"]?.stringValue != nil, "the status page's epoch strings")
                #expect(notifyDebit.classifyStatus(notifiedStatus, beforeResubmit: true).result?["notificationId"] == .string(notificationId))

                // A day on, the debit: the execute sample's shape, PENDING.
                #expect(try await Self.post(sandbox, "/_sandbox/clock", ["advanceMs": 90_000_000]).status == 200)
                let executeOrder = Self.executeOrder("TXDEBIT1", subscriptionId: "SUB-debit-1", notificationId: notificationId)
                let execute = try Self.signed(connector, executeOrder)
                let executed = try await sandbox.send(execute.request)
                #expect(executed.status == 200)
                let executeAnswer = try JSONValue.parse(executed.body)
                #expect(PhonePeCorpus.all.unpublishedPaths(in: executeAnswer, kind: "debitExecuteResponse").isEmpty)
                #expect(executeAnswer["message"] == "Your request has been successfully submitted.")
                #expect(executeAnswer["data"]?["state"] == "PENDING")
                let executeDebit = try PhonePeDebit(order: executeOrder)
                #expect(executeDebit.classify(executed).kind == "pending")

                // Executed again: refused as a duplicate; one debit, one DEBIT callback.
                let twice = try await sandbox.send(execute.request)
                #expect(twice.status == 400)
                #expect(try JSONValue.parse(twice.body)["code"] == "INVALID_TRANSACTION_ID")
                // The refusal is read as "ask the status call", never as a decline.
                #expect(executeDebit.classify(twice).isUnknown)
                #expect(sandbox.ledger.requests("phonepe:debit:TXDEBIT1") == 2)
                #expect(sandbox.ledger.effects("phonepe:debit:TXDEBIT1") == 1)
                let debitCallbacks = try Self.callbacks(receiver, type: "DEBIT")
                #expect(debitCallbacks.count == 1)
                let debitCallback = try #require(debitCallbacks.first)
                #expect(
                    PhonePeCorpus.all.unpublishedPaths(in: debitCallback, kind: "debitCallback").isEmpty,
                    "\(PhonePeCorpus.all.unpublishedPaths(in: debitCallback, kind: "debitCallback"))")
                #expect(debitCallback["message"] == "Your payment is successful.")
                let transaction = try #require(debitCallback["data"]?["transactionDetails"])
                #expect(Self.isProviderReference(transaction["providerReferenceId"]?.stringValue))
                #expect(Self.isDigits(try #require(transaction["paymentModes"]?.arrayValue?.first?["utr"]?.stringValue), count: 12))

                // The DEBIT callback is authentic to paypipe and reads as the renewal it is.
                let received = try #require(
                    receiver.received.withLock { list in
                        list.first { (try? Self.decoded($0.body))?["data"]?["callbackType"] == "DEBIT" }
                    })
                let authentic = try PhonePeCallback.authenticate(
                    body: received.body, xVerify: received.header("X-VERIFY"),
                    checksum: PhonePeChecksum(config: try #require(try Fixtures.merchant(sandbox.config).phonepe)))
                #expect(try authentic.subscriptionEvent(merchant: "default")?.kind == .renewalSucceeded)

                // A redelivered execute is resolved by the status call: the debit is there, so it
                // is read, never sent again.
                let debitStatus = try await sandbox.send(try #require(execute.resolve))
                let debitStatusAnswer = try JSONValue.parse(debitStatus.body)
                #expect(
                    PhonePeCorpus.all.unpublishedPaths(in: debitStatusAnswer, kind: "debitStatusResponse").isEmpty,
                    "\(PhonePeCorpus.all.unpublishedPaths(in: debitStatusAnswer, kind: "debitStatusResponse"))")
                #expect(debitStatusAnswer["message"] == "Your payment is successful.")
                #expect(executeDebit.classifyStatus(debitStatus, beforeResubmit: true).kind == "succeeded")

                // A transactionId PhonePe never saw: 404 TRANSACTION_NOT_FOUND, as for auth status;
                // before a resubmit that means "never seen".
                let unknown = try Self.signed(connector, Self.notifyOrder("TXNEVERSENT", subscriptionId: "SUB-debit-1"))
                let notFound = try await sandbox.send(try #require(unknown.resolve))
                #expect(notFound.status == 404)
                #expect(PhonePeCorpus.all.unpublishedPaths(in: try JSONValue.parse(notFound.body), kind: "debitStatusResponse").isEmpty)
                #expect(
                    try PhonePeDebit(order: Self.notifyOrder("TXNEVERSENT", subscriptionId: "SUB-debit-1")).classifyStatus(
                        notFound, beforeResubmit: true
                    ).kind == "neverSeen")
            }
        }
    }

    /// Refusals on the debit endpoints use PhonePe's documented codes only.
    @Test func debitRefusalsUseDocumentedCodes() async throws {
        try await withSandbox(SandboxConfiguration().with { $0.phonePe.callbackDelayMilliseconds = 3_600_000 }) { sandbox in
            let connector = await PhonePeConnector(config: sandbox.config)
            try await Self.mandate(sandbox, subscriptionId: "SUB-refuse-1")
            let documented: Set<String> = ["BAD_REQUEST", "AUTHORIZATION_FAILED", "INVALID_TRANSACTION_ID", "SUBSCRIPTION_NOT_FOUND"]

            // Above the mandate's amount.
            var tooMuch = Self.notifyOrder("TXREFUSE1", subscriptionId: "SUB-refuse-1")
            tooMuch.amount = 39901
            let refusedAmount = try await sandbox.send(try Self.signed(connector, tooMuch).request)
            #expect(refusedAmount.status == 400)
            #expect(try JSONValue.parse(refusedAmount.body)["code"] == "BAD_REQUEST")

            // No such mandate.
            let noMandate = try await sandbox.send(try Self.signed(connector, Self.notifyOrder("TXREFUSE2", subscriptionId: "SUB-none")).request)
            #expect(try JSONValue.parse(noMandate.body)["code"] == "SUBSCRIPTION_NOT_FOUND")

            // Notified, then executed before validAfter, and with another notificationId.
            let notify = try await sandbox.send(try Self.signed(connector, Self.notifyOrder("TXREFUSE3", subscriptionId: "SUB-refuse-1")).request)
            let notificationId = try #require(try JSONValue.parse(notify.body)["data"]?["notificationId"]?.stringValue)
            let early = try await sandbox.send(
                try Self.signed(connector, Self.executeOrder("TXREFUSE3", subscriptionId: "SUB-refuse-1", notificationId: notificationId)).request)
            let wrong = try await sandbox.send(
                try Self.signed(
                    connector, Self.executeOrder("TXREFUSE3", subscriptionId: "SUB-refuse-1", notificationId: "OMN0000000000000000000000")
                ).request)
            for refusal in [refusedAmount, noMandate, early, wrong] {
                let body = try JSONValue.parse(refusal.body)
                #expect(documented.contains(body["code"]?.stringValue ?? ""), "\(body)")
                #expect(PhonePeCorpus.all.unpublishedPaths(in: body, kind: "debitInitResponse").isEmpty)
                #expect(refusal.status == 400)
            }
        }
    }

    /// A paused mandate is refused every notification and debit, each still counted, none
    /// taken, until it is unpaused.
    @Test func aPausedMandateIsRefusedEveryNotificationAndDebitUntilUnpaused() async throws {
        // A receiver takes the SUBSCRIPTION callbacks, so that no action waits on a delivery's retries.
        try await Receiver.run { _, callbackPort in
            try await withSandbox(SandboxConfiguration().with { $0.phonePe.callbackDelayMilliseconds = 3_600_000 }, callbackPort: callbackPort) {
                sandbox in
                let connector = await PhonePeConnector(config: sandbox.config)
                try await Self.mandate(sandbox, subscriptionId: "SUB-pause-1")
                let subscription: JSONValue = ["subscription": "SUB-pause-1"]
                #expect(try await Self.post(sandbox, "/_sandbox/subscriptions/phonepe/pause", subscription).status == 200)
                let order = Self.notifyOrder("TXPAUSE1", subscriptionId: "SUB-pause-1")
                let refused = try await sandbox.send(try Self.signed(connector, order).request)
                let body = try JSONValue.parse(refused.body)
                #expect(refused.status == Self.fixture(kind: "authInitResponse", code: "INVALID_SUBSCRIPTION_STATE")?.status)
                #expect(body["code"] == "INVALID_SUBSCRIPTION_STATE" && body["success"] == .bool(false))
                #expect(PhonePeCorpus.all.unpublishedPaths(in: body, kind: "debitInitResponse").isEmpty)
                #expect(try await Self.post(sandbox, "/_sandbox/subscriptions/phonepe/debit", subscription).status == 400)
                #expect(sandbox.ledger.requests("phonepe:notify:TXPAUSE1") == 1)
                let status = try await sandbox.send(try #require(try Self.signed(connector, order).resolve))
                #expect(try JSONValue.parse(status.body)["code"] == "TRANSACTION_NOT_FOUND", "nothing was notified")

                #expect(try await Self.post(sandbox, "/_sandbox/subscriptions/phonepe/unpause", subscription).status == 200)
                let accepted = try await sandbox.send(try Self.signed(connector, Self.notifyOrder("TXPAUSE2", subscriptionId: "SUB-pause-1")).request)
                #expect(try JSONValue.parse(accepted.body)["data"]?["state"] == "ACCEPTED")
            }
        }
    }

    /// `holdNext`: the held notification is unknown to the status call until its copy arrives
    /// behind it; then it is taken, and the copy is refused as a used transactionId.
    @Test func aHeldNotificationReachesPhonePeBeforeItsCopyWhichIsRefusedAsADuplicate() async throws {
        try await withSandbox(SandboxConfiguration().with { $0.phonePe.callbackDelayMilliseconds = 3_600_000 }) { sandbox in
            let connector = await PhonePeConnector(config: sandbox.config)
            try await Self.mandate(sandbox, subscriptionId: "SUB-hold-1")
            #expect(
                try await Self.post(sandbox, "/_sandbox/subscriptions/phonepe/holdNext", ["subscription": "SUB-hold-1", "request": "notify"]).status
                    == 200)
            let signed = try Self.signed(connector, Self.notifyOrder("TXHOLD1", subscriptionId: "SUB-hold-1"))
            let held = Task { try await sandbox.send(signed.request) }
            #expect(await eventually(within: .seconds(10)) { sandbox.ledger.requests("phonepe:notify:TXHOLD1") == 1 })
            let unknown = try await sandbox.send(try #require(signed.resolve))
            #expect(try JSONValue.parse(unknown.body)["code"] == "TRANSACTION_NOT_FOUND")

            let copy = try await sandbox.send(signed.request)
            #expect(try JSONValue.parse(copy.body)["code"] == "INVALID_TRANSACTION_ID")
            #expect(try JSONValue.parse(try await held.value.body)["data"]?["state"] == "ACCEPTED")
            #expect(sandbox.ledger.requests("phonepe:notify:TXHOLD1") == 2)
            let known = try await sandbox.send(try #require(signed.resolve))
            #expect(try JSONValue.parse(known.body)["data"]?["notificationDetails"]?["state"] == "NOTIFIED")
        }
    }

    /// `failNextNotify`: the INIT answer's documented FAILED state, and a NOTIFY saying so.
    @Test func aFailedNotificationIsAnsweredWithTheDocumentedFailedState() async throws {
        try await Receiver.run { receiver, callbackPort in
            try await withSandbox(SandboxConfiguration().with { $0.phonePe.callbackDelayMilliseconds = 0 }, callbackPort: callbackPort) { sandbox in
                let connector = await PhonePeConnector(config: sandbox.config)
                try await Self.mandate(sandbox, subscriptionId: "SUB-fail-1")
                #expect(try await Self.post(sandbox, "/_sandbox/subscriptions/phonepe/failNextNotify", ["subscription": "SUB-fail-1"]).status == 200)
                let order = Self.notifyOrder("TXFAIL1", subscriptionId: "SUB-fail-1")
                let answer = try await sandbox.send(try Self.signed(connector, order).request)
                let body = try JSONValue.parse(answer.body)
                #expect(PhonePeCorpus.all.unpublishedPaths(in: body, kind: "debitInitResponse").isEmpty)
                #expect(body["data"]?["state"] == "FAILED")
                #expect(try PhonePeDebit(order: order).classify(answer).failureCode == "NOTIFY_FAILED")
                let notify = try #require(try Self.callbacks(receiver, type: "NOTIFY").first)
                #expect(notify["data"]?["notificationDetails"]?["state"] == "FAILED")
                #expect(PhonePeCorpus.all.unpublishedPaths(in: notify, kind: "notifyCallback").isEmpty)
            }
        }
    }

    // MARK: - The sandbox's own actions: debits outside paypipe and SUBSCRIPTION callbacks

    @Test func subscriptionActionsSendThePublishedCallbackShapes() async throws {
        try await Receiver.run { receiver, callbackPort in
            try await withSandbox(SandboxConfiguration().with { $0.phonePe.callbackDelayMilliseconds = 3_600_000 }, callbackPort: callbackPort) {
                sandbox in
                try await Self.mandate(sandbox, subscriptionId: "SUB-act-1")
                let subscription: JSONValue = ["subscription": "SUB-act-1"]
                #expect(try await Self.post(sandbox, "/_sandbox/subscriptions/phonepe/debit", subscription).status == 200)
                #expect(
                    try await Self.post(sandbox, "/_sandbox/subscriptions/phonepe/debit", ["subscription": "SUB-act-1", "decline": true]).status
                        == 200)
                for action in ["pause", "unpause", "suspend", "expire", "cancel", "revoke"] {
                    #expect(try await Self.post(sandbox, "/_sandbox/subscriptions/phonepe/" + action, subscription).status == 200, "\(action)")
                }
                for notify in try Self.callbacks(receiver, type: "NOTIFY") {
                    #expect(PhonePeCorpus.all.unpublishedPaths(in: notify, kind: "notifyCallback").isEmpty)
                    #expect(Self.isNotificationId(notify["data"]?["notificationDetails"]?["notificationId"]?.stringValue))
                }
                let debits = try Self.callbacks(receiver, type: "DEBIT")
                #expect(debits.count == 2)
                for debit in debits {
                    #expect(
                        PhonePeCorpus.all.unpublishedPaths(in: debit, kind: "debitCallback").isEmpty,
                        "\(PhonePeCorpus.all.unpublishedPaths(in: debit, kind: "debitCallback"))")
                }
                #expect(debits.map { $0["message"]?.stringValue ?? "" } == ["Your payment is successful.", "Payment Failed"])
                #expect(debits.last?["data"]?["transactionDetails"]?["payResponseCodeDescription"] == "Bank did not authorise")

                let states = try Self.callbacks(receiver, type: "SUBSCRIPTION")
                #expect(
                    states.compactMap { $0["data"]?["subscriptionDetails"]?["state"]?.stringValue } == [
                        "PAUSED", "ACTIVE", "SUSPENDED", "EXPIRED", "CANCELLED", "REVOKED",
                    ])
                for state in states {
                    #expect(
                        PhonePeCorpus.all.unpublishedPaths(in: state, kind: "subscriptionCallback").isEmpty,
                        "\(PhonePeCorpus.all.unpublishedPaths(in: state, kind: "subscriptionCallback"))")
                }
                let revoked = try #require(states.last)
                #expect(revoked["message"] == "Your subscription is revoked.")
                #expect(revoked["data"]?["subscriptionDetails"]?.objectValue?.keys.contains("stateStartDate") == false, "the revoke sample has none")
                #expect(states.first?["message"] == "Your subscription is paused.")
            }
        }
    }
}

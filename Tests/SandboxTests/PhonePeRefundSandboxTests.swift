import AsyncHTTPClient
import Foundation
import PaypipeCore
import PhonePe
import PhonePeTesting
import Testing

@testable import PhonePeEmulation
@testable import Sandbox

/// The emulator's backToSource, read with its own rules: a completed debit, never more than it
/// took, a transactionId once, PENDING until the sandbox's clock has moved past the delay.
@Suite struct PhonePeRefundSandboxTests {
    static let config = PhonePeFixtures.config()

    /// An emulator whose merchant has a completed debit `TX-DEBIT-1` of 39900 paise.
    static func emulator() -> PhonePeEmulator {
        let emulator = PhonePeEmulator(merchants: [("default", config)])
        emulator.debits.withLock {
            var debit = PhonePeEmulator.Debit(
                merchantId: "MERCHANTUAT", subscriptionId: "SUB-1", amount: 39900, notificationId: "OMN1", notifiedAt: 0)
            debit.executed = ("COMPLETED", 0)
            $0.records[PhonePeEmulator.recordKey(merchantId: "MERCHANTUAT", authRequestId: "TX-DEBIT-1")] = debit
        }
        return emulator
    }

    static func context(delayMilliseconds: Int) -> SandboxContext {
        var configuration = SandboxConfiguration(port: 0)
        configuration.phonePe.callbackDelayMilliseconds = delayMilliseconds
        return SandboxContext(
            configuration: configuration, ledger: SandboxLedger(keyLimit: 100), scheduler: SandboxScheduler(),
            outbound: SandboxOutbound(client: .shared, attempts: 1, retryBaseMilliseconds: 1, logger: Fixtures.quiet), logger: Fixtures.quiet)
    }

    static func refund(_ orderId: String, amount: Int64, original: String = "TX-DEBIT-1") throws -> (PhonePeRefund, HTTPRequestSpec, HTTPRequestSpec)
    {
        let order = Order(
            orderId: orderId, operation: .phonePeRefund, amount: amount, currency: "INR",
            params: ["refundOf": "debit-order", "originalTransactionId": .string(original)])
        let refund = try PhonePeRefund(order: order)
        let (request, status) = try refund.requests(merchant: PhonePeMerchant(config: config))
        func local(_ spec: HTTPRequestSpec) -> HTTPRequestSpec {
            HTTPRequestSpec(method: spec.method, url: PhonePeSandbox.path(of: spec.url), headers: spec.headers, body: spec.body)
        }
        return (refund, local(request), local(status))
    }

    @Test func aRefundIsPendingThenCompletedAndNeverPastTheDebit() async throws {
        let emulator = Self.emulator(), context = Self.context(delayMilliseconds: 0)
        let (refund, request, status) = try Self.refund("rf-1", amount: 30000)
        let first = await emulator.handle(request, context: context)
        #expect(refund.classify(first).kind == "pending")
        let read = await emulator.handle(status, context: context)
        #expect(refund.classifyStatus(read, beforeResubmit: false, finalCheck: false).kind == "succeeded")
        #expect(context.ledger.effects("phonepe:refund:" + refund.transactionId) == 1)

        let (tooMuch, tooMuchRequest, _) = try Self.refund("rf-2", amount: 9901)
        #expect(tooMuch.classify(await emulator.handle(tooMuchRequest, context: context)).kind == "failed:EXCESS_REFUND_AMOUNT")
        let (rest, restRequest, _) = try Self.refund("rf-3", amount: 9900)
        #expect(rest.classify(await emulator.handle(restRequest, context: context)).kind == "pending")
        let (unknown, unknownRequest, unknownStatus) = try Self.refund("rf-4", amount: 100, original: "TX-NONE")
        #expect(unknown.classify(await emulator.handle(unknownRequest, context: context)).kind == "failed:TRANSACTION_NOT_FOUND")
        let never = await emulator.handle(unknownStatus, context: context)
        #expect(unknown.classifyStatus(never, beforeResubmit: true, finalCheck: false).kind == "neverSeen")
        #expect(emulator.refundRequests().map(\.code) == ["PAYMENT_PENDING", "EXCESS_REFUND_AMOUNT", "PAYMENT_PENDING", "TRANSACTION_NOT_FOUND"])
    }

    /// PhonePe refuses a transactionId it has seen; the refusal is recorded, nothing is
    /// refunded twice, and the status call still tells what the first request did.
    @Test func aRefundSentTwiceIsRefusedAsADuplicateAndResolvedByStatus() async throws {
        let emulator = Self.emulator(), context = Self.context(delayMilliseconds: 60_000)
        let (refund, request, status) = try Self.refund("rf-twice", amount: 500)
        #expect(refund.classify(await emulator.handle(request, context: context)).kind == "pending")
        #expect(refund.classify(await emulator.handle(request, context: context)).kind == "unknown")
        #expect(emulator.refundRequests().count == 2)
        #expect(emulator.refundRequests().last?.code == "INVALID_TRANSACTION_ID")
        #expect(emulator.ledgerKey(request) == .now("refund:" + refund.transactionId))
        let read = await emulator.handle(status, context: context)
        #expect(refund.classifyStatus(read, beforeResubmit: true, finalCheck: false).kind == "pending")
        #expect(refund.classifyStatus(read, beforeResubmit: false, finalCheck: true).kind == "unknown")
    }

    @Test func aForgedChecksumIsRefused() async throws {
        let emulator = Self.emulator(), context = Self.context(delayMilliseconds: 0)
        var (refund, request, _) = try Self.refund("rf-forged", amount: 500)
        request.headers = request.headers.map { $0.name == "X-VERIFY" ? HTTPHeader("X-VERIFY", String(repeating: "0", count: 64) + "###1") : $0 }
        #expect(refund.classify(await emulator.handle(request, context: context)).kind == "failed:AUTHORIZATION_FAILED")
    }
}

import PaypipeCore
import Testing
import Viva
import VivaTesting

@testable import Sandbox
@testable import VivaEmulation

/// A Viva refund from the connector's signed token request to the emulator's DELETE, and the
/// emulator's own rules: a completed sale, never past its amount, a request twice refunds twice.
@Suite struct VivaRefundSandboxTests {
    static let api = VivaSandboxAPITests.api
    static let config = VivaSandboxAPITests.config

    static func refundOrder(_ orderId: String, amount: Int64, transactionId: String) -> Order {
        Order(
            orderId: orderId, operation: .vivaRefund, amount: amount, currency: "EUR",
            params: ["refundOf": "ord-viva-1", "transactionId": .string(transactionId)])
    }

    /// Runs the refund as the submitter would: the signed token request, then what `read` asks next.
    static func run(_ order: Order, connector: VivaConnector, emulation: VivaEmulator) throws -> ProviderVerdict {
        guard case .request(let signed) = try connector.sign(order, purpose: .submit, nowSeconds: 0) else {
            Issue.record("a refund is an HTTP request")
            return .unknown(reason: "not a request")
        }
        let exchange = Exchange(order: order, signed: signed, purpose: .submit, phase: .submitting)
        var current = signed.request
        for _ in 0..<3 {
            switch connector.read(emulation.handle(VivaSandboxAPITests.relative(current)), to: current, in: exchange) {
            case .verdict(let verdict): return verdict
            case .followUp(let next): current = next
            }
        }
        return .unknown(reason: "no verdict")
    }

    @Test func refundsFollowTheTokenAndStopAtTheSaleAmount() async throws {
        let emulation = VivaEmulator(merchants: [("default", Self.config)])
        let connector = await VivaConnector(config: PaypipeConfig(merchants: ["default": MerchantConfig(Self.config)]))
        let sale = try VivaSandbox.readSale(
            try VivaSale.url(order: VivaFixtures.saleOrder(amount: 1050, ["clientTransactionId": "ref-1"]), config: Self.config))
        #expect(emulation.handle(HTTPRequestSpec(method: .POST, url: "/sale", body: (["uri": .string(sale.url)] as JSONValue).bytes)).status == 200)
        let saleId = try #require(VivaSandbox.approved(sale).transactionId)

        let first = try Self.run(Self.refundOrder("rf-1", amount: 600, transactionId: saleId), connector: connector, emulation: emulation)
        guard case .succeeded(let result) = first else {
            Issue.record("a refund within the sale succeeds, got \(first)")
            return
        }
        #expect(result["parentTransactionId"] == .string(saleId))
        #expect(result["amount"] == 600)
        #expect(result["transactionId"] != .string(saleId))
        #expect(
            try Self.run(Self.refundOrder("rf-2", amount: 451, transactionId: saleId), connector: connector, emulation: emulation).kind
                == "failed:VIVA_REFUND_400")
        // The same order again is a second refund: Viva replays nothing.
        #expect(
            try Self.run(Self.refundOrder("rf-3", amount: 200, transactionId: saleId), connector: connector, emulation: emulation).kind == "succeeded"
        )
        #expect(
            try Self.run(Self.refundOrder("rf-3", amount: 200, transactionId: saleId), connector: connector, emulation: emulation).kind == "succeeded"
        )
        #expect(
            try Self.run(Self.refundOrder("rf-4", amount: 51, transactionId: saleId), connector: connector, emulation: emulation).kind
                == "failed:VIVA_REFUND_400")
        #expect(emulation.refundRequests().map(\.errorCode) == [0, 400, 0, 0, 400])
        #expect(emulation.refundRequests().map(\.amount) == [600, 451, 200, 200, 51])
        let unknownSale = VivaSandbox.uuid(from: "never-paid")
        #expect(
            try Self.run(Self.refundOrder("rf-5", amount: 1, transactionId: unknownSale), connector: connector, emulation: emulation).kind
                == "failed:HTTP_404")
    }

    @Test func aRefundNeedsTheMerchantsAPICredentials() async throws {
        let connector = await VivaConnector(config: PaypipeConfig(merchants: ["default": MerchantConfig(VivaFixtures.config)]))
        #expect(throws: Rejection.self) {
            try connector.sign(Self.refundOrder("rf-x", amount: 1, transactionId: "abc"), purpose: .submit, nowSeconds: 0)
        }
    }
}

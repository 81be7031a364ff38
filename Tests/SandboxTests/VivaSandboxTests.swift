import PaypipeCore
import Testing
import Viva

@testable import Sandbox

@Suite struct VivaSandboxTests {
    @Test func sandboxCallbacksValidateAgainstTheOrder() throws {
        let order = VivaFixtures.saleOrder(amount: 2500, ["clientTransactionId": "ref & co=1 ü", "tipAmount": 300, "installments": ["preferred": 3]])
        let url = try VivaSale.url(order: order, config: VivaFixtures.config)
        let sale = try VivaSandbox.readSale(url)
        let approved = VivaSandbox.approved(sale)
        #expect(try VivaSaleCallback(uri: approved.uri) == approved)
        let validation = try VivaSaleCallback.validate(uri: approved.uri, order: order, config: VivaFixtures.config)
        guard case .succeeded(let result) = validation.verdict else { Issue.record("expected success"); return }
        #expect(result["tipAmount"] == 300 && result["amount"] == 2500 && result["installments"] == 3)
        #expect(VivaSandbox.approved(sale) == approved)

        let declined = VivaSandbox.declined(sale, message: "Insufficient funds")
        guard case .failed("VIVA_SALE_FAILED", _) = try VivaSaleCallback.validate(uri: declined.uri, order: order, config: VivaFixtures.config).verdict else {
            Issue.record("expected failure"); return
        }
    }
}

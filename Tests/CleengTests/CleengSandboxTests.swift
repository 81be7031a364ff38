import PaypipeCore
import Testing

@testable import Cleeng

@Suite struct CleengSandboxTests {
    @Test func acceptsWhatTheSignerBuilds() throws {
        let request = try CleengReceipt.request(order: receiptOrder(), config: config)
        let check = CleengSandbox.verifyReceiptRequest(request, username: "publisher", password: Secret("s3cr3t-pa55"))
        #expect(check.response.status == 200)
        #expect(check.receipt?.transactionId == "1000000123456789")
        guard case .pending = CleengReceiptResponse.classify(check.response, offerId: "E123123123_US", transactionId: "1000000123456789") else {
            Issue.record("the sandbox's acceptance must classify as pending"); return
        }
    }

    @Test func refusesWrongCredentials() throws {
        var request = try CleengReceipt.request(order: receiptOrder(), config: config)
        let check = CleengSandbox.verifyReceiptRequest(request, username: "publisher", password: Secret("other"))
        #expect(check.response.status == 401)
        #expect(check.receipt == nil)
        request.headers.removeAll { $0.name == "Authorization" }
        #expect(CleengSandbox.verifyReceiptRequest(request, username: "publisher", password: Secret("s3cr3t-pa55")).response.status == 401)
    }

    @Test(arguments: ["customerToken", "offerId", "receiptData", "transactionId"])
    func refusesBodiesMissingAField(_ field: String) throws {
        var request = try CleengReceipt.request(order: receiptOrder(), config: config)
        guard case .object(var body) = try JSONValue.parse(request.body) else { Issue.record("body"); return }
        body[field] = nil
        request.body = Array(JSONValue.object(body).serialized.utf8)
        let check = CleengSandbox.verifyReceiptRequest(request, username: "publisher", password: Secret("s3cr3t-pa55"))
        #expect(check.response.status == 400)
        #expect(String(decoding: check.response.body, as: UTF8.self).contains(field))
        #expect(!String(decoding: check.response.body, as: UTF8.self).contains(receiptBase64))
    }

    @Test func accessStatusRoundTrip() throws {
        let request = try CleengAccessStatusCall.request(order: receiptOrder(["ipAddress": "2001:db8::1"]), config: config, requestId: 9)
        let query = try CleengSandbox.parseAccessStatusRequest(request.body).get()
        #expect(query.id == 9 && query.customerToken == seedToken && query.offerId == "E123123123_US" && query.ipAddress == "2001:db8::1")

        let granted = CleengSandbox.accessStatusResponse(id: query.id, grant: CleengAccessGrant(grantType: "purchase", expiresAt: 1_800_000_000))
        #expect(CleengAccessStatusCall.classify(granted, expectedId: 9)
            == .granted(CleengAccessGrant(grantType: "purchase", expiresAt: 1_800_000_000, purchasedDirectly: true)))
        #expect(CleengAccessStatusCall.classify(CleengSandbox.accessStatusResponse(id: 9, grant: nil), expectedId: 9) == .notGranted)
        let error = CleengSandbox.accessStatusError(id: 9, code: 1, message: CleengSandbox.standardMessage(for: 1))
        #expect(CleengAccessStatusCall.classify(error, expectedId: 9) == .fatalError(code: 1, message: "Invalid customer token"))
        guard case .transient = CleengAccessStatusCall.classify(CleengSandbox.accessStatusError(id: 9, code: 14, message: "IP limit reached")) else {
            Issue.record("14 keeps polling"); return
        }
    }

    @Test func malformedAccessRequestsGetErrors() {
        func code(_ text: String) -> Int64? {
            if case .failure(let error) = CleengSandbox.parseAccessStatusRequest(Array(text.utf8)) { return error.code }
            return nil
        }
        #expect(code("nope") == -32700)
        #expect(code(#"{"method":"getCustomer","params":{},"jsonrpc":"2.0","id":1}"#) == -32601)
        #expect(code(#"{"method":"getAccessStatus","params":{"offerId":"E1"},"jsonrpc":"2.0","id":1}"#) == 16)
        #expect(code(#"{"method":"getAccessStatus","params":{"customerToken":"t","offerId":"E1","ipAddress":"x"},"jsonrpc":"2.0","id":1}"#) == 16)
        #expect(code(#"{"method":"getAccessStatus","params":{"customerToken":"t","offerId":"E1"},"jsonrpc":"2.0","id":1}"#) == nil)
    }
}

import Foundation
import PaypipeCore
import Testing

@testable import Viva

/// The approved response table of Viva's inter-app documentation, as the app would send it.
let seedApprovedURI =
    "interapp-callback://result?status=success&message=Transaction%20successful&action=sale"
    + "&clientTransactionId=12345678901234567890123456789012&amount=1200&tipAmount=200&verificationMethod=CONTACTLESS"
    + "&rrn=123456833121&cardType=Debit%20Mastercard&accountNumber=537489******1831&referenceNumber=833121"
    + "&authorisationCode=690882&tid=16016684&orderCode=1091166300000136&shortOrderCode=1091166300&installments=10"
    + "&transactionDate=2019-09-13T12:14:19.8703452%2B03:00&transactionId=a78e045c-49c3-4743-9071-f1e0ed71810c"

let seedOrder = saleOrder(["clientTransactionId": "12345678901234567890123456789012", "tipAmount": 200])

func replacing(_ key: String, with value: String?, in uri: String = seedApprovedURI) -> String {
    let parts = uri.split(separator: "?", maxSplits: 1)
    let items = parts[1].split(separator: "&").compactMap { item -> String? in
        guard item.hasPrefix(key + "=") else { return String(item) }
        return value.map { key + "=" + $0 }
    }
    return parts[0] + "?" + items.joined(separator: "&")
}

func uriError(_ uri: String, order: Order = seedOrder) -> CallbackRejection? {
    do { _ = try VivaSaleCallback.validate(uri: uri, order: order, config: vivaConfig) } catch { return error }
    return nil
}

@Suite struct VivaSaleCallbackTests {
    @Test func seedApprovedResponseSucceeds() throws {
        let validation = try VivaSaleCallback.validate(uri: seedApprovedURI, order: seedOrder, config: vivaConfig)
        guard case .succeeded(let result) = validation.verdict else {
            Issue.record("expected success, got \(validation.verdict)")
            return
        }
        #expect(result["transactionId"] == "a78e045c-49c3-4743-9071-f1e0ed71810c")
        #expect(result["referenceNumber"] == "833121")
        #expect(result["authorisationCode"] == "690882")
        #expect(result["tipAmount"] == 200)
        #expect(result["cardType"] == "Debit Mastercard")
        #expect(result["accountNumber"] == "537489******1831")
        #expect(result["transactionDate"] == "2019-09-13T12:14:19.8703452+03:00")
        #expect(validation.callback.installments == 10)
    }

    @Test func failedResponseMayLackReferenceAndAuthorisation() throws {
        var uri = replacing("status", with: "fail")
        uri = replacing("message", with: "Card%20declined", in: uri)
        uri = replacing("referenceNumber", with: "", in: uri)
        uri = replacing("authorisationCode", with: nil, in: uri)
        let validation = try VivaSaleCallback.validate(uri: uri, order: seedOrder, config: vivaConfig)
        #expect(validation.verdict == .failed(code: "VIVA_SALE_FAILED", message: "viva sale failed: Card declined"))
        #expect(validation.result["status"] == "fail")
        #expect(validation.result["referenceNumber"] == nil)
    }

    @Test func successMustCarryReferenceAndAuthorisation() {
        #expect(uriError(replacing("authorisationCode", with: nil))?.message.contains("authorisationCode") == true)
        #expect(uriError(replacing("referenceNumber", with: ""))?.code == "MISSING_FIELD")
        #expect(uriError(replacing("transactionId", with: nil))?.message.contains("transactionId") == true)
    }

    @Test func mismatchesAreFailedVerdictsNotErrors() throws {
        let amount = try VivaSaleCallback.validate(uri: replacing("amount", with: "100"), order: seedOrder, config: vivaConfig)
        #expect(amount.verdict == .failed(code: "AMOUNT_MISMATCH", message: "callback amount 100 != order amount 1200"))
        let reference = try VivaSaleCallback.validate(uri: replacing("clientTransactionId", with: "other"), order: seedOrder, config: vivaConfig)
        guard case .failed("REFERENCE_MISMATCH", _) = reference.verdict else {
            Issue.record("expected REFERENCE_MISMATCH")
            return
        }
        // The tip is reported separately, not compared.
        let tip = try VivaSaleCallback.validate(uri: replacing("tipAmount", with: "0"), order: seedOrder, config: vivaConfig)
        guard case .succeeded = tip.verdict else {
            Issue.record("tip must not be compared")
            return
        }
    }

    @Test func defaultReferenceIsTheOrderId() throws {
        let order = saleOrder()
        let validation = try VivaSaleCallback.validate(uri: replacing("clientTransactionId", with: "ord-viva-1"), order: order, config: vivaConfig)
        guard case .succeeded = validation.verdict else {
            Issue.record("expected success")
            return
        }
    }

    @Test func unmaskedCardNumbersAreRejectedAndNeverEchoed() {
        for pan in ["5374891234561831", "537489123456****", "5374 8912 3456 1831", "537489%2A%2A%2A%2A%2A%2A1831x"] {
            let error = uriError(replacing("accountNumber", with: pan))
            #expect(error != nil)
            #expect(error?.message.contains("accountNumber") == true)
            #expect(error?.message.contains("5374891") == false && error?.description.contains("123456") == false)
        }
        #expect(uriError(replacing("accountNumber", with: "5374891234561831"))?.code == "UNMASKED_PAN")
        #expect(uriError(replacing("accountNumber", with: "537489%2A%2A%2A%2A%2A%2A1831")) == nil)
        #expect(uriError(replacing("accountNumber", with: "537489**1831")) == nil)
        #expect(uriError(replacing("accountNumber", with: "53748*******1831"))?.code == "INVALID_FIELD")
    }

    @Test(arguments: [
        (replacing("amount", with: "12.00"), "INVALID_FIELD", "amount"),
        (replacing("amount", with: "-5"), "INVALID_FIELD", "amount"),
        (replacing("amount", with: nil), "MISSING_FIELD", "amount"),
        (replacing("tipAmount", with: "2e2"), "INVALID_FIELD", "tipAmount"),
        (replacing("transactionId", with: "not-a-uuid"), "INVALID_FIELD", "transactionId"),
        (replacing("transactionDate", with: "2019-02-30T12:14:19Z"), "INVALID_FIELD", "transactionDate"),
        (replacing("status", with: "ok"), "INVALID_FIELD", "status"),
        (replacing("action", with: "refund"), "WRONG_ACTION", "action"),
        (seedApprovedURI + "&amount=1200", "DUPLICATE_PARAMETER", "amount"),
        (replacing("message", with: "bad%2"), "INVALID_ENCODING", "message"),
        (replacing("message", with: "bad%ZZ"), "INVALID_ENCODING", "message"),
        (replacing("message", with: "bad%C3%28"), "INVALID_ENCODING", "message"),
        (replacing("message", with: "line%0Abreak"), "INVALID_ENCODING", "message"),
        (replacing("message", with: "raw space"), "INVALID_ENCODING", "message"),
        (seedApprovedURI.replacingOccurrences(of: "interapp-callback://", with: "evil-app://"), "WRONG_CALLBACK_SCHEME", "callback"),
        (seedApprovedURI.replacingOccurrences(of: "://result?", with: "://other?"), "WRONG_HOST", "uri"),
        (seedApprovedURI + "#frag", "MALFORMED_URI", "uri"),
        (seedApprovedURI + "&", "MALFORMED_URI", "uri"),
        ("interapp-callback:result?status=success", "MALFORMED_URI", "uri"),
    ])
    func malformedCallbacksAreRefused(_ uri: String, _ code: String, _ field: String) {
        let error = uriError(uri)
        #expect(error?.code.rawValue == code)
        #expect(field == "uri" || error?.message.contains(field) == true)
        #expect(error?.status == 400)
    }

    @Test func schemeFollowsTheOrdersCallbackParam() throws {
        let order = saleOrder(["clientTransactionId": "12345678901234567890123456789012", "callback": "my-app"])
        #expect(uriError(seedApprovedURI, order: order)?.code == "WRONG_CALLBACK_SCHEME")
        let uri = seedApprovedURI.replacingOccurrences(of: "interapp-callback://", with: "my-app://")
        guard case .succeeded = try VivaSaleCallback.validate(uri: uri, order: order, config: vivaConfig).verdict else {
            Issue.record("expected success")
            return
        }
    }

    @Test func forwardedBody() throws {
        let body: JSONValue = ["orderId": "ord-viva-1", "uri": .string(seedApprovedURI)]
        guard case .succeeded = try VivaSaleCallback.validate(body: body, order: seedOrder, config: vivaConfig).verdict else {
            Issue.record("expected success")
            return
        }
        #expect(throws: CallbackRejection.self) { try VivaSaleCallback.validate(body: ["orderId": "x"], order: seedOrder, config: vivaConfig) }
    }
}

@Suite struct VivaQueryTests {
    @Test func percentEncodingIsRFC3986() {
        #expect(VivaQuery.percentEncode("AZaz09-._~") == "AZaz09-._~")
        #expect(VivaQuery.percentEncode("a b+c&d=e/é") == "a%20b%2Bc%26d%3De%2F%C3%A9")
    }
}

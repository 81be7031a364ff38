import Foundation
import PaypipeCore
import Testing

@testable import Cleeng

let seedToken = "ZAP8dgKPIEgBulSZZBdyv1O0wzg1pucyHf8gUGg2X6ZhdRaH"
let receiptBytes: [UInt8] = Array("{\"signature\":\"AApUcmVjZWlwdA==\",\"purchase-info\":\"ewoJInByb2R1Y3QtaWQiID0gIkUxMjMxMjMxMjNfVVMiOwp9\"}".utf8)
let receiptBase64 = Data(receiptBytes).base64EncodedString()

let config = CleengConfig(
    receiptURL: "http://127.0.0.1:9104/checkout/apple_inapp.php", apiURL: "http://127.0.0.1:9104/3.0/json-rpc",
    username: "publisher", password: Secret("s3cr3t-pa55"))

func receiptOrder(_ overrides: [String: JSONValue?] = [:]) -> Order {
    var params: [String: JSONValue] = [
        "customerToken": .string(seedToken), "offerId": "E123123123_US",
        "receiptData": .string(receiptBase64), "transactionId": "1000000123456789",
    ]
    for (key, value) in overrides { params[key] = value }
    return Order(orderId: "ord-cl-1", operation: .appleReceipt, params: params)
}

func rejection(_ body: () throws -> Void) -> Rejection? {
    do { try body() } catch let error as Rejection { return error } catch { return nil }
    return nil
}

@Suite struct CleengReceiptRequestTests {
    @Test func buildsTheSeedRequest() throws {
        let request = try CleengReceipt.request(order: receiptOrder(), config: config)
        #expect(request.method == .POST)
        #expect(request.url == "http://127.0.0.1:9104/checkout/apple_inapp.php")
        #expect(request.header("Content-Type") == "application/json")
        let expectedAuth = "Basic " + Data("publisher:s3cr3t-pa55".utf8).base64EncodedString()
        #expect(request.header("Authorization") == expectedAuth)
        let body = try JSONValue.parse(request.body)
        #expect(
            body == [
                "customerToken": .string(seedToken), "offerId": "E123123123_US",
                "receiptData": .string(receiptBase64), "transactionId": "1000000123456789",
            ])
        #expect(!request.description.contains("s3cr3t"))
    }

    @Test func ipAddressIsNotPartOfTheReceiptBody() throws {
        let request = try CleengReceipt.request(order: receiptOrder(["ipAddress": "203.0.113.7"]), config: config)
        #expect(try JSONValue.parse(request.body)["ipAddress"] == nil)
    }

    @Test func basicAuthEncodesEveryPaddingLength() throws {
        for password in ["a", "ab", "abc", "pässwörd"] {
            let value = try CleengBasicAuth.headerValue(username: "u", password: Secret(password))
            #expect(value == "Basic " + Data("u:\(password)".utf8).base64EncodedString())
            #expect(CleengBasicAuth.matches(value, username: "u", password: Secret(password)))
            #expect(!CleengBasicAuth.matches(value, username: "u", password: Secret(password + "x")))
        }
    }

    @Test func refusesUnusableCredentials() {
        let colon = CleengConfig(receiptURL: config.receiptURL, apiURL: config.apiURL, username: "pub:lisher", password: Secret("p"))
        let error = rejection { _ = try CleengReceipt.request(order: receiptOrder(), config: colon) }
        #expect(error?.code == .missingCredentials)
        #expect(error?.message.contains("pub:lisher") == false)
        let empty = CleengConfig(receiptURL: config.receiptURL, apiURL: config.apiURL, username: "publisher", password: Secret(""))
        #expect(rejection { _ = try CleengReceipt.request(order: receiptOrder(), config: empty) }?.code == .missingCredentials)
    }

    @Test(arguments: ["customerToken", "offerId", "receiptData", "transactionId"])
    func missingParamIsNamed(_ name: String) {
        let error = rejection { _ = try CleengReceipt(order: receiptOrder([name: nil])) }
        #expect(error?.code == .missingParam)
        #expect(error?.field == "params.\(name)")
        #expect(error?.message.contains("params.\(name)") == true)
    }

    @Test(arguments: [
        ("customerToken", JSONValue.string("")), ("customerToken", .integer(5)), ("customerToken", .string("tok en")),
        ("customerToken", .string(String(repeating: "a", count: 4097))),
        ("offerId", .string("E123<script>")), ("offerId", .string(String(repeating: "E", count: 65))),
        ("transactionId", .string("1000 0001")), ("transactionId", .bool(true)),
        ("receiptData", .string("not base64!")), ("receiptData", .string("QUJD\nREVG")), ("receiptData", .string("QUJDR")),
        ("receiptData", .string("QU=D")), ("receiptData", .integer(1)),
        ("ipAddress", .string("256.1.1.1")), ("ipAddress", .string("01.2.3.4")), ("ipAddress", .string("fe80::1%eth0")),
        ("ipAddress", .string("example.com")), ("ipAddress", .integer(3)),
        // null is a wrong type: neither "missing" for the required ones nor "absent" for ipAddress.
        ("customerToken", .null), ("receiptData", .null), ("ipAddress", .null),
        // Strict base64: non-canonical trailing bits ("QR==" spells the same byte as "QQ==").
        ("receiptData", .string("QR==")),
    ])
    func invalidParamIsNamed(_ name: String, _ value: JSONValue) {
        let error = rejection { _ = try CleengReceipt(order: receiptOrder([name: value])) }
        #expect(error?.code == .invalidParam)
        #expect(error?.field == "params.\(name)")
    }

    @Test(arguments: ["203.0.113.7", "2001:db8::1", "::ffff:192.0.2.1"])
    func acceptsIPLiterals(_ ip: String) throws {
        #expect(try CleengReceipt(order: receiptOrder(["ipAddress": .string(ip)])).ipAddress == ip)
    }

    @Test func acceptsJWTStyleTokensAndPaddingVariants() throws {
        let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJjdXN0b21lcklkIjoxMjN9.c2lnbmF0dXJl-_x"
        for receipt in ["QQ==", "QUI=", "QUJD"] {
            let parsed = try CleengReceipt(order: receiptOrder(["customerToken": .string(jwt), "receiptData": .string(receipt)]))
            #expect(parsed.receiptData == receipt)
        }
    }

    @Test func messagesUseTheSharedVocabulary() {
        func message(_ overrides: [String: JSONValue?]) -> String? {
            rejection { _ = try CleengReceipt(order: receiptOrder(overrides)) }?.message
        }
        #expect(
            message(["offerId": .string(String(repeating: "E", count: 65))])
                == "params.offerId must be 1-64 characters of letters, digits and . _ : -")
        #expect(message(["customerToken": ""]) == "params.customerToken must be 1-4096 characters of letters, digits and . _ - ~ + / =")
        #expect(message(["transactionId": .null]) == "params.transactionId must be a string, got null")
        #expect(
            message(["offerID": "E1"])
                == "params.offerID is not a parameter of cleeng appleReceipt (allowed: customerToken, ipAddress, offerId, receiptData, transactionId)"
        )
    }

    @Test func unknownParamIsRejected() {
        let error = rejection { _ = try CleengReceipt(order: receiptOrder(["offerID": "E1"])) }
        #expect(error?.code == .unknownField)
        #expect(error?.field == "params.offerID")
    }

    @Test func wrongOperationIsRejected() {
        let order = Order(orderId: "o1", operation: Operation(Provider("viva"), "sale"), amount: 100, currency: "EUR", params: receiptOrder().params)
        #expect(rejection { _ = try CleengReceipt(order: order) }?.code == .unknownOperation)
    }

    @Test func receiptDataNeverAppearsInErrorsOrDescriptions() throws {
        let secretish = "SECRETRECEIPT" + String(repeating: "A", count: 3)  // 16 chars, valid base64
        let receipt = try CleengReceipt(order: receiptOrder(["receiptData": .string(secretish)]))
        #expect(!receipt.description.contains(secretish))
        #expect(!receipt.description.contains(seedToken))
        #expect(!String(reflecting: receipt).contains(secretish))
        for bad in [secretish + "!", secretish + "\n", String(secretish.dropLast())] {
            let error = rejection { _ = try CleengReceipt(order: receiptOrder(["receiptData": .string(bad)])) }
            #expect(error != nil)
            #expect(error?.message.contains("SECRETRECEIPT") == false)
            #expect(error?.description.contains("SECRETRECEIPT") == false)
        }
    }
}

@Suite struct CleengReceiptResponseTests {
    @Test func acceptedReceiptIsPending() {
        let verdict = CleengReceiptResponse.classify(
            HTTPResponseSpec(status: 200, body: Array("{\"success\":true}".utf8)),
            offerId: "E1", transactionId: "T1")
        #expect(verdict == .pending(["receiptAccepted": true, "offerId": "E1", "transactionId": "T1"]))
        #expect(CleengReceiptResponse.classify(HTTPResponseSpec(status: 200), offerId: "E1", transactionId: "T1") != .retry(reason: ""))
        if case .pending = CleengReceiptResponse.classify(HTTPResponseSpec(status: 200), offerId: "E1", transactionId: "T1") {
        } else {
            Issue.record("an empty 200 is an acceptance")
        }
    }

    @Test(arguments: [
        (401, "CLEENG_UNAUTHORIZED"), (403, "CLEENG_UNAUTHORIZED"), (400, "CLEENG_BAD_REQUEST"), (404, "CLEENG_NOT_FOUND"),
        (302, "CLEENG_UNEXPECTED_STATUS"),
    ])
    func clientErrorsFail(_ status: Int, _ code: String) {
        let verdict = CleengReceiptResponse.classify(HTTPResponseSpec(status: status), offerId: "E1", transactionId: "T1")
        guard case .failed(let got, _) = verdict else {
            Issue.record("expected failed, got \(verdict)")
            return
        }
        #expect(got.rawValue == code)
    }

    @Test(arguments: [500, 502, 503, 504, 408, 429])
    func transientStatusesRetry(_ status: Int) {
        let verdict = CleengReceiptResponse.classify(HTTPResponseSpec(status: status), offerId: "E1", transactionId: "T1")
        guard case .retry = verdict else {
            Issue.record("expected retry, got \(verdict)")
            return
        }
    }

    @Test func nonJSONSuccessBodyRetries() {
        let verdict = CleengReceiptResponse.classify(
            HTTPResponseSpec(status: 200, body: Array("<html>proxy</html>".utf8)),
            offerId: "E1", transactionId: "T1")
        guard case .retry = verdict else {
            Issue.record("expected retry, got \(verdict)")
            return
        }
        guard case .retry = CleengReceiptResponse.classifyTransportFailure(reason: "connection refused") else {
            Issue.record("transport failure should retry")
            return
        }
    }
}

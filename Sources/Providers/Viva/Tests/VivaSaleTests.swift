import PaypipeCore
import Testing

@testable import Viva

let vivaConfig = VivaConfig(
    merchantKey: "SG23323424EXS3", appId: "com.vivawallet.InterAppDemo", callback: "interapp-callback", isvClientSecret: Secret("qwerty123456"))

func saleOrder(amount: Int64? = 1200, _ params: [String: JSONValue] = [:]) -> Order {
    Order(orderId: "ord-viva-1", operation: .sale, amount: amount, currency: "EUR", params: params)
}

func rejection(_ body: () throws -> Void) -> Rejection? {
    do { try body() } catch let error as Rejection { return error } catch { return nil }
    return nil
}

@Suite struct VivaSaleURLTests {
    @Test func seedRequestExample() throws {
        // Viva's sample: ...&action=sale&amount=1200&tipAmount=200&withInstallments=false&show_receipt=false&show_rating=true
        let display = VivaSale.DisplayOptions(showReceipt: false, showRating: true, showTransactionResult: true)
        let url = try VivaSale.url(
            order: saleOrder(["tipAmount": 200, "clientTransactionId": "12345678901234567890123456789012"]),
            config: vivaConfig, display: display)
        #expect(
            url == "vivapayclient://pay/v1?callback=interapp-callback&merchantKey=SG23323424EXS3&appId=com.vivawallet.InterAppDemo"
                + "&action=sale&clientTransactionId=12345678901234567890123456789012&amount=1200&tipAmount=200&withInstallments=false"
                + "&show_receipt=false&show_rating=true&show_transaction_result=true&protocol=int_default")
    }

    @Test func seedExampleParsesLikeTheApp() throws {
        let sale = try VivaSale(
            requestURL:
                "vivapayclient://pay/v1?callback=interapp-callback&merchantKey=SG23323424EXS3&appId=com.vivawallet.InterAppDemo&action=sale&amount=1200&tipAmount=200&withInstallments=false&show_receipt=false&show_rating=true"
        )
        #expect(sale.amount == 1200 && sale.tipAmount == 200 && sale.preferredInstallments == nil)
        #expect(sale.display == VivaSale.DisplayOptions(showReceipt: false, showRating: true, showTransactionResult: true))
    }

    @Test func clientTransactionIdDefaultsToOrderId() throws {
        let sale = try VivaSale(order: saleOrder(), config: vivaConfig)
        #expect(sale.clientTransactionId == "ord-viva-1")
        #expect(sale.url.contains("&clientTransactionId=ord-viva-1&"))
        #expect(!sale.url.contains("tipAmount"))
        #expect(sale.pendingResult == ["url": .string(sale.url)])
    }

    @Test func awkwardValuesAreEncodedAndRoundTrip() throws {
        let awkward = "a b&amount=1+x/y?#ü€😀%"
        let order = saleOrder(
            amount: 4999,
            [
                "clientTransactionId": .string(awkward), "tipAmount": 0, "installments": ["preferred": 3], "callback": "my.app+cb-1",
                "isv": [
                    "clientId": "auyf99x03.apps.vivapayments.com", "amount": 10,
                    "sourceCode": "Default", "customerTrns": "Café & co = ok", "merchantId": "m 1", "merchantSourceCode": "src",
                    "clientTransactionId": "isv ref",
                ],
            ])
        let config = VivaConfig(merchantKey: "K&EY=1", appId: "com.example app", callback: "interapp-callback", isvClientSecret: Secret("qw=rt&y 1"))
        let sale = try VivaSale(order: order, config: config)
        let url = sale.url
        #expect(url.contains("clientTransactionId=a%20b%26amount%3D1%2Bx%2Fy%3F%23%C3%BC%E2%82%AC%F0%9F%98%80%25&"))
        #expect(url.contains("merchantKey=K%26EY%3D1&appId=com.example%20app&"))
        #expect(url.contains("&ISV_clientSecret=qw%3Drt%26y%201&"))
        #expect(url.contains("withInstallments=true&preferredInstallments=3&"))
        #expect(!url.contains("+") && !url.contains(" "))
        let query = url.split(separator: "?", maxSplits: 1)[1]
        #expect(query.split(separator: "&").allSatisfy { $0.filter { $0 == "=" }.count == 1 })
        let parsed = try VivaSale(requestURL: url)
        #expect(parsed == sale)
        #expect(parsed.clientTransactionId == awkward)
        #expect(parsed.isv?.customerTrns == "Café & co = ok")
    }

    @Test func isvSecretIsNeverPrinted() throws {
        let sale = try VivaSale(order: saleOrder(["isv": ["clientId": "c", "amount": 10]]), config: vivaConfig)
        #expect(sale.url.contains("ISV_amount=10&ISV_clientId=c&ISV_clientSecret=qwerty123456&protocol=int_default"))
        #expect(!sale.description.contains("qwerty123456"))
        #expect(!String(describing: sale.isv).contains("qwerty123456"))
    }

    @Test(arguments: [
        ("tipAmount", JSONValue.integer(1201)), ("tipAmount", .integer(-1)), ("tipAmount", .fraction(2.5)), ("tipAmount", .string("200")),
        ("clientTransactionId", .string("")), ("clientTransactionId", .string("a\nb")),
        ("clientTransactionId", .string(String(repeating: "x", count: 65))),
        ("clientTransactionId", .integer(5)),
        ("callback", .string("1app")), ("callback", .string("app://x")), ("callback", .string("a b")),
        ("installments", .integer(3)), ("installments.preferred", .integer(37)), ("installments.preferred", .integer(-1)),
        ("installments.preferred", .string("3")),
        ("isv", .string("x")), ("isv.amount", .integer(1201)), ("isv.amount", .integer(-5)), ("isv.clientId", .string("")),
        ("isv.customerTrns", .string("bad\u{7}")),
        // null is a wrong type, never "absent" or "missing".
        ("tipAmount", .null), ("callback", .null), ("clientTransactionId", .null), ("installments", .null), ("isv", .null),
        ("installments.preferred", .null), ("isv.sourceCode", .null), ("isv.merchantId", .null),
    ])
    func invalidParamsAreNamed(_ field: String, _ value: JSONValue) {
        var params: [String: JSONValue] = [:]
        let parts = field.split(separator: ".").map(String.init)
        if parts.count == 2 {
            var inner: [String: JSONValue] = parts[0] == "isv" ? ["clientId": "c", "amount": 1] : [:]
            inner[parts[1]] = value
            params[parts[0]] = .object(inner)
        } else {
            params[field] = value
        }
        let error = rejection { _ = try VivaSale(order: saleOrder(params), config: vivaConfig) }
        #expect(error?.code == .invalidParam)
        #expect(error?.field == "params.\(field)")
        #expect(error?.message.contains("params.\(field)") == true)
    }

    @Test(
        arguments: [
            (["installments": [:]], "params.installments.preferred"),
            (["isv": ["amount": 10]], "params.isv.clientId"),
            (["isv": ["clientId": "c"]], "params.isv.amount"),
        ] as [([String: JSONValue], String)])
    func requiredCompanionsAreNamed(_ params: [String: JSONValue], _ field: String) {
        let error = rejection { _ = try VivaSale(order: saleOrder(params), config: vivaConfig) }
        #expect(error?.code == .missingParam)
        #expect(error?.field == field)
    }

    @Test func passingEdgesAreAccepted() throws {
        let tipAll = try VivaSale(order: saleOrder(["tipAmount": 1200, "installments": ["preferred": 0]]), config: vivaConfig)
        #expect(tipAll.tipAmount == 1200 && tipAll.preferredInstallments == 0)
        #expect(try VivaSale(order: saleOrder(["installments": ["preferred": 36]]), config: vivaConfig).preferredInstallments == 36)
        #expect(try VivaSale(order: saleOrder(["isv": ["clientId": "c", "amount": 0]]), config: vivaConfig).isv?.amount == 0)
    }

    @Test func messagesUseTheSharedVocabulary() {
        func message(_ params: [String: JSONValue]) -> String? {
            rejection { _ = try VivaSale(order: saleOrder(params), config: vivaConfig) }?.message
        }
        #expect(message(["clientTransactionId": ""]) == "params.clientTransactionId must be 1-64 characters without control characters")
        #expect(message(["tipAmount": "200"]) == "params.tipAmount must be an integer, got a string")
        #expect(message(["installments": ["preferred": .null]]) == "params.installments.preferred must be an integer, got null")
        #expect(
            message(["installments": ["preferred": 2, "max": 3]])
                == "params.installments.max is not a field of params.installments (allowed: preferred)")
        #expect(
            message(["tipamount": 5])
                == "params.tipamount is not a parameter of viva sale (allowed: callback, clientTransactionId, installments, isv, tipAmount)")
    }

    @Test func unknownParamsAndKeysAreRejected() {
        #expect(rejection { _ = try VivaSale(order: saleOrder(["tipamount": 5]), config: vivaConfig) }?.field == "params.tipamount")
        #expect(
            rejection { _ = try VivaSale(order: saleOrder(["installments": ["preferred": 2, "max": 3]]), config: vivaConfig) }?.field
                == "params.installments.max")
        #expect(
            rejection { _ = try VivaSale(order: saleOrder(["isv": ["clientId": "c", "amount": 1, "secret": "x"]]), config: vivaConfig) }?.code
                == .unknownField)
    }

    @Test func isvSecretComesFromTheConfigOnly() {
        let fromOrder = rejection {
            _ = try VivaSale(order: saleOrder(["isv": ["clientId": "c", "amount": 1, "clientSecret": "s"]]), config: vivaConfig)
        }
        #expect(fromOrder?.code == .unknownField)
        #expect(fromOrder?.field == "params.isv.clientSecret")
        #expect(fromOrder?.message.contains("viva.isvClientSecret") == true)
        let unconfigured = VivaConfig(merchantKey: "K", appId: "A", callback: "cb")
        let missing = rejection { _ = try VivaSale(order: saleOrder(["isv": ["clientId": "c", "amount": 1]]), config: unconfigured) }
        #expect(missing?.code == .missingCredentials)
        #expect(missing?.field == "viva.isvClientSecret")
    }

    @Test func amountAndConfigRules() {
        #expect(rejection { _ = try VivaSale(order: saleOrder(amount: 0), config: vivaConfig) }?.code == .amountNotPositive)
        #expect(rejection { _ = try VivaSale(order: saleOrder(amount: nil), config: vivaConfig) }?.field == "amount")
        let noKey = VivaConfig(merchantKey: "", appId: "a", callback: "cb")
        #expect(rejection { _ = try VivaSale(order: saleOrder(), config: noKey) }?.code == .missingCredentials)
        let badScheme = VivaConfig(merchantKey: "k", appId: "a", callback: "cb://result")
        #expect(rejection { _ = try VivaSale(order: saleOrder(), config: badScheme) }?.code == .missingCredentials)
        let wrongOperation = Order(orderId: "o", operation: Operation(Provider("cleeng"), "appleReceipt"))
        #expect(rejection { _ = try VivaSale(order: wrongOperation, config: vivaConfig) }?.code == .unknownOperation)
    }

    @Test(arguments: [
        ("vivapayclient://pay/v1?callback=cb&merchantKey=k&appId=a&action=sale&amount=0", "INVALID_FIELD", "amount"),
        ("vivapayclient://pay/v1?callback=cb&merchantKey=k&appId=a&action=sale&amount=12.00", "INVALID_FIELD", "amount"),
        ("vivapayclient://pay/v1?callback=cb&merchantKey=k&appId=a&action=sale&amount=100&tipAmount=101", "INVALID_FIELD", "tipAmount"),
        (
            "vivapayclient://pay/v1?callback=cb&merchantKey=k&appId=a&action=sale&amount=100&withInstallments=true", "MISSING_FIELD",
            "preferredInstallments"
        ),
        (
            "vivapayclient://pay/v1?callback=cb&merchantKey=k&appId=a&action=sale&amount=100&ISV_clientId=c&ISV_amount=1", "MISSING_FIELD",
            "ISV_clientSecret"
        ),
        (
            "vivapayclient://pay/v1?callback=cb&merchantKey=k&appId=a&action=sale&amount=100&ISV_clientId=c&ISV_clientSecret=s", "MISSING_FIELD",
            "ISV_amount"
        ),
        ("vivapayclient://pay/v1?callback=cb&merchantKey=&appId=a&action=sale&amount=100", "MISSING_FIELD", "merchantKey"),
        ("vivapayclient://pay/v1?callback=cb&merchantKey=k&appId=a&action=refund&amount=100", "WRONG_ACTION", "action"),
        ("vivapayclient://pay/v1?callback=cb&merchantKey=k&appId=a&action=sale&amount=100&amount=1", "DUPLICATE_PARAMETER", "amount"),
    ])
    func theAppsRulesOnRequestURLs(_ url: String, _ code: String, _ field: String) {
        do {
            _ = try VivaSale(requestURL: url)
            Issue.record("expected \(code) on \(field)")
        } catch {
            #expect(error.code.rawValue == code)
            #expect(error.status == 400)
            #expect(error.message.contains(field))
        }
    }
}

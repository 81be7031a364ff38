import NetsEasy
import PaypipeCore
import Testing

@Suite struct NetsCreateSubscriptionTests {
    @Test func buildsPostPaymentsWithSeedHeaders() throws {
        let order = Fixtures.createOrder()
        let request = try NetsPayments.createSubscription(order, config: Fixtures.config, now: Fixtures.now)
        #expect(request.method == .POST)
        #expect(request.url == "https://test.api.dibspayment.eu/v1/payments")
        #expect(request.header("Authorization") == Fixtures.secretKey)  // raw key, no scheme
        #expect(request.header("commercePlatformTag") == "iOSSDK")
        #expect(request.header("Content-Type") == "application/json")
        let key = try #require(request.header("Idempotency-Key"))
        #expect(key.count == 64)
        #expect(key == NetsPayments.idempotencyKey(for: order.key))
        #expect(!request.description.contains(Fixtures.secretKey))
    }

    @Test func bodyCarriesOrderCheckoutAndSubscription() throws {
        let request = try NetsPayments.createSubscription(
            Fixtures.createOrder(merging: ["checkoutUrl": "https://app.example/return", "termsUrl": "https://shop.example/terms"]),
            config: Fixtures.config, now: Fixtures.now)
        let body = try Fixtures.json(request)
        #expect(body["order"]?["amount"] == 1050)
        #expect(body["order"]?["currency"] == "SEK")
        #expect(body["order"]?["reference"] == "sub-42")
        let items = try #require(body["order"]?["items"]?.arrayValue)
        #expect(
            items == [
                [
                    "reference": "sub-42", "name": "Subscription", "quantity": 1, "unit": "pcs", "unitPrice": 1050,
                    "taxRate": 0, "taxAmount": 0, "grossTotalAmount": 1050, "netTotalAmount": 1050,
                ]
            ])
        #expect(
            body["checkout"] == [
                "integrationType": "HostedPaymentPage", "returnUrl": "https://app.example/return", "termsUrl": "https://shop.example/terms",
            ])
        #expect(body["subscription"] == ["endDate": "2029-07-18T00:00:00+01:00", "interval": 30])
        #expect(body["notifications"] == nil)
    }

    @Test func endDateIsNormalisedToTheWireFormatKeepingWallTime() throws {
        let request = try NetsPayments.createSubscription(
            Fixtures.createOrder(merging: ["endDate": "2029-07-18T00:00:00.250-0930"]), config: Fixtures.config, now: Fixtures.now)
        #expect(try Fixtures.json(request)["subscription"]?["endDate"] == "2029-07-18T00:00:00-09:30")
    }

    /// The two that end the order, and the subscription's charges (Nexi's payment-v1 reference:
    /// `payment.charge.created.v2`, `payment.charge.failed.v2`), which are its renewal events.
    @Test func registersTheOrdersAndTheChargesWebhooksWithTheConfiguredAuthorization() throws {
        let request = try NetsPayments.createSubscription(
            Fixtures.createOrder(), config: Fixtures.config, now: Fixtures.now, webhookURL: Fixtures.webhookURL)
        let hooks = try #require(try Fixtures.json(request)["notifications"]?["webHooks"]?.arrayValue)
        #expect(
            hooks == [
                ["eventName": "payment.checkout.completed", "url": .string(Fixtures.webhookURL), "authorization": .string(Fixtures.webhookSecret)],
                ["eventName": "payment.reservation.failed", "url": .string(Fixtures.webhookURL), "authorization": .string(Fixtures.webhookSecret)],
                ["eventName": "payment.charge.created.v2", "url": .string(Fixtures.webhookURL), "authorization": .string(Fixtures.webhookSecret)],
                ["eventName": "payment.charge.failed.v2", "url": .string(Fixtures.webhookURL), "authorization": .string(Fixtures.webhookSecret)],
            ])
    }

    @Test func sameOrderGivesIdenticalBytesAndKeysDifferPerOrder() throws {
        let a = try NetsPayments.createSubscription(Fixtures.createOrder(), config: Fixtures.config, now: Fixtures.now)
        let b = try NetsPayments.createSubscription(Fixtures.createOrder(), config: Fixtures.config, now: Fixtures.now + 100)
        #expect(a == b)
        let otherOrder = try NetsPayments.createSubscription(Fixtures.createOrder(orderId: "ord-000124"), config: Fixtures.config, now: Fixtures.now)
        let otherMerchant = try NetsPayments.createSubscription(Fixtures.createOrder(merchant: "shop2"), config: Fixtures.config, now: Fixtures.now)
        #expect(otherOrder.header("Idempotency-Key") != a.header("Idempotency-Key"))
        #expect(otherMerchant.header("Idempotency-Key") != a.header("Idempotency-Key"))
        #expect(
            NetsPayments.idempotencyKey(for: OrderKey(merchant: "a", orderId: "bc"))
                != NetsPayments.idempotencyKey(for: OrderKey(merchant: "ab", orderId: "c")))
    }

    @Test func intervalZeroMeansNoFixedInterval() throws {
        let request = try NetsPayments.createSubscription(Fixtures.createOrder(merging: ["interval": 0]), config: Fixtures.config, now: Fixtures.now)
        #expect(try Fixtures.json(request)["subscription"]?["interval"] == 0)
    }

    @Test func trailingSlashInBaseURLIsHarmless() throws {
        var config = Fixtures.config
        config.baseURL = "http://127.0.0.1:9102/"
        let request = try NetsPayments.createSubscription(Fixtures.createOrder(), config: config, now: Fixtures.now)
        #expect(request.url == "http://127.0.0.1:9102/v1/payments")
    }

    @Test func givenItemsAreValidatedAndKept() throws {
        let items: JSONValue = [
            [
                "reference": "plan", "name": "Plan", "quantity": 2, "unit": "pcs", "unitPrice": 400, "taxRate": 2500, "taxAmount": 200,
                "grossTotalAmount": 1000, "netTotalAmount": 800,
            ],
            ["reference": "fee", "name": "Fee", "quantity": 1, "unit": "pcs", "unitPrice": 50, "grossTotalAmount": 50, "netTotalAmount": 50],
        ]
        let request = try NetsPayments.createSubscription(Fixtures.createOrder(merging: ["items": items]), config: Fixtures.config, now: Fixtures.now)
        let sent = try #require(try Fixtures.json(request)["order"]?["items"]?.arrayValue)
        #expect(sent.count == 2)
        #expect(sent[0]["taxRate"] == 2500)
        #expect(sent[1]["taxAmount"] == 0)  // defaulted
    }

    static let item: [String: JSONValue] = [
        "reference": "plan", "name": "Plan", "quantity": 1, "unit": "pcs", "unitPrice": 1050, "grossTotalAmount": 1050, "netTotalAmount": 1050,
    ]

    static func itemsWith(_ change: (inout [String: JSONValue]) -> Void) -> JSONValue {
        var item = item
        change(&item)
        return [.object(item)]
    }

    @Test(arguments: [
        ("endDate missing", Fixtures.createOrder(removing: ["endDate"]), "params.endDate", "MISSING_PARAM"),
        ("endDate without offset", Fixtures.createOrder(merging: ["endDate": "2029-07-18T00:00:00"]), "params.endDate", "INVALID_PARAM"),
        ("endDate as number", Fixtures.createOrder(merging: ["endDate": 1_900_000_000]), "params.endDate", "INVALID_PARAM"),
        ("seed example is in the past", Fixtures.createOrder(merging: ["endDate": "2019-07-18T00:00:00+01:00"]), "params.endDate", "INVALID_PARAM"),
        ("endDate equal to now", Fixtures.createOrder(merging: ["endDate": "2026-11-21T05:00:00Z"]), "params.endDate", "INVALID_PARAM"),
        ("interval missing", Fixtures.createOrder(removing: ["interval"]), "params.interval", "MISSING_PARAM"),
        ("interval negative", Fixtures.createOrder(merging: ["interval": -1]), "params.interval", "INVALID_PARAM"),
        ("interval as string", Fixtures.createOrder(merging: ["interval": "30"]), "params.interval", "INVALID_PARAM"),
        ("interval fractional", Fixtures.createOrder(merging: ["interval": .fraction(1.5)]), "params.interval", "INVALID_PARAM"),
        ("reference missing", Fixtures.createOrder(removing: ["reference"]), "params.reference", "MISSING_PARAM"),
        ("reference empty", Fixtures.createOrder(merging: ["reference": ""]), "params.reference", "INVALID_PARAM"),
        (
            "reference too long", Fixtures.createOrder(merging: ["reference": .string(String(repeating: "r", count: 129))]), "params.reference",
            "INVALID_PARAM"
        ),
        ("reference control char", Fixtures.createOrder(merging: ["reference": "a\nb"]), "params.reference", "INVALID_PARAM"),
        ("unknown param", Fixtures.createOrder(merging: ["termUrl": "https://x.example"]), "params.termUrl", "UNKNOWN_FIELD"),
        ("checkoutUrl not a URL", Fixtures.createOrder(merging: ["checkoutUrl": "javascript:alert(1)"]), "params.checkoutUrl", "INVALID_PARAM"),
        ("termsUrl with space", Fixtures.createOrder(merging: ["termsUrl": "https://x.example/a b"]), "params.termsUrl", "INVALID_PARAM"),
        ("amount missing", Fixtures.createOrder(amount: nil), "amount", "MISSING_FIELD"),
        ("currency missing", Fixtures.createOrder(currency: nil), "currency", "MISSING_FIELD"),
        ("items not an array", Fixtures.createOrder(merging: ["items": "x"]), "params.items", "INVALID_PARAM"),
        ("items empty", Fixtures.createOrder(merging: ["items": []]), "params.items", "INVALID_PARAM"),
        (
            "items sum differs",
            Fixtures.createOrder(merging: [
                "items": itemsWith {
                    $0["unitPrice"] = 1000
                    $0["netTotalAmount"] = 1000
                    $0["grossTotalAmount"] = 1000
                }
            ]), "params.items", "INVALID_PARAM"
        ),
        ("item name missing", Fixtures.createOrder(merging: ["items": itemsWith { $0["name"] = nil }]), "params.items[0].name", "MISSING_PARAM"),
        (
            "item quantity zero", Fixtures.createOrder(merging: ["items": itemsWith { $0["quantity"] = 0 }]), "params.items[0].quantity",
            "INVALID_PARAM"
        ),
        (
            "item unitPrice fractional", Fixtures.createOrder(merging: ["items": itemsWith { $0["unitPrice"] = .fraction(10.5) }]),
            "params.items[0].unitPrice", "INVALID_PARAM"
        ),
        (
            "item net differs", Fixtures.createOrder(merging: ["items": itemsWith { $0["netTotalAmount"] = 1000 }]), "params.items[0].netTotalAmount",
            "INVALID_PARAM"
        ),
        (
            "item gross differs", Fixtures.createOrder(merging: ["items": itemsWith { $0["taxAmount"] = 5 }]), "params.items[0].grossTotalAmount",
            "INVALID_PARAM"
        ),
        (
            "item tax rate over 100%", Fixtures.createOrder(merging: ["items": itemsWith { $0["taxRate"] = 10_001 }]), "params.items[0].taxRate",
            "INVALID_PARAM"
        ),
        ("item unknown field", Fixtures.createOrder(merging: ["items": itemsWith { $0["vat"] = 1 }]), "params.items[0].vat", "UNKNOWN_FIELD"),
        ("item not an object", Fixtures.createOrder(merging: ["items": [1]]), "params.items[0]", "INVALID_PARAM"),
        (
            "item overflow",
            Fixtures.createOrder(merging: [
                "items": itemsWith {
                    $0["quantity"] = 1_000_000
                    $0["unitPrice"] = .integer(Int64.max / 10)
                }
            ]), "params.items[0].netTotalAmount", "INVALID_PARAM"
        ),
        // null is a wrong type, never "absent".
        ("checkoutUrl null", Fixtures.createOrder(merging: ["checkoutUrl": .null]), "params.checkoutUrl", "INVALID_PARAM"),
        ("items null", Fixtures.createOrder(merging: ["items": .null]), "params.items", "INVALID_PARAM"),
        (
            "item taxRate null", Fixtures.createOrder(merging: ["items": itemsWith { $0["taxRate"] = .null }]), "params.items[0].taxRate",
            "INVALID_PARAM"
        ),
        ("reference null", Fixtures.createOrder(merging: ["reference": .null]), "params.reference", "INVALID_PARAM"),
        // C1 controls count as control characters too, not only C0 and DEL.
        ("reference C1 control char", Fixtures.createOrder(merging: ["reference": "a\u{85}b"]), "params.reference", "INVALID_PARAM"),
    ])
    func rejectsNamingTheField(_ label: String, order: Order, field: String, code: String) throws {
        let rejection = try #require(
            Rejection.caught { _ = try NetsPayments.createSubscription(order, config: Fixtures.config, now: Fixtures.now) }, "\(label)")
        #expect(rejection.field == field, "\(label)")
        #expect(rejection.code.rawValue == code, "\(label)")
        #expect(rejection.message.contains(field), "\(label)")
    }

    @Test func messagesUseTheSharedVocabulary() throws {
        func message(_ order: Order) -> String? {
            Rejection.caught { _ = try NetsPayments.createSubscription(order, config: Fixtures.config, now: Fixtures.now) }?.message
        }
        #expect(
            message(Fixtures.createOrder(merging: ["termUrl": "https://x.example"]))
                == "params.termUrl is not a parameter of nets createSubscription (allowed: checkoutUrl, endDate, interval, items, reference, schedule, termsUrl)"
        )
        #expect(message(Fixtures.createOrder(merging: ["reference": ""])) == "params.reference must be 1-128 characters without control characters")
        #expect(message(Fixtures.createOrder(merging: ["interval": "30"])) == "params.interval must be an integer, got a string")
        #expect(message(Fixtures.createOrder(merging: ["checkoutUrl": .null])) == "params.checkoutUrl must be a string, got null")
        #expect(message(Fixtures.createOrder(merging: ["items": []])) == "params.items must hold 1-1000 items")
    }

    /// Lengths count Unicode scalars: 64 "e" + combining acute are 64 characters but 128
    /// scalars (fits); 65 of them are 130 scalars (too long, though only 65 characters).
    @Test func referenceLengthCountsUnicodeScalars() throws {
        let fits = String(repeating: "e\u{301}", count: 64)
        _ = try NetsPayments.createSubscription(
            Fixtures.createOrder(merging: ["reference": .string(fits)]), config: Fixtures.config, now: Fixtures.now)
        let tooLong = String(repeating: "e\u{301}", count: 65)
        #expect(tooLong.count == 65)
        let rejection = Rejection.caught {
            _ = try NetsPayments.createSubscription(
                Fixtures.createOrder(merging: ["reference": .string(tooLong)]), config: Fixtures.config, now: Fixtures.now)
        }
        #expect(rejection?.field == "params.reference")
    }

    @Test func missingCredentialsAreRejectedWithoutLeakingSecrets() throws {
        var noKey = Fixtures.config
        noKey.secretKey = Secret("")
        let keyRejection = try #require(
            Rejection.caught { _ = try NetsPayments.createSubscription(Fixtures.createOrder(), config: noKey, now: Fixtures.now) })
        #expect(keyRejection.code == .missingCredentials)

        var noWebhookSecret = Fixtures.config
        noWebhookSecret.webhookAuthorization = Secret("")
        let hookRejection = try #require(
            Rejection.caught {
                _ = try NetsPayments.createSubscription(
                    Fixtures.createOrder(), config: noWebhookSecret, now: Fixtures.now, webhookURL: Fixtures.webhookURL)
            })
        #expect(hookRejection.code == .missingCredentials)
        // Without a webhook URL the webhook secret is not needed.
        _ = try NetsPayments.createSubscription(Fixtures.createOrder(), config: noWebhookSecret, now: Fixtures.now)

        let badURL = try #require(
            Rejection.caught {
                _ = try NetsPayments.createSubscription(Fixtures.createOrder(), config: Fixtures.config, now: Fixtures.now, webhookURL: "ftp://x")
            })
        #expect(badURL.field == "webhookURL")
        for rejection in [keyRejection, hookRejection, badURL] {
            #expect(!rejection.message.contains(Fixtures.secretKey) && !rejection.message.contains(Fixtures.webhookSecret))
        }
    }

    @Test func wrongOperationIsRefused() throws {
        let rejection = try #require(
            Rejection.caught { _ = try NetsPayments.createSubscription(Fixtures.chargeOrder(), config: Fixtures.config, now: Fixtures.now) })
        #expect(rejection.field == "operation")
    }

    @Test func signDispatchesOnOperation() throws {
        #expect(try NetsPayments.sign(Fixtures.createOrder(), config: Fixtures.config, now: Fixtures.now).url.hasSuffix("/v1/payments"))
        #expect(try NetsPayments.sign(Fixtures.chargeOrder(), config: Fixtures.config, now: Fixtures.now).url.hasSuffix("/charges"))
        #expect(try NetsPayments.sign(Fixtures.getOrder(paymentId: "abc123"), config: Fixtures.config, now: Fixtures.now).method == .GET)
        let viva = Order(orderId: "x", operation: Operation(Provider("viva"), "sale"), amount: 1, currency: "EUR")
        #expect(Rejection.caught { _ = try NetsPayments.sign(viva, config: Fixtures.config, now: Fixtures.now) }?.code == .unknownOperation)
    }
}

@Suite struct NetsGetAndChargeTests {
    @Test func getSubscriptionStartsWithThePayment() throws {
        let request = try NetsPayments.getSubscription(Fixtures.getOrder(paymentId: "025400006091b1ef6937598058c4e487"), config: Fixtures.config)
        #expect(request.method == .GET)
        #expect(request.url == "https://test.api.dibspayment.eu/v1/payments/025400006091b1ef6937598058c4e487")
        #expect(request.header("Authorization") == Fixtures.secretKey)
        #expect(request.body.isEmpty)
        #expect(request.header("Idempotency-Key") == nil)
    }

    @Test(arguments: [
        JSONValue.string("abc/../../v1/subscriptions/x"), "abc?x=1", "abc%2F", "a b", "", "..", "abc#frag", "ab.c", "ünï",
        .string(String(repeating: "a", count: 65)), 12345, .null,
    ])
    func urlInjectionInPaymentIdIsRejected(_ paymentId: JSONValue) throws {
        let rejection = try #require(
            Rejection.caught { _ = try NetsPayments.getSubscription(Fixtures.getOrder(paymentId: paymentId), config: Fixtures.config) })
        #expect(rejection.field == "params.paymentId")
    }

    @Test func missingPaymentIdIsNamed() throws {
        let order = Order(orderId: "o1", operation: .getSubscription, params: [:])
        let rejection = try #require(Rejection.caught { _ = try NetsPayments.getSubscription(order, config: Fixtures.config) })
        #expect(rejection.field == "params.paymentId")
        #expect(rejection.code == .missingParam)
    }

    @Test func directBuildersValidateIdsToo() {
        #expect(Rejection.caught { _ = try NetsPayments.fetchPayment(paymentId: "a/b", config: Fixtures.config) }?.field == "params.paymentId")
        #expect(
            Rejection.caught { _ = try NetsPayments.fetchSubscription(subscriptionId: "a?b", config: Fixtures.config) }?.field
                == "params.subscriptionId")
        #expect(
            (try? NetsPayments.fetchSubscription(subscriptionId: "sub_1-A", config: Fixtures.config))?.url
                == "https://test.api.dibspayment.eu/v1/subscriptions/sub_1-A")
    }

    @Test func chargeBuildsPostWithOrderOnlyAndIdempotencyKey() throws {
        let order = Fixtures.chargeOrder()
        let request = try NetsPayments.chargeSubscription(order, config: Fixtures.config)
        #expect(request.method == .POST)
        #expect(request.url == "https://test.api.dibspayment.eu/v1/subscriptions/d079718b-ff63-45dd-947b-4950c023750f/charges")
        #expect(request.header("Idempotency-Key") == NetsPayments.idempotencyKey(for: order.key))
        #expect(request.header("Authorization") == Fixtures.secretKey)
        let body = try Fixtures.json(request)
        #expect(body.objectValue?.keys.sorted() == ["order"])
        #expect(body["order"]?["reference"] == "charge-1")
        #expect(body["order"]?["amount"] == 1050)
        #expect(body["order"]?["items"]?.arrayValue?.first?["name"] == "Subscription charge")
        #expect(try NetsPayments.chargeSubscription(order, config: Fixtures.config) == request)
    }

    @Test(arguments: [JSONValue.string("sub/../payments"), "sub?x", "sub%20", " sub", ""])
    func chargeRejectsUnsafeSubscriptionIds(_ id: JSONValue) throws {
        let rejection = try #require(
            Rejection.caught { _ = try NetsPayments.chargeSubscription(Fixtures.chargeOrder(subscriptionId: id), config: Fixtures.config) })
        #expect(rejection.field == "params.subscriptionId")
    }

    @Test func chargeRejectsUnknownParamsAndBadItems() throws {
        #expect(
            Rejection.caught { _ = try NetsPayments.chargeSubscription(Fixtures.chargeOrder(extra: ["endDate": "x"]), config: Fixtures.config) }?
                .field == "params.endDate")
        let items: JSONValue = [
            ["reference": "r", "name": "n", "quantity": 1, "unit": "pcs", "unitPrice": 1, "grossTotalAmount": 1, "netTotalAmount": 1]
        ]
        #expect(
            Rejection.caught { _ = try NetsPayments.chargeSubscription(Fixtures.chargeOrder(extra: ["items": items]), config: Fixtures.config) }?
                .field == "params.items")
        var noReference = Fixtures.chargeOrder()
        noReference.params["reference"] = nil
        #expect(Rejection.caught { _ = try NetsPayments.chargeSubscription(noReference, config: Fixtures.config) }?.field == "params.reference")
    }
}

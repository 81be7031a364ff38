import NetsEasy
import PaypipeCore
import Testing

@Suite struct NetsResponseTests {
    var create: HTTPRequestSpec {
        get throws { try NetsPayments.createSubscription(Fixtures.createOrder(), config: Fixtures.config, now: Fixtures.now) }
    }
    var charge: HTTPRequestSpec { get throws { try NetsPayments.chargeSubscription(Fixtures.chargeOrder(), config: Fixtures.config) } }
    var fetchPayment: HTTPRequestSpec {
        get throws { try NetsPayments.getSubscription(Fixtures.getOrder(paymentId: "025400006091b1ef6937598058c4e487"), config: Fixtures.config) }
    }
    var fetchSubscription: HTTPRequestSpec {
        get throws { try NetsPayments.fetchSubscription(subscriptionId: "d079718bff6345dd947b4950c023750f", config: Fixtures.config) }
    }

    @Test func recognisesItsOwnRequests() throws {
        #expect(NetsRequestKind(try create) == .createPayment)
        #expect(NetsRequestKind(try charge) == .chargeSubscription)
        #expect(NetsRequestKind(try fetchPayment) == .fetchPayment)
        #expect(NetsRequestKind(try fetchSubscription) == .fetchSubscription)
        #expect(NetsRequestKind(HTTPRequestSpec(method: .GET, url: "https://x/v1/payments")) == nil)
        #expect(NetsRequestKind(HTTPRequestSpec(method: .DELETE, url: "https://x/v1/payments/abc")) == nil)
        #expect(NetsRequestKind(HTTPRequestSpec(method: .GET, url: "/v1/payments/abc")) == .fetchPayment)
    }

    @Test func createdIsPendingWithTheHostedPage() throws {
        let response = Fixtures.response(
            201,
            #"{"paymentId":"025400006091b1ef6937598058c4e487","hostedPaymentPageUrl":"https://test.checkout.dibspayment.eu/hostedpaymentpage/?checkoutKey=abc&pid=025400006091b1ef6937598058c4e487"}"#
        )
        #expect(
            NetsPayments.handle(response, to: try create)
                == .finish(
                    .pending([
                        "paymentId": "025400006091b1ef6937598058c4e487",
                        "hostedPaymentPageUrl":
                            "https://test.checkout.dibspayment.eu/hostedpaymentpage/?checkoutKey=abc&pid=025400006091b1ef6937598058c4e487",
                    ])))
    }

    @Test(arguments: ["", "<html>oops</html>", #"{"paymentId":"a/b","hostedPaymentPageUrl":"https://x"}"#, #"{"paymentId":"abc"}"#, "[1,2]"])
    func unusableSuccessBodyOnAWriteIsUnknown(_ body: String) throws {
        guard case .unknown = NetsPayments.classifyCreate(Fixtures.response(201, body)) else {
            Issue.record("expected unknown for \(body)")
            return
        }
        guard case .unknown = NetsPayments.classifyCharge(Fixtures.response(201, body)) else {
            Issue.record("expected unknown for charge \(body)")
            return
        }
    }

    @Test func validationErrorsAreFailedWithTheirMessages() throws {
        let response = Fixtures.response(
            400, #"{"errors":{"subscription.endDate":["'End Date' must be in the future."],"order.amount":["too small","really"]}}"#)
        guard case .finish(.failed(let code, let message)) = NetsPayments.handle(response, to: try create) else {
            Issue.record("expected failed")
            return
        }
        #expect(code == "NETS_BAD_REQUEST")
        #expect(message.contains("subscription.endDate: 'End Date' must be in the future."))
        #expect(message.contains("order.amount: too small really"))
    }

    @Test func unauthorizedWithoutBodyFails() throws {
        guard case .failed(let code, let message) = NetsPayments.classifyCreate(HTTPResponseSpec(status: 401)) else {
            Issue.record("expected failed")
            return
        }
        #expect(code == "NETS_UNAUTHORIZED")
        #expect(!message.contains(Fixtures.secretKey))
    }

    @Test func paymentRequiredCarriesNetsMessage() throws {
        let response = Fixtures.response(402, #"{"message":"Card declined","code":"1001","source":"Issuer"}"#)
        #expect(
            NetsPayments.classifyCharge(response)
                == .failed(code: "NETS_DECLINED_1001", message: "Nets declined: Card declined, code 1001, source Issuer"))
        // A code no decline code can be built from (the reference's placeholder) leaves the plain one.
        let placeholder = Fixtures.response(402, #"{"message":"string","code":"string","source":"string"}"#)
        guard case .failed("NETS_DECLINED", _) = NetsPayments.classifyCharge(placeholder) else {
            Issue.record("a lower-case code is not a decline code")
            return
        }
        guard case .failed("NETS_DECLINED", _) = NetsPayments.classifyCharge(Fixtures.response(402, "not json")) else {
            Issue.record("a non-JSON 402 must still fail cleanly")
            return
        }
    }

    @Test(arguments: [500, 502, 503, 504, 408, 409])
    func serverErrorsMayHaveTakenEffectOnWritesButRetryReads(status: Int) throws {
        let response = Fixtures.response(status, "<html><body>Bad gateway</body></html>")
        guard case .finish(.unknown) = NetsPayments.handle(response, to: try create) else {
            Issue.record("create \(status)")
            return
        }
        guard case .finish(.unknown) = NetsPayments.handle(response, to: try charge) else {
            Issue.record("charge \(status)")
            return
        }
        if status != 409 {
            guard case .finish(.retry) = NetsPayments.handle(response, to: try fetchPayment) else {
                Issue.record("get \(status)")
                return
            }
            guard case .finish(.retry) = NetsPayments.handle(response, to: try fetchSubscription) else {
                Issue.record("get sub \(status)")
                return
            }
        }
    }

    @Test func throttlingIsRetriedAndNotFoundFails() throws {
        guard case .retry = NetsPayments.classifyCharge(HTTPResponseSpec(status: 429)) else {
            Issue.record("429")
            return
        }
        #expect(
            NetsPayments.handle(HTTPResponseSpec(status: 404), to: try fetchPayment)
                == .finish(.failed(code: "NETS_NOT_FOUND", message: "Nets does not know this payment")))
        guard case .failed("NETS_FORBIDDEN", _) = NetsPayments.classifyCreate(HTTPResponseSpec(status: 403)) else {
            Issue.record("403")
            return
        }
        guard case .failed("NETS_HTTP_422", _) = NetsPayments.classifyCreate(Fixtures.response(422, "{}")) else {
            Issue.record("422")
            return
        }
    }

    @Test func paymentLookupLeadsToTheSubscriptionWithTheSameHeaders() throws {
        let first = try fetchPayment
        let response = Fixtures.response(
            200,
            #"{"payment":{"paymentId":"025400006091b1ef6937598058c4e487","created":"2019-08-12T11:20:23.6025+00:00","subscription":{"id":"d079718bff6345dd947b4950c023750f"}}}"#
        )
        guard case .send(let second) = NetsPayments.handle(response, to: first) else {
            Issue.record("expected a second request")
            return
        }
        #expect(second.method == .GET)
        #expect(second.url == "https://test.api.dibspayment.eu/v1/subscriptions/d079718bff6345dd947b4950c023750f")
        #expect(second.headers == first.headers)
        #expect(NetsPayments.readPayment(response) == .success("d079718bff6345dd947b4950c023750f"))
    }

    @Test(arguments: [
        (#"{"payment":{"paymentId":"p","created":"x"}}"#, "NETS_SUBSCRIPTION_NOT_FOUND"),
        (#"{"payment":{"subscription":{"id":"../../v1/payments/x"}}}"#, "NETS_INVALID_RESPONSE"),
        (#"{"payment":{"subscription":{"id":42}}}"#, "NETS_INVALID_RESPONSE"),
        (#"{"nothing":true}"#, "NETS_INVALID_RESPONSE"),
        ("garbage", "NETS_INVALID_RESPONSE"),
    ])
    func paymentLookupWithoutAUsableSubscriptionFails(body: String, code: String) throws {
        guard case .finish(.failed(let got, _)) = NetsPayments.handle(Fixtures.response(200, body), to: try fetchPayment) else {
            Issue.record("expected failed for \(body)")
            return
        }
        #expect(got.rawValue == code)
    }

    @Test func subscriptionDetailsSucceedWithMaskedCardOnly() throws {
        let body =
            #"{"subscriptionId":"d079718bff6345dd947b4950c023750f","frequency":0,"interval":30,"endDate":"2029-07-18T00:00:00+01:00","paymentDetails":{"paymentType":"CARD","paymentMethod":"Visa","cardDetails":{"maskedPan":"492500******0004","expiryDate":"1230"}},"extra":"ignored"}"#
        #expect(
            NetsPayments.handle(Fixtures.response(200, body), to: try fetchSubscription)
                == .finish(
                    .succeeded([
                        "subscriptionId": "d079718bff6345dd947b4950c023750f", "frequency": 0, "interval": 30, "endDate": "2029-07-18T00:00:00+01:00",
                        "paymentDetails": [
                            "paymentType": "CARD", "paymentMethod": "Visa", "cardDetails": ["maskedPan": "492500******0004", "expiryDate": "1230"],
                        ],
                    ])))
        let unmasked = #"{"subscriptionId":"s1","interval":0,"paymentDetails":{"cardDetails":{"maskedPan":"4925000000000004","expiryDate":"1230"}}}"#
        guard case .succeeded(let result) = NetsPayments.classifySubscription(Fixtures.response(200, unmasked)) else {
            Issue.record("expected succeeded")
            return
        }
        #expect(result["paymentDetails"]?["cardDetails"]?["maskedPan"] == nil)
        guard
            case .failed("NETS_INVALID_RESPONSE", _) = NetsPayments.classifySubscription(
                Fixtures.response(200, #"{"subscriptionId":"s","interval":"30"}"#))
        else {
            Issue.record("a string interval is not a usable response")
            return
        }
    }

    @Test func chargeSucceedsWithIds() throws {
        let response = Fixtures.response(201, #"{"paymentId":"0e2a0000...","chargeId":"a4e5c0f3"}"#)
        #expect(NetsPayments.handle(response, to: try charge) == .finish(.succeeded(["paymentId": "0e2a0000...", "chargeId": "a4e5c0f3"])))
    }

    /// A charge is never sent again to learn what became of it: its status is read by its key.
    @Test func anUnknownChargeIsReadByItsKeyAndAnUnknownCreationIsReplayedWithIt() throws {
        let createRequest = try create
        #expect(NetsPayments.resolution(forUnknown: createRequest) == .replayWithSameIdempotencyKey(createRequest))
        let chargeRequest = try charge
        guard case .readChargeStatus(let status) = NetsPayments.resolution(forUnknown: chargeRequest) else {
            Issue.record("an unknown charge must be read, not sent again")
            return
        }
        #expect(status.method == .GET && status.body.isEmpty)
        #expect(
            status.url == chargeRequest.url + "/status"
                && status.url.hasSuffix("/v1/subscriptions/d079718b-ff63-45dd-947b-4950c023750f/charges/status"))
        #expect(status.header("Idempotency-Key") == chargeRequest.header("Idempotency-Key"))
        #expect(status.header("Authorization") == chargeRequest.header("Authorization") && status.header("Content-Type") == nil)
        #expect(NetsRequestKind(status) == .chargeStatus)
        let read = try fetchPayment
        #expect(NetsPayments.resolution(forUnknown: read) == .repeatRead(read))
        var keyless = chargeRequest
        keyless.headers.removeAll { $0.name == "Idempotency-Key" }
        guard case .manualReview = NetsPayments.resolution(forUnknown: keyless) else {
            Issue.record("a keyless write must not be replayed")
            return
        }
    }

    /// `GET …/charges/status` (Nexi payment API v1): 200 `{paymentId, chargeId, completed}` or 404.
    @Test func aChargeStatusSaysWhetherTheChargeWasMadeAnd404MeansNotSeenOnlyWhileTheKeyIsYoung() {
        let completed = Fixtures.response(200, #"{"paymentId":"p1","chargeId":"c1","completed":true}"#)
        #expect(NetsPayments.classifyChargeStatus(completed, keyMayBeForgotten: false) == .succeeded(["paymentId": "p1", "chargeId": "c1"]))
        #expect(NetsPayments.classifyChargeStatus(completed, keyMayBeForgotten: true) == .succeeded(["paymentId": "p1", "chargeId": "c1"]))
        let open = Fixtures.response(200, #"{"paymentId":"p1","chargeId":"c1","completed":false}"#)
        guard case .unknown = NetsPayments.classifyChargeStatus(open, keyMayBeForgotten: false) else {
            Issue.record("a charge not completed is not known to have failed")
            return
        }
        let missing = Fixtures.response(404, "")
        guard case .neverSeen = NetsPayments.classifyChargeStatus(missing, keyMayBeForgotten: false) else {
            Issue.record("404 for a young key: Nets saw no such charge")
            return
        }
        guard case .unknown = NetsPayments.classifyChargeStatus(missing, keyMayBeForgotten: true) else {
            Issue.record("404 for a key Nets may have forgotten tells nothing")
            return
        }
        for status in [401, 429, 500, 503] {
            guard case .unknown = NetsPayments.classifyChargeStatus(Fixtures.response(status, ""), keyMayBeForgotten: false) else {
                Issue.record("\(status) tells nothing about the charge")
                return
            }
        }
        guard case .unknown = NetsPayments.classifyChargeStatus(Fixtures.response(200, #"{"paymentId":"p1"}"#), keyMayBeForgotten: false) else {
            Issue.record("an incomplete answer tells nothing")
            return
        }
    }

    @Test func aTerminateFollowsThePaymentReadAndTheReadFollowsTheTerminate() throws {
        let read = try fetchPayment
        let terminate = try #require(NetsPayments.terminateRequest(following: read))
        #expect(terminate.method == .PUT && terminate.url == read.url + "/terminate" && NetsRequestKind(terminate) == .terminatePayment)
        #expect(terminate.header("Authorization") == read.header("Authorization"))
        #expect(NetsPayments.paymentRequest(following: terminate) == read)
        #expect(NetsPayments.terminateRequest(following: try charge) == nil)
    }

    @Test func transportFailures() {
        guard case .unknown = NetsPayments.classifyTransportFailure(kind: .chargeSubscription, requestMayHaveBeenSent: true, reason: "timeout") else {
            Issue.record("timeout after sending a charge")
            return
        }
        guard case .retry = NetsPayments.classifyTransportFailure(kind: .chargeSubscription, requestMayHaveBeenSent: false, reason: "refused") else {
            Issue.record("connection refused")
            return
        }
        guard case .retry = NetsPayments.classifyTransportFailure(kind: .fetchPayment, requestMayHaveBeenSent: true, reason: "timeout") else {
            Issue.record("read timeout")
            return
        }
    }

    @Test func foreignRequestsAreNotClassifiedAsSuccess() {
        let foreign = HTTPRequestSpec(method: .POST, url: "https://x/v2/other")
        guard case .finish(.failed("NETS_UNKNOWN_REQUEST", _)) = NetsPayments.handle(HTTPResponseSpec(status: 200), to: foreign) else {
            Issue.record("expected failure")
            return
        }
    }
}

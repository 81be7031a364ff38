import CallbacksStage
import PaypipeCore
import PhonePe
import StageWire
import TrustPayments

/// Callbacks that pass authentication, so the fuzzer reaches what the validator does with a
/// callback it believes: the decoding of the signed content, the order checks, the verdict and
/// the outcome handed to the ledger. A mutated signed callback never verifies, so the harness
/// signs what the fuzzer writes, as the provider would, with the demo merchant's secrets.
/// Signing with the pipeline's own code is fine here: whether signatures are right is what
/// the provider vectors test; this target starts where a signature has been accepted.
extension FuzzWorld {
    /// The first byte picks the route; then what the provider signs (see `signed`); then, after
    /// a NUL byte, what the provider answers when the validator asks it (Nets' payment, Viva's
    /// transaction). Neither JSON nor a form holds a raw NUL, so the split never cuts one.
    @discardableResult
    func authenticCallback(_ input: [UInt8]) -> (route: CallbackRoute, answer: CallbackAnswer)? {
        guard let first = input.first, !routes.isEmpty else { return nil }
        let route = routes[Int(first) % routes.count]
        let parts = input.dropFirst().split(separator: 0, maxSplits: 1, omittingEmptySubsequences: false)
        provider.answer = parts.count > 1 ? Array(parts[1]) : nil
        guard let request = signed(Array(parts[0]), for: route) else { return nil }
        return (route, handle(route, request))
    }

    /// Per route, what the fuzzer's bytes are:
    /// - PhonePe: the decoded `response` JSON; the harness Base64-encodes it and adds X-VERIFY;
    /// - Nets: the webhook body; the harness adds the merchant's Authorization;
    /// - Trust Payments notification: the form without `responsesitesecurity`, which the
    ///   harness appends (a body that is not a form is sent as it is);
    /// - Trust Payments response JWT: the claims; the harness signs them HS256 and forwards the
    ///   token for the TP example order. An integer `iat` is set to now, so it never expires;
    /// - Viva: the forwarded body, unsigned (Viva's record of the transaction is what is believed).
    func signed(_ content: [UInt8], for route: CallbackRoute) -> CallbackRequest? {
        switch route.path {
        case "/callbacks/phonepe":
            guard let phonepe = merchant.phonepe else { return nil }
            let response = Base64.encodeToString(content, .standard)
            let xVerify = PhonePeChecksum(config: phonepe).xVerify(callbackResponse: response)
            return CallbackRequest(headers: [HTTPHeader("X-VERIFY", xVerify)], body: JSONValue.object(["response": .string(response)]).bytes)
        case "/callbacks/nets":
            guard let nets = merchant.nets else { return nil }
            return CallbackRequest(headers: [HTTPHeader("Authorization", nets.webhookAuthorization.reveal())], body: content)
        case "/callbacks/trustpayments/notification":
            guard let tp = merchant.trustpayments else { return nil }
            guard let fields = try? TPNotification.parseForm(content) else { return CallbackRequest(headers: [], body: content) }
            return CallbackRequest(headers: [], body: TPNotification.formBody(fields: fields, password: tp.notificationPassword))
        case "/callbacks/trustpayments/jwt":
            guard let tp = merchant.trustpayments else { return nil }
            var claims = content
            if case .object(var object)? = try? JSONValue.parse(content), case .integer? = object["iat"] {
                object["iat"] = .integer(Timestamp.nowMilliseconds() / 1000)
                claims = JSONValue.object(object).bytes
            }
            let body: JSONValue = ["orderId": .string(Self.tpJWTOrderId), "jwt": .string(Self.hs256(claims, secret: tp.jwtSecret))]
            return CallbackRequest(headers: [], body: body.bytes)
        case "/callbacks/viva":
            return CallbackRequest(headers: [], body: content)
        default:
            return nil
        }
    }

    /// The example order a response JWT settles (examples/orders.jsonl).
    static let tpJWTOrderId = "demo-tp-jwt-1"

    /// A compact JWT: `{"alg":"HS256","typ":"JWT"}`, the claims, HMAC-SHA256, each Base64URL.
    static func hs256(_ claims: [UInt8], secret: Secret) -> String {
        var token = Base64.encode(Array(#"{"alg":"HS256","typ":"JWT"}"#.utf8), .url)
        token.append(UInt8(ascii: "."))
        Base64.encode(claims, .url, into: &token)
        let mac = Digest.hmacSHA256(key: secret.utf8, message: token)
        token.append(UInt8(ascii: "."))
        Base64.encode(mac, .url, into: &token)
        return String(decoding: token, as: UTF8.self)
    }

    /// One authentic callback of each kind the demo's orders meet, each reaching a decision.
    func authenticCallbackSeeds() -> [[UInt8]] {
        func seed(_ path: String, _ content: String) -> [UInt8]? {
            routes.firstIndex { $0.path == path }.map { [UInt8($0)] + Array(content.utf8) }
        }
        let tpEntry =
            #""errorcode":"0","errormessage":"Ok","sitereference":"test_site12345","orderreference":"\#(Self.tpJWTOrderId)","baseamount":"1050","currencyiso3a":"GBP","settlestatus":"0""#
        let phonepe =
            #"{"success":true,"code":"SUCCESS","message":"Your request has been successfully completed.","data":{"callbackType":"AUTH","merchantId":"MERCHANTUAT","authRequestId":"AR-demo-1","#
        let uri =
            "interapp-callback://result?status=success&message=Transaction%20successful&action=sale&clientTransactionId=demo-viva-1"
            + "&amount=1050&tipAmount=100&verificationMethod=CONTACTLESS&rrn=123456789012&cardType=Debit%20Mastercard&accountNumber=537489******1831"
            + "&referenceNumber=123456&authorisationCode=654321&tid=16016684&orderCode=1234567890123456&shortOrderCode=1234567890"
            + "&installments=0&transactionDate=2019-09-13T12:14:19.8703452%2B03:00&transactionId=6f0a1c3e-2b4d-4e5f-8a9b-0c1d2e3f4a5b"
        let forwarded = JSONValue.object(["orderId": "demo-viva-1", "uri": .string(uri)]).serialized
        return [
            seed(
                "/callbacks/phonepe",
                phonepe
                    + #""transactionDetails":{"providerReferenceId":"T2006110139","amount":39900,"state":"COMPLETED","payResponseCode":"SUCCESS","paymentModes":[{"mode":"UPI_COLLECT","amount":39900,"utr":"206850679072"}]},"subscriptionDetails":{"subscriptionId":"OMS2006110139450123456789","state":"ACTIVE"}}}"#
            ),
            seed(
                "/callbacks/phonepe",
                phonepe
                    + #""transactionDetails":{"providerReferenceId":"T2006110139","amount":39900,"state":"FAILED","payResponseCode":"ZM"},"subscriptionDetails":{"subscriptionId":"OMS2006110139450123456789","state":"FAILED"}}}"#
            ),
            seed(
                "/callbacks/nets",
                #"{"id":"evt-demo-1","event":"payment.checkout.completed","timestamp":"2026-11-25T10:00:00.0000+00:00","merchantId":100017120,"data":{"paymentId":"0123456789abcdef0123456789abcdef","order":{"amount":{"amount":9900,"currency":"SEK"},"reference":"demo-sub-1"}}}"#
                    + "\0"
                    + #"{"payment":{"paymentId":"0123456789abcdef0123456789abcdef","summary":{"reservedAmount":9900},"subscription":{"id":"d079718b-ff63-45dd-947b-4950c023750f"}}}"#
            ),
            seed(
                "/callbacks/nets",
                #"{"id":"evt-demo-2","event":"payment.reservation.failed","merchantId":100017120,"data":{"paymentId":"0123456789abcdef0123456789abcdef","amount":{"amount":9900,"currency":"SEK"},"error":{"message":"declined"}}}"#
            ),
            seed(
                "/callbacks/trustpayments/notification",
                "errorcode=0&orderreference=\(Self.tpJWTOrderId)&requesttypedescription=AUTH&sitereference=test_site12345&transactionreference=57-9-1&baseamount=1050&currencyiso3a=GBP&settlestatus=0&notificationreference=N-demo-1"
            ),
            seed(
                "/callbacks/trustpayments/jwt",
                #"{"iat":1,"iss":"jwt.user","payload":{"requestreference":"W23-demo","version":"1.00","response":[{"requesttypedescription":"THREEDQUERY","transactionreference":"57-9-0",\#(tpEntry)},{"requesttypedescription":"AUTH","transactionreference":"57-9-1",\#(tpEntry)},{"requesttypedescription":"SUBSCRIPTION","transactionreference":"57-9-2","transactionactive":"2",\#(tpEntry)}]}}"#
            ),
            seed("/callbacks/viva", forwarded + "\0" + #"{"statusId":"F","amount":10.50,"merchantTrns":"demo-viva-1"}"#),
            seed("/callbacks/viva", forwarded + "\0" + #"{"statusId":"E","amount":10.50,"merchantTrns":"demo-viva-1"}"#),
        ].compactMap { $0 }
    }
}

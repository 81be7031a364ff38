import NetsEasyTesting
import PaypipeCore
import PhonePeTesting
import Testing
import TrustPaymentsTesting

@testable import CleengEmulation
@testable import NetsEasyEmulation
@testable import PhonePeEmulation
@testable import Sandbox
@testable import TrustPaymentsEmulation

/// The emulators compute every signed or derived value with the sandbox's own code, never the
/// client's. These tests pin that code to the published truth: the providers' test vectors and
/// RFC examples where one is published, otherwise values worked out from the providers' formulas
/// with `sha256sum` (noted at each literal), so neither our client nor our sandbox wrote them.
@Suite struct PublishedVectorTests {
    // MARK: PhonePe X-VERIFY

    static let salt = PhonePeFixtures.salt
    var phonePe: PhonePeSandbox { PhonePeSandbox(merchantId: "MERCHANTUAT", saltKey: Secret(Self.salt), saltIndex: "1") }

    @Test func phonePeChecksumMatchesTheDocumentedVector() {
        // PhonePe's public documentation (/v3/service/auth/access).
        let sandbox = PhonePeSandbox(merchantId: "M", saltKey: Secret("6b451f58-d565-4890-836f-6fb1gjt84d97"), saltIndex: "1")
        let message =
            "ewoJImdyYW50VG9rZW4iOiAiR1JUOTc5YTYzZjQ4ZjIxYjZmMWRiN2JhOTNiYjRhMGZiMjk3NWQ0OWFmYmMyY2QxMDdkYTBmYWMxZGQ1N2RlN2ZiNCIKfQ=="
            + "/v3/service/auth/access"
        let digest = "5de0e70cf2b78f3923ca108e583e6a80fabe910efd1726570b3e5cb2040df7d2"
        #expect(sandbox.checksum(for: message) == digest + "###1")
        // "compare case-insensitively"; the salt index is compared as it is.
        #expect(sandbox.checksumMatches(digest + "###1", message: message))
        #expect(sandbox.checksumMatches(digest.uppercased() + "###1", message: message))
        #expect(!sandbox.checksumMatches(digest + "###2", message: message))
        #expect(!sandbox.checksumMatches(digest, message: message))
        #expect(!sandbox.checksumMatches("0" + digest.dropFirst() + "###1", message: message))
        #expect(!sandbox.checksumMatches(digest + "###1 ", message: message))
        #expect(!sandbox.checksumMatches("", message: message))
    }

    @Test func phonePeAuthInitChecksumIsVerifiedByTheFormula() {
        // PhonePe's auth/init request sample (its payload is not valid JSON), so an
        // accepted checksum shows as a 400 for the payload and a refused one as a 401.
        // printf '%s' "$sample/v3/recurring/auth/init$salt" | sha256sum
        let sample =
            "e8KgIAogICJtZXJjaGFudElkIiA6ICJNRVJDSEFOVFVBVCIsCsKgICJzdWJzY3JpcHRpb25JZCIgOiAiT01TMjMwMTE5MTUyNzQ3MzY1MTE5NzAwMyIswqAgCsKgICJtZXJjaGFudFVzZXJJZCIgOiAiNTMzMEY0RkItQzY2Qy00NjQ2LTg2OTEtMTE1NDRCNTgwNTQ3IiwKwqAgIm1lc3NhZ2UiIDogIlBheW1lbnQgdG93YXJkcyBvcmRlciBOby4gT0QxMzk5MjQ5MjMiLArCoCAiYXV0aFJlcXVlc3RJZCIgOiAiRDI1MDBDRUZCQkU0ODEwOTVBNDNENkQ1QjdBNzg3RiIsCsKgICJwYXltZW50U2NvcGUiIDogIlBIT05FUEUiLArCoCAiYW1vdW50IiA6IDM5OTAwLArCoCAiZGV2aWNlQ29udGV4dCIgOiB7CsKgIMKgICJkZXZpY2VPUyIgOiAiSU9TIiwKwqAgwqAgIm1lcmNoYW50Q2FsbEJhY2tTY2hlbWUiIDogImlPU0ludGVudEludGVncmF0aW9uIiwKwqAgwqAgImlzUFBBcHBQcmVzZW50IiA6IHRydWUKwqAgfQp9"
        let xVerify = "f65dccefd940d24e7e80e2a4aab1a841493f32fc9bd56667ffdf0053a4ff478c###1"
        #expect(phonePe.checksum(for: sample + "/v3/recurring/auth/init") == xVerify)
        func status(_ xVerify: String) -> Int {
            let headers = [
                HTTPHeader("Content-Type", "application/json"), HTTPHeader("X-CALLBACK-URL", "https://merchant.example/cb"),
                HTTPHeader("X-VERIFY", xVerify),
            ]
            return phonePe.handleAuthInit(path: "/v3/recurring/auth/init", headers: headers, body: Array("{\"request\":\"\(sample)\"}".utf8)).response
                .status
        }
        #expect(status(xVerify) == 400)
        #expect(status(xVerify.uppercased()) == 400)
        #expect(status("e" + xVerify.dropFirst()) == 401)
    }

    @Test func phonePeStatusChecksumIsVerifiedByTheFormula() {
        // printf '%s' "/v3/recurring/auth/status/MERCHANTUAT/TX123456789$salt" | sha256sum
        let path = "/v3/recurring/auth/status/MERCHANTUAT/TX123456789"
        let xVerify = "1d2c35cd0e15bf5492ca1da75490b0bbb5dde61b63307962ab8bce8af63168f7###1"
        #expect(phonePe.checksum(for: path) == xVerify)
        #expect(phonePe.verifyAuthStatus(path: path, headers: [HTTPHeader("X-VERIFY", xVerify)]) == .valid(authRequestId: "TX123456789"))
        guard case .rejected(let refusal) = phonePe.verifyAuthStatus(path: path, headers: [HTTPHeader("X-VERIFY", "0" + xVerify.dropFirst())]) else {
            Issue.record("a wrong status checksum was accepted")
            return
        }
        #expect(refusal.status == 401)
    }

    @Test func phonePeCallbacksAreSignedByTheFormula() throws {
        // PhonePe's documented ACTIVE callback `response`: printf '%s' "$response$salt" | sha256sum
        let seedResponse =
            "ewogICJzdWNjZXNzIjogdHJ1ZSwKICAiY29kZSI6ICJTVUNDRVNTIiwKICAibWVzc2FnZSI6ICJZb3VyIHN1YnNjcmlwdGlvbiBpcyBhY3RpdmUuIiwKICAiZGF0YSI6IHsKICAgICJjYWxsYmFja1R5cGUiOiAiQVVUSCIsCiAgICAibWVyY2hhbnRJZCI6ICJNSUQxMjM0NSIsCiAgICAiYXV0aFJlcXVlc3RJZCI6ICJUWDEyMzQ1Njc4OSIsCiAgICAidHJhbnNhY3Rpb25EZXRhaWxzIjogewogICAgICAicHJvdmlkZXJSZWZlcmVuY2VJZCI6ICJQMTgwNjE1MTMyMzA5MzkwMDU1NDk1NyIsCiAgICAgICJhbW91bnQiOiAzOTkwMCwKICAgICAgInN0YXRlIjogIkNPTVBMRVRFRCIsCiAgICAgICJwYXlSZXNwb25zZUNvZGUiOiAiU1VDQ0VTUyIsCiAgICAgICJwYXltZW50TW9kZXMiOiBbCiAgICAgICAgewogICAgICAgICAgIm1vZGUiOiAiQUNDT1VOVCIsCiAgICAgICAgICAiYW1vdW50IjogMzk5MDAsCiAgICAgICAgICAidXRyIjogIjgxNjYyNjUyMTYxNiIKICAgICAgICB9CiAgICAgIF0KICAgIH0sCiAgICAic3Vic2NyaXB0aW9uRGV0YWlscyI6IHsKICAgICAgInN1YnNjcmlwdGlvbklkIjogIk9NUzIwMDYxMTAxMzk0NTAxMjM0NTY3ODkiLAogICAgICAic3RhdGUiOiAiQUNUSVZFIgogICAgfQogIH0KfQ=="
        #expect(phonePe.checksum(for: seedResponse) == "3270270623213fef3f03f2b213db0099008349c1ab94c90e5e3b78bc13e67fa0###1")

        // What the sandbox sends is that formula over the `response` it sends.
        let mandate = PhonePeSandboxMandate(
            merchantId: "MERCHANTUAT", merchantUserId: "U1", subscriptionId: "SUB-1", authRequestId: "TX1", amount: 39900, callbackURL: "http://x/cb")
        let callback = phonePe.callback(for: mandate, outcome: .completed)
        let response = try #require(try JSONValue.parse(callback.body)["response"]?.stringValue)
        #expect(callback.xVerify == phonePe.checksum(for: response))
        #expect(callback.request.header("X-VERIFY") == phonePe.checksum(for: response))
        let forged = phonePe.callback(for: mandate, outcome: .completed, variant: .wrongChecksum)
        #expect(forged.xVerify != phonePe.checksum(for: response))
        #expect(forged.xVerify.hasSuffix("###1") && forged.xVerify.count == callback.xVerify.count)
    }

    // MARK: Trust Payments

    static let notificationVector: [TPSandboxNotification.Field] = [
        ("errorcode", "0"), ("orderreference", "Order"), ("paymenttypedescription", "VISA"), ("requestreference", "RR555"),
        ("settlestatus", "0"), ("sitereference", "test_site12345"), ("transactionreference", "2-44-66"),
    ]
    static let notificationVectorSignature = "1a8b45c137c1d1df8ce6ff923421043f879a85a181e9c0d96a8904211af8b0b0"

    @Test func trustPaymentsNotificationMatchesTheDocumentedVector() {
        let password = Secret("PASSWORD")
        #expect(TPSandboxNotification.responseSiteSecurity(fields: Self.notificationVector, password: password) == Self.notificationVectorSignature)
        // Arrival order, notificationreference, a stale responsesitesecurity and blank values do not count.
        let shuffled: [TPSandboxNotification.Field] =
            Self.notificationVector.reversed() + [("notificationreference", "N-77"), ("maskedpan", ""), ("responsesitesecurity", "x")]
        #expect(TPSandboxNotification.responseSiteSecurity(fields: shuffled, password: password) == Self.notificationVectorSignature)
        #expect(
            TPSandboxNotification.responseSiteSecurity(fields: Self.notificationVector, password: Secret("PASSWORD2"))
                != Self.notificationVectorSignature)

        let body = String(decoding: TPSandboxNotification.formBody(fields: Self.notificationVector, password: password), as: UTF8.self)
        #expect(
            body == "errorcode=0&orderreference=Order&paymenttypedescription=VISA&requestreference=RR555&settlestatus=0"
                + "&sitereference=test_site12345&transactionreference=2-44-66&responsesitesecurity=" + Self.notificationVectorSignature)
        #expect(TPSandboxNotification.percentEncoded("ord 1&2=3/é~") == "ord%201%262%3D3%2F%C3%A9~")
    }

    /// RFC 7515 Appendix A.1: the published HS256 example (header, claims, key and token).
    static let rfcHeader = Array("{\"typ\":\"JWT\",\r\n \"alg\":\"HS256\"}".utf8)
    static let rfcClaims = Array("{\"iss\":\"joe\",\r\n \"exp\":1300819380,\r\n \"http://example.com/is_root\":true}".utf8)
    static let rfcKey: [UInt8] = hexBytes(
        "0323354b2b0fa5bc837e0665777ba68f5ab328e6f054c928a90f84b2d2502ebfd3fb5a92d20647ef968ab4c377623d223d2e2172052e4f08c0cd9af567d080a3")
    static let rfcToken =
        "eyJ0eXAiOiJKV1QiLA0KICJhbGciOiJIUzI1NiJ9"
        + ".eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ"
        + ".dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"

    static func hexBytes(_ hex: String) -> [UInt8] {
        var bytes: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            bytes.append(UInt8(hex[index..<next], radix: 16)!)
            index = next
        }
        return bytes
    }

    @Test func trustPaymentsJWTMatchesTheRFC7515Example() throws {
        #expect(TPSandboxJWT.sign(header: Self.rfcHeader, claims: Self.rfcClaims, key: Self.rfcKey) == Self.rfcToken)
        #expect(try TPSandboxJWT.verifiedClaims(Self.rfcToken, key: Self.rfcKey) == Self.rfcClaims)

        var wrongKey = Self.rfcKey
        wrongKey[0] ^= 1
        #expect(throws: TPSandboxJWT.Refusal(reason: "invalid JWT signature")) { try TPSandboxJWT.verifiedClaims(Self.rfcToken, key: wrongKey) }
        let tampered = Self.rfcToken.replacingOccurrences(of: "dBjft", with: "dBjfu")
        #expect(throws: TPSandboxJWT.Refusal(reason: "invalid JWT signature")) { try TPSandboxJWT.verifiedClaims(tampered, key: Self.rfcKey) }
        // The same signature spelt with padding is not base64url.
        #expect(throws: TPSandboxJWT.Refusal.self) { try TPSandboxJWT.verifiedClaims(Self.rfcToken + "=", key: Self.rfcKey) }
        #expect(throws: TPSandboxJWT.Refusal.self) { try TPSandboxJWT.verifiedClaims("x.y.z", key: Self.rfcKey) }
    }

    @Test func trustPaymentsJWTPinsHS256() {
        func token(_ header: String) -> String {
            TPSandboxJWT.sign(header: Array(header.utf8), claims: Self.rfcClaims, key: Self.rfcKey)
        }
        let unsigned = SandboxCrypto.base64URLEncode(Array(#"{"alg":"none"}"#.utf8)) + "." + SandboxCrypto.base64URLEncode(Self.rfcClaims) + "."
        #expect(throws: TPSandboxJWT.Refusal(reason: "alg \"none\" is not allowed; only HS256")) {
            try TPSandboxJWT.verifiedClaims(unsigned, key: Self.rfcKey)
        }
        #expect(throws: TPSandboxJWT.Refusal(reason: "alg \"HS384\" is not allowed; only HS256")) {
            try TPSandboxJWT.verifiedClaims(token(#"{"alg":"HS384","typ":"JWT"}"#), key: Self.rfcKey)
        }
        #expect(throws: TPSandboxJWT.Refusal(reason: "the JWT header has no alg")) {
            try TPSandboxJWT.verifiedClaims(token(#"{"typ":"JWT"}"#), key: Self.rfcKey)
        }
        #expect(throws: TPSandboxJWT.Refusal(reason: "the JWT header typ is not JWT")) {
            try TPSandboxJWT.verifiedClaims(token(#"{"alg":"HS256","typ":"JOSE+JSON"}"#), key: Self.rfcKey)
        }
        #expect((try? TPSandboxJWT.verifiedClaims(token(#"{"alg":"HS256"}"#), key: Self.rfcKey)) == Self.rfcClaims)
    }

    @Test func trustPaymentsResponseJWTUsesTheFixedHeader() throws {
        let token = TPSandboxJWT.sign(claims: Self.rfcClaims, key: Self.rfcKey)
        #expect(token.hasPrefix("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9."))  // base64url({"alg":"HS256","typ":"JWT"})
        #expect(try TPSandboxJWT.verifiedClaims(token, key: Self.rfcKey) == Self.rfcClaims)
    }

    // MARK: HTTP Basic (Trust Payments web services, Cleeng receipts)

    /// RFC 7617 §2: user "Aladdin", password "open sesame".
    static let rfcBasic = "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ=="

    @Test func basicCredentialsFollowRFC7617() {
        var tp = TPFixtures.config
        tp.webservicesUser = "Aladdin"
        tp.webservicesPassword = Secret("open sesame")
        #expect(TPSandbox.isAuthorized(Self.rfcBasic, config: tp))
        #expect(!TPSandbox.isAuthorized("basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==", config: tp))
        tp.webservicesPassword = Secret("open sesame!")
        #expect(!TPSandbox.isAuthorized(Self.rfcBasic, config: tp))

        #expect(CleengSandbox.isAuthorized(Self.rfcBasic, username: "Aladdin", password: Secret("open sesame")))
        #expect(CleengSandbox.isAuthorized("  basic   QWxhZGRpbjpvcGVuIHNlc2FtZQ== ", username: "Aladdin", password: Secret("open sesame")))
        #expect(!CleengSandbox.isAuthorized(Self.rfcBasic, username: "Aladdin", password: Secret("open sesam")))
        #expect(!CleengSandbox.isAuthorized(Self.rfcBasic, username: "aladdin", password: Secret("open sesame")))
        #expect(!CleengSandbox.isAuthorized("Bearer QWxhZGRpbjpvcGVuIHNlc2FtZQ==", username: "Aladdin", password: Secret("open sesame")))
        #expect(!CleengSandbox.isAuthorized(nil, username: "Aladdin", password: Secret("open sesame")))
    }

    // MARK: Nets

    @Test func netsAuthorizationIsTheRawSecretKey() {
        // Nets Easy's payment API reference: `Authorization: <secret key>` (raw key, no scheme).
        let key = Secret(NetsFixtures.secretKey)
        #expect(NetsSandbox.isSecretKey(NetsFixtures.secretKey, key))
        #expect(!NetsSandbox.isSecretKey("Bearer " + NetsFixtures.secretKey, key))
        #expect(!NetsSandbox.isSecretKey(NetsFixtures.secretKey + " ", key))
        #expect(!NetsSandbox.isSecretKey(String(NetsFixtures.secretKey.dropLast()), key))
        #expect(!NetsSandbox.isSecretKey(NetsFixtures.secretKey.uppercased(), key))

        let twice = HTTPRequestSpec(
            method: .GET, url: "/v1/payments/abc",
            headers: [HTTPHeader("Authorization", NetsFixtures.secretKey), HTTPHeader("authorization", NetsFixtures.secretKey)])
        #expect(NetsSandbox.check(twice, secretKey: key, now: 0)?.status == 401)
        let once = HTTPRequestSpec(method: .GET, url: "/v1/payments/abc", headers: [HTTPHeader("Authorization", NetsFixtures.secretKey)])
        #expect(NetsSandbox.check(once, secretKey: key, now: 0) == nil)
        // No configured key: nothing is authentic, not even an empty header.
        let empty = HTTPRequestSpec(method: .GET, url: "/v1/payments/abc", headers: [HTTPHeader("Authorization", "")])
        #expect(NetsSandbox.check(empty, secretKey: Secret(""), now: 0)?.status == 401)
    }

    @Test func netsWebhooksCarryTheRegisteredAuthorizationVerbatim() {
        let content = NetsWebhookContent(
            kind: .checkoutCompleted, eventId: "e1", paymentId: "p1", amount: 1050, currency: "SEK", timestampMilliseconds: 0)
        #expect(NetsSandbox.webhookDelivery(content, authorization: "registered value 1").authorization == "registered value 1")
        #expect(NetsSandbox.webhookDelivery(content, config: NetsFixtures.config).authorization == NetsFixtures.webhookSecret)
        #expect(NetsSandbox.webhookDelivery(content, config: NetsFixtures.config, tampering: .authorization("guess")).authorization == "guess")
    }

    // MARK: The primitives

    @Test func base64URLIsStrict() {
        #expect(SandboxCrypto.base64URLEncode([0xFB, 0xFF]) == "-_8")
        #expect(SandboxCrypto.base64URLDecode("-_8") == [0xFB, 0xFF])
        #expect(SandboxCrypto.base64URLDecode("QQ") == [0x41])
        #expect(SandboxCrypto.base64URLDecode("QR") == nil)  // non-canonical trailing bits
        #expect(SandboxCrypto.base64URLDecode("QQ==") == nil)
        #expect(SandboxCrypto.base64URLDecode("Q") == nil)
        #expect(SandboxCrypto.base64URLDecode("+/8") == nil)
    }

    @Test func constantTimeEqualityIsExact() {
        #expect(SandboxCrypto.constantTimeEquals(Array("abc".utf8), Array("abc".utf8)))
        #expect(!SandboxCrypto.constantTimeEquals(Array("abc".utf8), Array("abd".utf8)))
        #expect(!SandboxCrypto.constantTimeEquals(Array("abc".utf8), Array("abc\u{0}".utf8)))
        #expect(!SandboxCrypto.constantTimeEquals(Array("".utf8), Array("a".utf8)))
        #expect(SandboxCrypto.constantTimeEquals([UInt8](), [UInt8]()))
    }

    @Test func sha256AndHMACMatchPublishedVectors() {
        // FIPS 180-2 "abc"; RFC 4231 test case 2.
        #expect(SandboxCrypto.sha256Hex(Array("abc".utf8)) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(
            SandboxCrypto.hex(SandboxCrypto.hmacSHA256(key: Array("Jefe".utf8), message: Array("what do ya want for nothing?".utf8)))
                == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    }
}

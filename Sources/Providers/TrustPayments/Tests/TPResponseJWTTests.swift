import PaypipeCore
import Testing
import TrustPaymentsTesting

@testable import TrustPayments

@Suite struct TPResponseJWTTests {
    let now: Int64 = 1_700_000_000
    let expected = TPExpectedOrder(orderId: "ord-000123", siteReference: "test_site12345", amount: 1050, currency: "GBP")

    static func entry(_ type: String, _ errorcode: String = "0", _ extra: [String: JSONValue] = [:]) -> [String: JSONValue] {
        var entry: [String: JSONValue] = [
            "requesttypedescription": .string(type), "errorcode": .string(errorcode), "errormessage": "Ok",
            "transactionreference": .string("57-9-\(type.count)"), "sitereference": "test_site12345", "orderreference": "ord-000123",
            "baseamount": "1050", "currencyiso3a": "GBP", "settlestatus": "0",
        ]
        // `nil` in a [String: JSONValue] literal is JSON null: here it means "drop the field".
        for (key, value) in extra {
            if value == .null { entry.removeValue(forKey: key) } else { entry[key] = value }
        }
        return entry
    }

    static let successEntries = [entry("THREEDQUERY"), entry("AUTH"), entry("SUBSCRIPTION", "0", ["transactionactive": "2"])]

    func token(_ entries: [[String: JSONValue]] = successEntries, iat: Int64? = nil) -> String {
        TPResponseJWT.build(entries: entries, requestReference: "W23-abc", issuedAt: iat ?? now - 10, secret: Secret(TPFixtures.jwtSecret))
    }

    func verify(_ token: String, secret: String = TPFixtures.jwtSecret) async -> Result<TPResponseJWT, CallbackRejection> {
        let verifier = await TPResponseJWTVerifier(secret: Secret(secret))
        do {
            return .success(try await verifier.verify(token, now: now, maxAgeSeconds: 3600))
        } catch {
            return .failure(error)
        }
    }

    func reason(_ token: String) async -> String? {
        if case .failure(let error) = await verify(token) { error.code.rawValue } else { nil }
    }

    @Test func authenticTokenVerifiesAndSucceeds() async throws {
        let verified = try await verify(token()).get()
        #expect(verified.requestReference == "W23-abc")
        #expect(verified.entries.count == 3)
        guard case .succeeded(let result) = verified.verdict(for: expected) else {
            Issue.record("expected success")
            return
        }
        #expect(result["transactionReference"] == "57-9-4")
        #expect(result["subscriptionScheduled"] == true)
        #expect(result["subscriptionTransactionReference"] == "57-9-12")
        #expect(result["transactionActive"] == "2")
        #expect(result["subscriptionState"] == "pendingSettlement")
        #expect(result["settlement"] == "pendingSettlement")
    }

    @Test func shortSecretsStillVerify() async throws {
        let short = TPResponseJWT.build(entries: Self.successEntries, requestReference: "W", issuedAt: now, secret: Secret("short"))
        #expect((try? await verify(short, secret: "short").get()) != nil)
        #expect(await reason(short) == "BAD_SIGNATURE")
    }

    @Test func algorithmIsPinned() async {
        let claims = #"{"iat":1699999990,"payload":{"response":[{"errorcode":"0"}]}}"#
        let none = TPFixtures.base64URL(Array(#"{"alg":"none","typ":"JWT"}"#.utf8)) + "." + TPFixtures.base64URL(Array(claims.utf8)) + "."
        #expect(await reason(none) == "ALG_NOT_ALLOWED")
        let hs384 = TPFixtures.handMadeJWT(header: #"{"alg":"HS384","typ":"JWT"}"#, claims: claims, digest: "SHA384")
        #expect(await reason(hs384) == "ALG_NOT_ALLOWED")
        let hs512 = TPFixtures.handMadeJWT(header: #"{"alg":"HS512","typ":"JWT"}"#, claims: claims, digest: "SHA512")
        #expect(await reason(hs512) == "ALG_NOT_ALLOWED")
        // An HS256 MAC under a header claiming RS256: the key-confusion shape.
        let rs256 = TPFixtures.handMadeJWT(header: #"{"alg":"RS256","typ":"JWT"}"#, claims: claims)
        #expect(await reason(rs256) == "ALG_NOT_ALLOWED")
        let lower = TPFixtures.handMadeJWT(header: #"{"alg":"hs256","typ":"JWT"}"#, claims: claims)
        #expect(await reason(lower) == "ALG_NOT_ALLOWED")
        let hs256 = TPFixtures.handMadeJWT(header: #"{"alg":"HS256","typ":"JWT"}"#, claims: claims)
        #expect(await reason(hs256) == nil)
    }

    @Test func badSignaturesAreRefused() async {
        let good = token()
        let parts = good.split(separator: ".").map(String.init)
        #expect(await reason(parts[0] + "." + parts[1] + ".") == "MISSING_SIGNATURE")
        let forgedClaims = TPFixtures.base64URL(Array(#"{"iat":1699999990,"payload":{"response":[{"errorcode":"0","baseamount":"1"}]}}"#.utf8))
        #expect(await reason(parts[0] + "." + forgedClaims + "." + parts[2]) == "BAD_SIGNATURE")
        let otherSecret = TPResponseJWT.build(
            entries: Self.successEntries, requestReference: "W", issuedAt: now, secret: Secret("another-secret-another-secret-another-secret"))
        #expect(await reason(otherSecret) == "BAD_SIGNATURE")
        var flipped = Array(parts[2])
        flipped[0] = flipped[0] == "A" ? "B" : "A"
        #expect(await reason(parts[0] + "." + parts[1] + "." + String(flipped)) == "BAD_SIGNATURE")
    }

    @Test func issuedAtIsChecked() async {
        #expect(await reason(token(iat: now - 3601)) == "STALE")
        #expect(await reason(token(iat: now - 3600)) == nil)
        #expect(await reason(token(iat: now + 61)) == "IAT_IN_FUTURE")
        #expect(await reason(token(iat: now + 30)) == nil)
        #expect(await reason(token(iat: Int64.min)) == "STALE")
        let missing = TPFixtures.handMadeJWT(header: #"{"alg":"HS256","typ":"JWT"}"#, claims: #"{"payload":{"response":[{"errorcode":"0"}]}}"#)
        #expect(await reason(missing) == "MISSING_IAT")
        let asString = TPFixtures.handMadeJWT(
            header: #"{"alg":"HS256","typ":"JWT"}"#, claims: #"{"iat":"1699999990","payload":{"response":[{"errorcode":"0"}]}}"#)
        #expect(await reason(asString) == nil)
    }

    @Test func statusesFollowTheReason() async {
        func status(_ token: String) async -> Int? {
            if case .failure(let error) = await verify(token) { error.status } else { nil }
        }
        #expect(await status(token(iat: now - 3601)) == 400)
        #expect(await status(token(iat: now + 61)) == 400)
        #expect(await status("a.b") == 400)
        #expect(await status(token()) == nil)
        let none = TPFixtures.handMadeJWT(header: #"{"alg":"none","typ":"JWT"}"#, claims: #"{"iat":1699999990}"#)
        #expect(await status(none) == 401)
        let parts = token().split(separator: ".")
        #expect(await status(parts[0] + "." + parts[1] + ".") == 401)
    }

    @Test func malformedTokensAreRefused() async {
        #expect(await reason("") == "MALFORMED")
        #expect(await reason("a.b") == "MALFORMED")
        #expect(await reason("a.b.c.d") == "MALFORMED")
        #expect(await reason("!!!.e30.abc") == "MALFORMED")
        let notObject = TPFixtures.handMadeJWT(header: #"{"alg":"HS256","typ":"JWT"}"#, claims: "[1,2]")
        #expect(await reason(notObject) == "MALFORMED")
        let noResponse = TPFixtures.handMadeJWT(header: #"{"alg":"HS256","typ":"JWT"}"#, claims: #"{"iat":1699999990,"payload":{}}"#)
        #expect(await reason(noResponse) == "MALFORMED")
    }

    @Test func verdicts() {
        func verdict(_ entries: [[String: JSONValue]]) -> ProviderVerdict { TPResponseCheck.evaluate(entries, expected: expected) }
        func code(_ v: ProviderVerdict) -> String? { if case .failed(let c, _) = v { c.rawValue } else { nil } }

        let declined = [Self.entry("THREEDQUERY"), Self.entry("AUTH", "70000")]
        #expect(code(verdict(declined)) == "DECLINED")
        #expect(
            code(verdict([Self.entry("THREEDQUERY"), Self.entry("AUTH", "0", ["baseamount": "1051"]), Self.entry("SUBSCRIPTION")]))
                == "AMOUNT_MISMATCH")
        #expect(code(verdict([Self.entry("AUTH", "0", ["currencyiso3a": "EUR"])])) == "AMOUNT_MISMATCH")
        #expect(code(verdict([Self.entry("AUTH", "0", ["baseamount": nil])])) == "AMOUNT_MISMATCH")
        #expect(code(verdict([Self.entry("AUTH", "0", ["sitereference": "test_site99999"])])) == "REFERENCE_MISMATCH")
        // Trust Payments' own response samples state no sitereference: the JWT's secret names the site.
        #expect(code(verdict([Self.entry("AUTH", "0", ["sitereference": nil])])) == nil)
        #expect(code(verdict([Self.entry("AUTH", "0", ["orderreference": "ord-other"])])) == "REFERENCE_MISMATCH")
        #expect(code(verdict([Self.entry("AUTH"), Self.entry("SUBSCRIPTION", "0", ["orderreference": "ord-other"])])) == "REFERENCE_MISMATCH")
        let withoutOrderReference = verdict([Self.entry("AUTH", "0", ["orderreference": nil])])
        #expect(code(withoutOrderReference) == nil, "\(withoutOrderReference)")
        #expect({ if case .unknown = verdict([Self.entry("AUTH", "70001")]) { true } else { false } }())
        #expect(code(verdict([Self.entry("THREEDQUERY", "60022")])) == "UNAUTHENTICATED")

        guard case .succeeded(let unscheduled) = verdict([Self.entry("AUTH"), Self.entry("SUBSCRIPTION", "20018")]) else {
            Issue.record("AUTH succeeded")
            return
        }
        #expect(unscheduled["subscriptionScheduled"] == false)
        #expect(unscheduled["subscriptionState"] == "notScheduled")

        guard
            case .succeeded(let settled) = verdict([
                Self.entry("AUTH", "0", ["settlestatus": "100"]), Self.entry("SUBSCRIPTION", "0", ["transactionactive": "1"]),
            ])
        else {
            Issue.record("expected success")
            return
        }
        #expect(settled["settlement"] == "settled")
        #expect(settled["subscriptionState"] == "active")

        let trial = [Self.entry("ACCOUNTCHECK", "0", ["baseamount": "0"]), Self.entry("SUBSCRIPTION", "0", ["transactionactive": "2"])]
        #expect({ if case .succeeded = verdict(trial) { true } else { false } }())
    }
}

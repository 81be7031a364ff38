import PaypipeCore
import Testing
import TrustPaymentsTesting

@testable import TrustPayments

@Suite struct TPSecrecyTests {
    @Test func secretsStayOutOfDescriptionsAndErrors() async throws {
        let config = TPFixtures.config
        let verifier = await TPResponseJWTVerifier(secret: config.jwtSecret)
        #expect(!"\(verifier)".contains("jwt-secret"))
        #expect(!String(reflecting: verifier).contains("jwt-secret"))
        let request = try TPWebServices.request(
            for: Order(orderId: "u", operation: .transactionUpdate, params: ["transactionReference": "1-2-3", "updates": ["baseamount": 5]]),
            config: config)
        #expect(!"\(request)".contains("Basic"))
        do {
            _ = try await verifier.verify(
                TPResponseJWT.build(entries: [["errorcode": "0"]], requestReference: "R", issuedAt: 0, secret: Secret("x")), now: 0, maxAgeSeconds: 60
            )
            Issue.record("a foreign token must not verify")
        } catch {
            #expect(!error.description.contains("jwt-secret"))
            #expect(error.status == 401)
        }
    }

    /// JWT parts go through the shared codec's url variant (its edge cases are in Base64Tests).
    @Test func jwtPartsAreStrictUnpaddedBase64URL() {
        #expect(Base64.decode(Array("YQ".utf8), .url) == Array("a".utf8))
        #expect(Base64.decode(Array("YR".utf8), .url) == nil)
        #expect(Base64.decode(Array("YQ==".utf8), .url) == nil)
        #expect(Base64.decode(Array("Y".utf8), .url) == nil)
        for length in 0..<8 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 77 &+ 250) }
            #expect(Base64.encodeToString(bytes, .url) == TPFixtures.base64URL(bytes))
            #expect(Base64.decode(Base64.encode(bytes, .url), .url) == bytes)
        }
    }
}

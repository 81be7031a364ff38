import PaypipeCore
import Testing

@testable import TrustPayments

@Suite struct TPSecrecyTests {
    @Test func secretsStayOutOfDescriptionsAndErrors() async throws {
        let config = TPFixtures.config
        let verifier = await TPResponseJWTVerifier(secret: config.jwtSecret)
        #expect(!"\(verifier)".contains("jwt-secret"))
        #expect(!String(reflecting: verifier).contains("jwt-secret"))
        let request = try TPWebServices.request(
            for: Order(orderId: "u", operation: .transactionUpdate, params: ["transactionReference": "1-2-3", "updates": ["baseamount": 5]]), config: config)
        #expect(!"\(request)".contains("Basic"))
        do {
            _ = try await verifier.verify(TPResponseJWT.build(entries: [["errorcode": "0"]], requestReference: "R", issuedAt: 0, secret: Secret("x")), now: 0, maxAgeSeconds: 60)
            Issue.record("a foreign token must not verify")
        } catch {
            #expect(!error.description.contains("jwt-secret"))
            #expect(error.httpStatus == 401)
        }
    }

    @Test func base64URLIsStrict() {
        #expect(TPBase64URL.decode(Array("YQ".utf8)) == Array("a".utf8))
        #expect(TPBase64URL.decode(Array("YR".utf8)) == nil)
        #expect(TPBase64URL.decode(Array("YQ==".utf8)) == nil)
        #expect(TPBase64URL.decode(Array("Y".utf8)) == nil)
        for length in 0..<8 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 77 &+ 250) }
            #expect(String(decoding: TPBase64URL.encode(bytes), as: UTF8.self) == TPFixtures.base64URL(bytes))
            #expect(TPBase64URL.decode(TPBase64URL.encode(bytes)) == bytes)
        }
    }
}

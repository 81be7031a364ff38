import Crypto
import Foundation
import JWTKit
import PaypipeCore
import Testing
import TrustPaymentsTesting

@testable import TrustPayments

/// Decodes what jwt-kit verified; `payload` is kept as a dictionary of strings or string arrays.
struct SDKClaims: JWTPayload {
    var iat: Int64
    var iss: String
    var payload: [String: SDKValue]
    func verify(using algorithm: some JWTAlgorithm) async throws {}
}

enum SDKValue: Codable, Equatable {
    case string(String)
    case list([String])
    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let text = try? container.decode(String.self) { self = .string(text) } else { self = .list(try container.decode([String].self)) }
    }
    func encode(to encoder: any Encoder) throws {}
}

@Suite struct TPJWTSignerTests {
    let signer = TPJWTSigner(config: TPFixtures.config)

    @Test func seedExampleVerifiesWithJWTKit() async throws {
        let token = try signer.sign(order: TPFixtures.order(TPFixtures.seedParams), issuedAt: TPFixtures.seedIssuedAt)
        let keys = JWTKeyCollection()
        await keys.add(hmac: HMACKey(from: TPFixtures.jwtSecret), digestAlgorithm: .sha256)
        let claims = try await keys.verify(token, as: SDKClaims.self)
        #expect(claims.iat == TPFixtures.seedIssuedAt)
        #expect(claims.iss == "jwt.user")
        let expected: [String: SDKValue] = [
            "accounttypedescription": .string("ECOM"), "baseamount": .string("1050"), "currencyiso3a": .string("GBP"),
            "sitereference": .string("test_site12345"), "orderreference": .string("ord-000123"),
            "credentialsonfile": .string("1"), "requesttypedescriptions": .list(["THREEDQUERY", "AUTH", "SUBSCRIPTION"]),
            "subscriptiontype": .string("RECURRING"), "subscriptionunit": .string("MONTH"),
            "subscriptionfrequency": .string("1"), "subscriptionnumber": .string("1"),
            "subscriptionfinalnumber": .string("12"), "subscriptionbegindate": .string("2020-01-01"),
        ]
        #expect(claims.payload == expected)
    }

    @Test func jwtKitRejectsTheTokenUnderAnotherSecret() async throws {
        let token = try signer.sign(order: TPFixtures.order(TPFixtures.seedParams), issuedAt: TPFixtures.seedIssuedAt)
        let keys = JWTKeyCollection()
        await keys.add(hmac: HMACKey(from: "another-secret-another-secret-another-secret"), digestAlgorithm: .sha256)
        await #expect(throws: (any Error).self) { _ = try await keys.verify(token, as: SDKClaims.self) }
    }

    @Test func signatureMatchesHandComputedHMACAndExactBytes() throws {
        let token = try signer.sign(order: TPFixtures.order(TPFixtures.seedParams), issuedAt: TPFixtures.seedIssuedAt)
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        try #require(parts.count == 3)
        #expect(parts[0] == "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9")
        #expect(!token.contains("="))
        let input = Array("\(parts[0]).\(parts[1])".utf8)
        let mac = HMAC<SHA256>.authenticationCode(for: input, using: SymmetricKey(data: Array(TPFixtures.jwtSecret.utf8)))
        #expect(String(parts[2]) == TPFixtures.base64URL(mac))
        let claims = try #require(TPFixtures.base64URLDecode(parts[1]))
        let expected =
            #"{"iat":1567701632,"iss":"jwt.user","payload":{"accounttypedescription":"ECOM","baseamount":"1050","currencyiso3a":"GBP","sitereference":"test_site12345","orderreference":"ord-000123","credentialsonfile":"1","requesttypedescriptions":["THREEDQUERY","AUTH","SUBSCRIPTION"],"subscriptiontype":"RECURRING","subscriptionunit":"MONTH","subscriptionfrequency":"1","subscriptionnumber":"1","subscriptionfinalnumber":"12","subscriptionbegindate":"2020-01-01"}}"#
        #expect(String(decoding: claims, as: UTF8.self) == expected)
    }

    @Test func freeTrialAndTransactionActiveAndLowercaseUnit() throws {
        var params = TPFixtures.seedParams
        params["freeTrial"] = true
        params["transactionActive"] = 1
        params["unit"] = "day"
        params["frequency"] = 7
        params["beginDate"] = nil
        params["finalNumber"] = 0
        let token = try signer.sign(order: TPFixtures.order(params), issuedAt: TPFixtures.seedIssuedAt)
        let claims = try #require(TPFixtures.base64URLDecode(token.split(separator: ".")[1]))
        let json = try JSONValue.parse(claims)
        let payload = try #require(json["payload"])
        #expect(payload["requesttypedescriptions"] == ["ACCOUNTCHECK", "SUBSCRIPTION"])
        #expect(payload["transactionactive"] == "1")
        #expect(payload["subscriptionunit"] == "DAY")
        #expect(payload["subscriptionfrequency"] == "7")
        #expect(payload["subscriptionfinalnumber"] == "0")
        #expect(payload["subscriptionbegindate"] == nil)
    }

    @Test func escapesConfigValuesInJSON() throws {
        let odd = TPJWTSigner(secret: Secret(TPFixtures.jwtSecret), issuer: "jwt\"user\\", siteReference: "site\n1")
        let token = try odd.sign(order: TPFixtures.order(TPFixtures.seedParams), issuedAt: 1)
        let claims = try #require(TPFixtures.base64URLDecode(token.split(separator: ".")[1]))
        let json = try JSONValue.parse(claims)
        #expect(json["iss"] == "jwt\"user\\")
        #expect(json["payload"]?["sitereference"] == "site\n1")
    }

    @Test func signerNeverPrintsTheSecret() {
        #expect(!"\(signer)".contains("jwt-secret"))
        #expect(!String(reflecting: signer).contains("jwt-secret"))
    }

    /// Prints the signing rate, which means something in release builds only:
    /// `swift test -c release --filter TPJWTSignerTests/signsFastEnough`.
    @Test func signsFastEnough() throws {
        let order = TPFixtures.order(TPFixtures.seedParams)
        let request = try TPSubscriptionRequest(order: order, issuedAt: TPFixtures.seedIssuedAt)
        let count = 20_000
        func rate(_ body: (Int64) throws -> String) rethrows -> (Int, Int) {
            var total = 0
            let start = ContinuousClock.now
            for i in 0..<count { total &+= try body(TPFixtures.seedIssuedAt + Int64(i)).utf8.count }
            let elapsed = ContinuousClock.now - start
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            return (Int(Double(count) / seconds), total)
        }
        let (signOnly, bytes) = rate { signer.sign(request, issuedAt: $0) }
        let (parseAndSign, _) = try rate { try signer.sign(order: order, issuedAt: $0) }
        print("TPJWTSigner: \(signOnly) signatures/s, \(parseAndSign) parse+sign/s")
        #expect(bytes > count * 300)
    }
}

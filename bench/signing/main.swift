// Signing throughput on one core: Trust Payments SDK JWTs (HS256) and PhonePe X-VERIFY checksums.
//
//   deploy/swift-release run paypipe-signing-bench [--count N]
import BenchSupport
import Foundation
import PaypipeCore
import PhonePe
import TrustPayments

let count = argument("--count", 500_000)

func measure(_ label: String, _ body: (Int) -> Int) {
    let (seconds, checksum) = bestOfThree(count: count, body)
    print(String(format: "%@: %.0f per second (best of 3 runs of %d, one thread)  [%d]", label, Double(count) / seconds, count, checksum & 0xFF))
}

let secret = Secret("bench-secret-0123456789abcdef0123456789abcdef")
let signer = TPJWTSigner(secret: secret, issuer: "jwt.user", siteReference: "test_site12345")
let order = Order(
    orderId: "ord-000123", operation: .subscriptionJwt, amount: 1050, currency: "GBP",
    params: ["subscriptionType": "RECURRING", "unit": "MONTH", "frequency": 1, "finalNumber": 12])
let issuedAt: Int64 = 1_795_237_200
let request = try TPSubscriptionRequest(order: order, issuedAt: issuedAt)

measure("Trust Payments JWT (validated request → signed token)") { n in
    var total = 0
    for i in 0..<n { total &+= signer.sign(request, issuedAt: issuedAt + Int64(i & 1023)).utf8.count }
    return total
}
measure("Trust Payments JWT (order params → validated → signed)") { n in
    var total = 0
    for i in 0..<n { total &+= ((try? signer.sign(order: order, issuedAt: issuedAt + Int64(i & 1023)))?.utf8.count ?? 0) }
    return total
}

let checksum = PhonePeChecksum(saltKey: Secret("099eb0cd-02cf-4e2a-8aca-3e6c6aff0399"), saltIndex: "1")
let payload = Data(
    #"{"merchantId":"MERCHANTUAT","merchantUserId":"U123","subscriptionId":"OMS2006110139450123456789","authRequestId":"TX123456789","amount":39900,"paymentInstrument":{"type":"UPI_INTENT","targetApp":"com.phonepe.app"},"deviceContext":{"deviceOS":"IOS"}}"#
        .utf8
).base64EncodedString()
measure("PhonePe X-VERIFY (auth/init payload)") { n in
    var total = 0
    for _ in 0..<n { total &+= checksum.xVerify(payloadBase64: payload, apiPath: "/v3/recurring/auth/init").utf8.count }
    return total
}

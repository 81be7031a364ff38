// Signing throughput on one core: Trust Payments SDK JWTs (HS256) and PhonePe X-VERIFY checksums.
//
//   swift run -c release paypipe-signing-bench [--count N]
import Foundation
import PaypipeCore
import PhonePe
import TrustPayments

let arguments = CommandLine.arguments
let count: Int = {
    guard let i = arguments.firstIndex(of: "--count"), i + 1 < arguments.count, let n = Int(arguments[i + 1]) else { return 500_000 }
    return n
}()

func measure(_ label: String, _ body: (Int) -> Int) {
    let clock = ContinuousClock()
    var best = 0.0
    var checksum = 0
    for _ in 0..<3 {
        let start = clock.now
        checksum &+= body(count)
        let elapsed = clock.now - start
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        best = max(best, Double(count) / seconds)
    }
    print(String(format: "%@: %.0f per second (best of 3 runs of %d, one thread)  [%d]", label, best, count, checksum & 0xFF))
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
let payload = Data(#"{"merchantId":"MERCHANTUAT","merchantUserId":"U123","subscriptionId":"OMS2006110139450123456789","authRequestId":"TX123456789","amount":39900,"paymentInstrument":{"type":"UPI_INTENT","targetApp":"com.phonepe.app"},"deviceContext":{"deviceOS":"IOS"}}"#.utf8).base64EncodedString()
measure("PhonePe X-VERIFY (auth/init payload)") { n in
    var total = 0
    for _ in 0..<n { total &+= checksum.xVerify(payloadBase64: payload, apiPath: "/v3/recurring/auth/init").utf8.count }
    return total
}

import Foundation
import PaypipeCore
import Testing

@testable import PhonePe

@Suite struct PhonePeChecksumTests {
    let vectorPayload = "ewoJImdyYW50VG9rZW4iOiAiR1JUOTc5YTYzZjQ4ZjIxYjZmMWRiN2JhOTNiYjRhMGZiMjk3NWQ0OWFmYmMyY2QxMDdkYTBmYWMxZGQ1N2RlN2ZiNCIKfQ=="
    let vectorPath = "/v3/service/auth/access"
    let vectorDigest = "5de0e70cf2b78f3923ca108e583e6a80fabe910efd1726570b3e5cb2040df7d2"
    var vectorChecksum: PhonePeChecksum { PhonePeChecksum(saltKey: Secret("6b451f58-d565-4890-836f-6fb1gjt84d97"), saltIndex: "1") }

    @Test func reproducesTheProvidersVector() {
        #expect(vectorChecksum.xVerify(payloadBase64: vectorPayload, apiPath: vectorPath) == vectorDigest + "###1")
    }

    @Test func verifiesTheVectorInEitherCase() {
        #expect(vectorChecksum.verify(vectorDigest + "###1", payloadBase64: vectorPayload, apiPath: vectorPath))
        #expect(vectorChecksum.verify(vectorDigest.uppercased() + "###1", payloadBase64: vectorPayload, apiPath: vectorPath))
    }

    @Test func rejectsAnotherSaltIndexOrAMissingSuffix() {
        #expect(!vectorChecksum.verify(vectorDigest + "###2", payloadBase64: vectorPayload, apiPath: vectorPath))
        #expect(!vectorChecksum.verify(vectorDigest + "###11", payloadBase64: vectorPayload, apiPath: vectorPath))
        #expect(!vectorChecksum.verify(vectorDigest, payloadBase64: vectorPayload, apiPath: vectorPath))
        #expect(!vectorChecksum.verify(vectorDigest + "##1", payloadBase64: vectorPayload, apiPath: vectorPath))
        #expect(!vectorChecksum.verify(" " + vectorDigest + "###1", payloadBase64: vectorPayload, apiPath: vectorPath))
    }

    @Test func rejectsAnyChangedDigit() {
        for position in [0, 31, 63] {
            var bytes = Array(vectorDigest.utf8)
            bytes[position] = bytes[position] == UInt8(ascii: "0") ? UInt8(ascii: "1") : UInt8(ascii: "0")
            #expect(!vectorChecksum.verify(String(decoding: bytes, as: UTF8.self) + "###1", payloadBase64: vectorPayload, apiPath: vectorPath))
        }
    }

    @Test func doesNotFoldNonHexBytesOntoDigits() {
        // '0' is 0x30; 0x10 | 0x20 would be 0x30 under a naive case fold.
        var bytes = Array(vectorDigest.utf8)
        #expect(bytes[6] == UInt8(ascii: "0"))
        bytes[6] = 0x10
        #expect(!vectorChecksum.verify(String(decoding: bytes, as: UTF8.self) + "###1", payloadBase64: vectorPayload, apiPath: vectorPath))
    }

    @Test func rejectsTheRightDigestForOtherInput() {
        #expect(!vectorChecksum.verify(vectorDigest + "###1", payloadBase64: vectorPayload, apiPath: "/v3/recurring/auth/init"))
        let otherSalt = PhonePeChecksum(saltKey: Secret("another-salt"), saltIndex: "1")
        #expect(!otherSalt.verify(vectorDigest + "###1", payloadBase64: vectorPayload, apiPath: vectorPath))
    }

    @Test func getAndCallbackFormsHashMessageThenSalt() {
        let checksum = PhonePeChecksum(saltKey: Secret(Fixtures.salt), saltIndex: "3")
        let path = "/v3/recurring/auth/status/MERCHANTUAT/TX123456789"
        #expect(checksum.xVerify(path: path) == Digest.sha256Hex(path + Fixtures.salt) + "###3")
        #expect(checksum.verify(Digest.sha256Hex(path + Fixtures.salt) + "###3", path: path))
        let response = Fixtures.responseField(Fixtures.seedActiveCallbackBody)
        #expect(checksum.xVerify(callbackResponse: response) == Digest.sha256Hex(response + Fixtures.salt) + "###3")
    }

    @Test func matchesAnIndependentDigestForNonASCIIText() {
        let checksum = PhonePeChecksum(saltKey: Secret("sält-ключ"), saltIndex: "1")
        let message = "ümlaut-\u{00A0}-日本"
        #expect(checksum.xVerify(payloadBase64: message, apiPath: "/p") == Digest.sha256Hex(message + "/p" + "sält-ключ") + "###1")
    }

    @Test func neverPrintsOrReflectsTheSalt() {
        let checksum = PhonePeChecksum(saltKey: Secret(Fixtures.salt), saltIndex: "1")
        let saltBytes = Array(Fixtures.salt.utf8).map(String.init).joined(separator: ", ")
        var dumped = ""
        dump(checksum, to: &dumped)
        for text in ["\(checksum)", String(reflecting: checksum), dumped] {
            #expect(!text.contains(Fixtures.salt))
            #expect(!text.contains(saltBytes))
            #expect(!text.contains("salt:"))
        }
        #expect(dumped.contains("saltIndex"))
    }

    @Test(.enabled(if: ProcessInfo.processInfo.environment["PHONEPE_BENCH"] != nil))
    func signingThroughput() {
        let checksum = PhonePeChecksum(saltKey: Secret(Fixtures.salt), saltIndex: "1")
        let payload = String(repeating: "eyJtZXJjaGFudElkIjoiTUVSQ0hBTlRVQVQifQ", count: 8)
        let iterations = 400_000
        let clock = ContinuousClock()
        var sink = 0
        let elapsed = clock.measure {
            for _ in 0..<iterations { sink &+= checksum.xVerify(payloadBase64: payload, apiPath: PhonePeRules.authInitPath).utf8.count }
        }
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        print("PhonePe X-VERIFY: \(Int(Double(iterations) / seconds)) signatures/s (\(sink))")
    }
}

import Crypto
import Foundation
import PaypipeCore
import TrustPaymentsTesting

@testable import TrustPayments

extension TPFixtures {
    static func base64URL(_ bytes: some Sequence<UInt8>) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static func base64URLDecode(_ text: some StringProtocol) -> [UInt8]? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        return Data(base64Encoded: base64).map { Array($0) }
    }

    /// A JWT made without the module's code: any header, any claims, HMAC-SHA256/384/512.
    static func handMadeJWT(header: String, claims: String, secret: String = jwtSecret, digest: String = "SHA256") -> String {
        let input = base64URL(Array(header.utf8)) + "." + base64URL(Array(claims.utf8))
        let key = SymmetricKey(data: Array(secret.utf8))
        let mac: [UInt8] =
            switch digest {
            case "SHA384": Array(HMAC<SHA384>.authenticationCode(for: Array(input.utf8), using: key))
            case "SHA512": Array(HMAC<SHA512>.authenticationCode(for: Array(input.utf8), using: key))
            default: Array(HMAC<SHA256>.authenticationCode(for: Array(input.utf8), using: key))
            }
        return input + "." + base64URL(mac)
    }
}

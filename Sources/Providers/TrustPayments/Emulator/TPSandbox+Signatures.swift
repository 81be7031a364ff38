import PaypipeCore
import Sandbox

/// The sandbox's own HS256 for compact JWTs (RFC 7515/7519): what the gateway checks on the
/// SDK's request JWT and signs its response JWT with. Deliberately not `TPJWTSigner` nor the
/// client's verifier, so a flaw in either shows up as a refusal instead of being mirrored.
package enum TPSandboxJWT {
    package static let header: [UInt8] = Array(#"{"alg":"HS256","typ":"JWT"}"#.utf8)

    /// `base64url(header).base64url(claims).base64url(HMAC-SHA256(key, signing input))`.
    package static func sign(header: [UInt8] = header, claims: [UInt8], key: [UInt8]) -> String {
        let signingInput = SandboxCrypto.base64URLEncode(header) + "." + SandboxCrypto.base64URLEncode(claims)
        return signingInput + "." + SandboxCrypto.base64URLEncode(SandboxCrypto.hmacSHA256(key: key, message: Array(signingInput.utf8)))
    }

    package struct Refusal: Error, Equatable {
        let reason: String
    }

    /// The claims bytes of a token that is HS256 (and nothing else) under `key` with a valid
    /// signature. The header must say `alg: HS256`; `typ`, when present, must be JWT; `crit` is
    /// not supported.
    package static func verifiedClaims(_ token: String, key: [UInt8]) throws(Refusal) -> [UInt8] {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw Refusal(reason: "a JWT has three dot-separated parts") }
        guard let headerBytes = SandboxCrypto.base64URLDecode(parts[0]), case .object(let header)? = try? JSONValue.parse(headerBytes) else {
            throw Refusal(reason: "the JWT header is not base64url JSON object")
        }
        guard case .string(let alg)? = header["alg"] else { throw Refusal(reason: "the JWT header has no alg") }
        guard alg == "HS256" else { throw Refusal(reason: "alg \"\(alg.prefix(16))\" is not allowed; only HS256") }
        if let typ = header["typ"] {
            guard typ.stringValue?.uppercased() == "JWT" else { throw Refusal(reason: "the JWT header typ is not JWT") }
        }
        guard header["crit"] == nil else { throw Refusal(reason: "critical JWT header extensions are not supported") }
        guard !parts[2].isEmpty else { throw Refusal(reason: "the JWT has no signature") }
        guard let signature = SandboxCrypto.base64URLDecode(parts[2]), signature.count == 32 else {
            throw Refusal(reason: "the JWT signature is not a base64url HS256 signature")
        }
        guard let claims = SandboxCrypto.base64URLDecode(parts[1]) else { throw Refusal(reason: "the JWT payload is not base64url") }
        let expected = SandboxCrypto.hmacSHA256(key: key, message: Array((parts[0] + "." + parts[1]).utf8))
        guard SandboxCrypto.constantTimeEquals(expected, signature) else { throw Refusal(reason: "invalid JWT signature") }
        return claims
    }
}

/// Trust Payments URL notifications as the gateway sends them, by the sandbox's own code
/// (not `TPNotification`): the `responsesitesecurity` and the form encoding of Trust
/// Payments' URL notification documentation.
package enum TPSandboxNotification {
    package typealias Field = (name: String, value: String)

    /// Hex SHA-256 of the values of every field except `notificationreference` and
    /// `responsesitesecurity`, blank ones left out, ordered by field name (ASCII), concatenated,
    /// with the notification password appended.
    package static func responseSiteSecurity(fields: [Field], password: Secret) -> String {
        let signed =
            fields
            .filter { $0.name != "notificationreference" && $0.name != "responsesitesecurity" && !$0.value.isEmpty }
            .sorted { Array($0.name.utf8).lexicographicallyPrecedes(Array($1.name.utf8)) }
        return SandboxCrypto.sha256Hex(signed.flatMap { Array($0.value.utf8) } + password.utf8)
    }

    /// `application/x-www-form-urlencoded`, the fields in order and `responsesitesecurity` last.
    package static func formBody(fields: [Field], password: Secret) -> [UInt8] {
        let all = fields + [("responsesitesecurity", responseSiteSecurity(fields: fields, password: password))]
        return Array(all.map { percentEncoded($0.name) + "=" + percentEncoded($0.value) }.joined(separator: "&").utf8)
    }

    /// Everything but RFC 3986's unreserved characters is escaped, so no value can break the form.
    package static func percentEncoded(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                out += "%" + String(byte >> 4, radix: 16, uppercase: true) + String(byte & 0x0F, radix: 16, uppercase: true)
            }
        }
        return out
    }
}

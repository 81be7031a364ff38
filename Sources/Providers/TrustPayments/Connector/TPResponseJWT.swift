import Crypto
import JWTKit
import PaypipeCore

/// A response JWT (Trust Payments' Mobile SDK subscription documentation, "Handling the response")
/// whose signature and age were checked.
public struct TPResponseJWT: Sendable, Equatable {
    public var issuedAt: Int64
    public var requestReference: String?
    public var version: String?
    /// One entry per request type (THREEDQUERY, AUTH, SUBSCRIPTION...).
    public var entries: [[String: JSONValue]]
    /// The complete claims set, for anything not modelled above.
    public var claims: [String: JSONValue]

    public init(issuedAt: Int64, requestReference: String?, version: String?, entries: [[String: JSONValue]], claims: [String: JSONValue]) {
        self.issuedAt = issuedAt
        self.requestReference = requestReference
        self.version = version
        self.entries = entries
        self.claims = claims
    }

    /// The AUTH / ACCOUNTCHECK / SUBSCRIPTION verdict for `expected` (see `TPResponseCheck`).
    public func verdict(for expected: TPExpectedOrder) -> ProviderVerdict {
        TPResponseCheck.evaluate(entries, expected: expected)
    }

    /// The verdict with the payment's `result` for a failure after the payment was taken.
    public func reading(for expected: TPExpectedOrder) -> TPResponseCheck.Reading {
        TPResponseCheck.read(entries, expected: expected)
    }

    /// Builds a response JWT as Trust Payments would (for the sandbox and tests): header
    /// `{"alg":"HS256","typ":"JWT"}`, claims `{"iat","iss"?,"payload":{"requestreference","version","response":[…]}}`.
    public static func build(
        entries: [[String: JSONValue]], requestReference: String, issuedAt: Int64, issuer: String? = nil, secret: Secret
    ) -> String {
        var claims: [String: JSONValue] = [
            "iat": .integer(issuedAt),
            "payload": [
                "requestreference": .string(requestReference), "version": .string(TPWebServices.version),
                "response": .array(entries.map(JSONValue.object)),
            ],
        ]
        if let issuer { claims["iss"] = .string(issuer) }
        return TPHS256.sign(claims: JSONValue.object(claims).bytes, secret: secret)
    }
}

/// HS256 for compact JWTs outside the hot signing path.
enum TPHS256 {
    static func sign(claims: [UInt8], secret: Secret) -> String {
        var token = TPJWTSigner.encodedHeader
        Base64.encode(claims, .url, into: &token)
        let mac = HMAC<SHA256>.authenticationCode(for: token, using: SymmetricKey(data: secret.utf8))
        token.append(UInt8(ascii: "."))
        mac.withUnsafeBytes { Base64.encode($0, .url, into: &token) }
        return String(decoding: token, as: UTF8.self)
    }

    struct Parts {
        var header: [String: JSONValue]
        var signingInput: ArraySlice<UInt8>
        var claimsBytes: [UInt8]
        var signature: [UInt8]
    }

    /// Splits and decodes a compact JWT and pins the algorithm; the signature is not checked here.
    static func split(_ token: [UInt8]) throws(CallbackRejection) -> Parts {
        let periods = token.indices.filter { token[$0] == UInt8(ascii: ".") }
        guard periods.count == 2 else { throw .malformed("a JWT has three dot-separated parts") }
        let headerBytes = token[..<periods[0]]
        let claimsPart = token[(periods[0] + 1)..<periods[1]]
        let signaturePart = token[(periods[1] + 1)...]
        guard let headerJSON = Base64.decode(headerBytes, .url), case .object(let header)? = try? JSONValue.parse(headerJSON) else {
            throw .malformed("the JWT header is not base64url JSON object")
        }
        // Pinned: the verifying key is HMAC-SHA256, so any other `alg` (none, HS384, RS256...) is refused
        // before a signature is looked at. jwt-kit alone would verify with its default key whatever the header says.
        guard case .string(let alg)? = header["alg"] else { throw .malformed("the JWT header has no alg") }
        guard alg == "HS256" else { throw .forged(.algorithmNotAllowed, "alg \"\(alg.prefix(16))\" is not allowed; only HS256") }
        if let typ = header["typ"] {
            guard typ.stringValue?.uppercased() == "JWT" else { throw .malformed("the JWT header typ is not JWT") }
        }
        guard header["crit"] == nil else { throw .malformed("critical JWT header extensions are not supported") }
        guard !signaturePart.isEmpty else { throw .forged(.missingSignature, "the JWT has no signature") }
        guard let signature = Base64.decode(signaturePart, .url), signature.count == SHA256.byteCount else {
            throw .forged(.badSignature, "the JWT signature is not a base64url HS256 signature")
        }
        guard let claimsBytes = Base64.decode(claimsPart, .url) else { throw .malformed("the JWT payload is not base64url") }
        return Parts(header: header, signingInput: token[..<periods[1]], claimsBytes: claimsBytes, signature: signature)
    }
}

/// Verifies response JWTs with a merchant's JWT secret. Create it once per secret (`await`
/// because jwt-kit's key collection is an actor) and reuse it.
///
/// The signature is checked twice by independent implementations: swift-crypto's constant-time
/// HMAC comparison, and jwt-kit's HS256 verifier (skipped for secrets shorter than 32 bytes,
/// which jwt-kit refuses as too weak for HS256 and would trap on in debug builds).
public struct TPResponseJWTVerifier: Sendable, CustomStringConvertible, CustomReflectable {
    private let key: SymmetricKey
    private let keys: JWTKeyCollection?

    public init(secret: Secret) async {
        key = SymmetricKey(data: secret.utf8)
        if secret.utf8.count >= SHA256.byteCount {
            let collection = JWTKeyCollection()
            await collection.add(hmac: HMACKey(key: SymmetricKey(data: secret.utf8)), digestAlgorithm: .sha256)
            keys = collection
        } else {
            keys = nil
        }
    }

    /// Checks a response JWT: HS256 only, valid signature, `iat` present, not older than
    /// `maxAgeSeconds` (`timers.tpResponseMaxAgeS`) and not more than
    /// `allowedClockSkewSeconds` ahead of `now` (seconds since the epoch).
    public func verify(
        _ token: String, now: Int64, maxAgeSeconds: Int64, allowedClockSkewSeconds: Int64 = 60
    ) async throws(CallbackRejection) -> TPResponseJWT {
        let bytes = Array(token.utf8)
        guard bytes.count <= 64 * 1024 else { throw .malformed("the JWT is larger than 64 KiB") }
        let parts = try TPHS256.split(bytes)
        guard HMAC<SHA256>.isValidAuthenticationCode(parts.signature, authenticating: parts.signingInput, using: key) else {
            throw .forged(.badSignature, "the JWT signature does not verify with the merchant's JWT secret")
        }
        if let keys {
            do {
                _ = try await keys.verify(bytes, as: OpaqueClaims.self)
            } catch let error as JWTError where error.errorType == .signatureVerificationFailed {
                throw .forged(.badSignature, "the JWT signature does not verify with the merchant's JWT secret")
            } catch {
                throw .malformed("the JWT claims are not a JSON object")
            }
        }
        let document: JSONValue
        do {
            document = try JSONValue.parse(parts.claimsBytes)
        } catch {
            throw .malformed("the JWT claims are not JSON (\(error.reason))")
        }
        guard case .object(let claims) = document else { throw .malformed("the JWT claims are not a JSON object") }

        let issuedAt: Int64
        switch claims["iat"] {
        case .integer(let seconds)?: issuedAt = seconds
        // Trust Payments' own example writes iat as a string of digits.
        case .string(let text)? where !text.isEmpty && text.utf8.count <= 18 && text.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }):
            issuedAt = Int64(text) ?? 0
        case nil: throw .malformed("the JWT has no iat", code: .missingIssuedAt)
        default: throw .malformed("the JWT iat is not a number of seconds")
        }
        let (age, overflow) = now.subtractingReportingOverflow(issuedAt)
        guard !overflow else {
            throw issuedAt < now
                ? CallbackRejection.stale("the JWT iat is implausibly old")
                : CallbackRejection.stale("the JWT iat is implausibly far ahead", code: .issuedInFuture)
        }
        guard age <= maxAgeSeconds else {
            throw .stale("the JWT was issued \(age) s ago, more than \(maxAgeSeconds) s")
        }
        guard age >= -allowedClockSkewSeconds else {
            throw .stale("the JWT iat is \(-age) s in the future", code: .issuedInFuture)
        }

        guard case .object(let payload)? = claims["payload"] else { throw .malformed("the JWT has no payload object") }
        guard case .array(let list)? = payload["response"], !list.isEmpty else {
            throw .malformed("the JWT payload has no response entries")
        }
        var entries: [[String: JSONValue]] = []
        for item in list {
            guard case .object(let entry) = item else { throw .malformed("a response entry is not an object") }
            entries.append(entry)
        }
        return TPResponseJWT(
            issuedAt: issuedAt, requestReference: payload["requestreference"]?.stringValue,
            version: payload["version"]?.stringValue, entries: entries, claims: claims)
    }

    public var description: String { "TPResponseJWTVerifier(<redacted>)" }
    public var customMirror: Mirror { Mirror(self, children: []) }
}

/// jwt-kit needs a payload type; the claims themselves are read with `JSONValue`.
private struct OpaqueClaims: JWTPayload {
    func verify(using algorithm: some JWTAlgorithm) async throws {}
}

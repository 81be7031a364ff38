import Crypto
import PaypipeCore

/// Signs the Mobile SDK JWT (Trust Payments' Mobile SDK documentation, "Update the JWT") for a
/// subscription with immediate payment. Create it once per merchant (the HMAC key schedule and
/// every constant fragment of the token are computed here) and call `sign` per order: the JSON is
/// written in a fixed field order straight into bytes, so one signature costs one HMAC-SHA256 and
/// two base64url passes.
public struct TPJWTSigner: Sendable, CustomStringConvertible, CustomReflectable {
    /// base64url(`{"alg":"HS256","typ":"JWT"}`) followed by the period.
    static let encodedHeader: [UInt8] = Base64.encode(Array(#"{"alg":"HS256","typ":"JWT"}"#.utf8), .url) + [UInt8(ascii: ".")]

    private let keyedMAC: HMAC<SHA256>
    /// `,"iss":"…","payload":{"accounttypedescription":"ECOM","baseamount":"`
    private let afterIssuedAt: [UInt8]
    /// `,"sitereference":"…","orderreference":`
    private let siteFragment: [UInt8]
    /// How long after `iat` the token stops being accepted (`exp`), so that the app cannot start
    /// a payment once the pipeline has given up on the order; nil: no `exp`.
    let lifetimeSeconds: Int64?

    public init(secret: Secret, issuer: String, siteReference: String, lifetimeSeconds: Int64? = nil) {
        self.lifetimeSeconds = lifetimeSeconds
        keyedMAC = HMAC<SHA256>(key: SymmetricKey(data: secret.utf8))
        var fragment: [UInt8] = Array(#","iss":"#.utf8)
        TPJSONBytes.appendString(issuer, to: &fragment)
        fragment += Array(#","payload":{"accounttypedescription":"ECOM","baseamount":""#.utf8)
        afterIssuedAt = fragment
        var site: [UInt8] = Array(#","sitereference":"#.utf8)
        TPJSONBytes.appendString(siteReference, to: &site)
        site += Array(#","orderreference":"#.utf8)
        siteFragment = site
    }

    public init(config: TrustPaymentsConfig, lifetimeSeconds: Int64? = nil) {
        self.init(secret: config.jwtSecret, issuer: config.jwtIssuer, siteReference: config.siteReference, lifetimeSeconds: lifetimeSeconds)
    }

    /// The token's life for orders that expire after `pendingExpireAfterMs`: it ends in the last
    /// tenth of that time, before the order's last status check, which therefore sees every
    /// payment the token could still start.
    public static func lifetimeSeconds(pendingExpireAfterMs: Int64) -> Int64 {
        max(1, pendingExpireAfterMs / 1000 * 9 / 10)
    }

    /// Validates the order's params and signs: what the signer stage calls per order.
    public func sign(order: Order, issuedAt: Int64) throws(Rejection) -> String {
        sign(try TPSubscriptionRequest(order: order, issuedAt: issuedAt), issuedAt: issuedAt)
    }

    /// The compact JWT for an already validated request; `issuedAt` in seconds since the epoch.
    public func sign(_ request: TPSubscriptionRequest, issuedAt: Int64) -> String {
        let claims = claimsJSON(request, issuedAt: issuedAt)
        var token: [UInt8] = []
        token.reserveCapacity(Self.encodedHeader.count + Base64.encodedCount(claims.count, .url) + 44)
        token += Self.encodedHeader
        Base64.encode(claims, .url, into: &token)
        var mac = keyedMAC
        mac.update(data: token)
        let signature = mac.finalize()
        token.append(UInt8(ascii: "."))
        signature.withUnsafeBytes { Base64.encode($0, .url, into: &token) }
        return String(decoding: token, as: UTF8.self)
    }

    /// The claims set exactly as it is signed (fixed field order, all payload values strings).
    func claimsJSON(_ request: TPSubscriptionRequest, issuedAt: Int64) -> [UInt8] {
        var json: [UInt8] = []
        json.reserveCapacity(512)
        json.append(contentsOf: #"{"iat":"#.utf8)
        TPJSONBytes.appendDecimal(issuedAt, to: &json)
        if let lifetimeSeconds {
            json.append(contentsOf: #","exp":"#.utf8)
            TPJSONBytes.appendDecimal(issuedAt + lifetimeSeconds, to: &json)
        }
        json += afterIssuedAt
        TPJSONBytes.appendDecimal(request.baseAmount, to: &json)
        json.append(contentsOf: #"","currencyiso3a":"#.utf8)
        TPJSONBytes.appendString(request.currency, to: &json)
        json += siteFragment
        TPJSONBytes.appendString(request.orderReference, to: &json)
        if request.freeTrial {
            json.append(contentsOf: #","credentialsonfile":"1","requesttypedescriptions":["ACCOUNTCHECK","SUBSCRIPTION"],"subscriptiontype":""#.utf8)
        } else {
            json.append(
                contentsOf: #","credentialsonfile":"1","requesttypedescriptions":["THREEDQUERY","AUTH","SUBSCRIPTION"],"subscriptiontype":""#.utf8)
        }
        json.append(contentsOf: request.type.rawValue.utf8)
        json.append(contentsOf: #"","subscriptionunit":""#.utf8)
        json.append(contentsOf: request.unit.rawValue.utf8)
        json.append(contentsOf: #"","subscriptionfrequency":""#.utf8)
        TPJSONBytes.appendDecimal(request.frequency, to: &json)
        json.append(contentsOf: #"","subscriptionnumber":""#.utf8)
        TPJSONBytes.appendDecimal(request.number, to: &json)
        json.append(contentsOf: #"","subscriptionfinalnumber":""#.utf8)
        TPJSONBytes.appendDecimal(request.finalNumber, to: &json)
        json.append(UInt8(ascii: "\""))
        if let beginDate = request.beginDate {
            json.append(contentsOf: #","subscriptionbegindate":"#.utf8)
            TPJSONBytes.appendString(beginDate.iso8601, to: &json)
        }
        if let active = request.transactionActive {
            json.append(contentsOf: #","transactionactive":"#.utf8)
            TPJSONBytes.appendQuotedDecimal(active, to: &json)
        }
        json.append(contentsOf: "}}".utf8)
        return json
    }

    public var description: String { "TPJWTSigner(<redacted>)" }
    public var customMirror: Mirror { Mirror(self, children: []) }
}

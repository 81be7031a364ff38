/// The client a callback came from, for limiting it: its TCP peer, unless the peer is a proxy
/// the config trusts (`endpoints.callbacksTrustedProxies`). Then the client is the right-most
/// address of `X-Forwarded-For` that is not itself a trusted proxy: each proxy appends the
/// address it was reached from, so what is left of the first untrusted entry is the client's
/// to write and is never believed.
public enum ForwardedClient {
    /// `peer`: the TCP peer's address; `forwardedFor`: each `X-Forwarded-For` header, in order.
    public static func address(peer: String?, forwardedFor: [String], trusted: Set<String>) -> String? {
        guard let peer, trusted.contains(peer) else { return peer }
        let hops = forwardedFor.flatMap { $0.split(separator: ",") }.map { String($0.drop { $0 == " " }.reversed().drop { $0 == " " }.reversed()) }
        for hop in hops.reversed() {
            guard isIPAddress(hop) else { return peer }
            if !trusted.contains(hop) { return hop }
        }
        return peer
    }

    /// Whether `text` is a plain IPv4 dotted quad or an IPv6 address (hex groups and colons, an
    /// embedded IPv4 tail allowed); no port, no brackets, no zone.
    public static func isIPAddress(_ text: String) -> Bool {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        if parts.count == 4, !text.contains(":") {
            return parts.allSatisfy { $0.count <= 3 && !$0.isEmpty && $0.allSatisfy(\.isNumber) && Int($0).map { $0 <= 255 } == true }
        }
        guard text.contains(":"), text.count <= 45 else { return false }
        return text.allSatisfy { $0.isHexDigit || $0 == ":" || $0 == "." }
    }
}

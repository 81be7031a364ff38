import PaypipeCore

/// Identifier rules for values that end up in URL paths or idempotency headers.
public enum NetsIdentifiers {
    /// Longest id accepted in a path (payment ids are 32 hex characters, subscription and charge ids 36-character GUIDs).
    public static let maxIdLength = 64

    /// Whether `id` may be placed in a URL path as one segment: 1-64 characters of
    /// `[A-Za-z0-9_-]`. Everything else ('/', '?', '#', '%', '.', spaces, non-ASCII) is refused
    /// rather than escaped: a provider id never contains them, so their presence means
    /// injection or a bug (and "." or ".." would walk up the path).
    public static func isSafeId(_ id: String) -> Bool {
        SafeIdentifier.isValid(id, maxLength: maxIdLength)
    }

    /// The `Idempotency-Key` for an order: SHA-256 hex (64 characters, within Nets' 1-64) of
    /// the merchant and orderId. Deterministic, so a replayed order carries the same key and
    /// Nets answers it with the first result instead of creating a second payment or charge.
    /// A NUL separator keeps ("a", "bc") and ("ab", "c") apart.
    public static func idempotencyKey(for key: OrderKey) -> String {
        var bytes = Array("paypipe.nets.v1".utf8)
        bytes.append(0)
        bytes.append(contentsOf: key.merchant.utf8)
        bytes.append(0)
        bytes.append(contentsOf: key.orderId.utf8)
        return Digest.sha256Hex(bytes)
    }

    /// Whether a received `Idempotency-Key` is acceptable to Nets: 1-64 printable ASCII characters.
    public static func isValidIdempotencyKey(_ key: String) -> Bool {
        let bytes = key.utf8
        return !bytes.isEmpty && bytes.count <= 64 && bytes.allSatisfy { $0 > 0x20 && $0 < 0x7F }
    }
}

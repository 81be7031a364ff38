/// A credential. It never prints: `description`, `debugDescription` and string
/// interpolation all give `<redacted>`, so a secret cannot leak through a log line or an
/// error message by accident. Read it only where a signature is made or checked.
public struct Secret: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    private let storage: String

    public init(_ value: String) { storage = value }

    /// The secret text, for signing and verifying only.
    public func reveal() -> String { storage }
    public var utf8: [UInt8] { Array(storage.utf8) }
    public var isEmpty: Bool { storage.isEmpty }

    public var description: String { "<redacted>" }
    public var debugDescription: String { "<redacted>" }
    public var customMirror: Mirror { Mirror(self, children: []) }

    /// Constant-time comparison with a received value (a webhook Authorization header, say).
    public func matches(_ candidate: some Collection<UInt8>) -> Bool {
        ConstantTime.equals(Array(storage.utf8), Array(candidate))
    }
}

public enum ConstantTime {
    /// Compares without an early exit, so timing does not reveal the matching prefix.
    /// Lengths are compared last for the same reason (length itself is not secret).
    public static func equals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        var difference: UInt8 = 0
        let count = max(a.count, b.count)
        for i in 0..<count {
            let x = i < a.count ? a[i] : 0
            let y = i < b.count ? b[i] : 0
            difference |= x ^ y
        }
        return difference == 0 && a.count == b.count
    }

    /// Hex digests compared case-insensitively and in constant time.
    public static func hexEquals(_ a: String, _ b: String) -> Bool {
        equals(Array(a.lowercased().utf8), Array(b.lowercased().utf8))
    }
}

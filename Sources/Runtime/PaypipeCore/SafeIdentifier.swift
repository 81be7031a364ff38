/// Provider-side identifiers that end up verbatim in URL paths, query values and JSON.
public enum SafeIdentifier {
    /// 1...`maxLength` characters of `[A-Za-z0-9_-]`: nothing that could change a URL's meaning
    /// ('/', '?', '%', '.', spaces), so an id is refused rather than escaped.
    public static func isValid(_ text: String, maxLength: Int) -> Bool {
        let bytes = text.utf8
        guard !bytes.isEmpty, bytes.count <= maxLength else { return false }
        return bytes.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "_"), UInt8(ascii: "-"):
                true
            default: false
            }
        }
    }
}

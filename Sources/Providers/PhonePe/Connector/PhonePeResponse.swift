import PaypipeCore

/// PhonePe's response envelope `{success, code, message, data}`, read leniently: unknown
/// fields are ignored, and a missing field is reported as absent rather than thrown.
public struct PhonePeResponse: Sendable, Equatable {
    public var success: Bool?
    public var code: String?
    public var message: String?
    public var data: [String: JSONValue]?

    public init(success: Bool?, code: String?, message: String?, data: [String: JSONValue]?) {
        self.success = success
        self.code = code
        self.message = message
        self.data = data
    }

    /// nil when the bytes are not a JSON object (or are implausibly large).
    public init?(json bytes: [UInt8]) {
        guard bytes.count <= PhonePeRules.maxDocumentBytes else { return nil }
        var success, code, message, data: JSONValue?
        // An answer of just these four members is read without building its object (a
        // submitter reads one per order); any other goes through the full parse, which also
        // refuses what the reading would let through (a repeated member, among others).
        let read = JSONValue.forEachMember(of: bytes) { key, value in
            switch key {
            case "code": JSONValue.keepOnce(value, in: &code)
            case "data": JSONValue.keepOnce(value, in: &data)
            case "success": JSONValue.keepOnce(value, in: &success)
            case "message": JSONValue.keepOnce(value, in: &message)
            default: false
            }
        }
        if !read {
            guard case .object(let object)? = try? JSONValue.parse(bytes) else { return nil }
            (success, code, message, data) = (object["success"], object["code"], object["message"], object["data"])
        }
        self.success = success?.boolValue
        self.code = code?.stringValue
        self.message = message?.stringValue
        self.data = data?.objectValue
    }

    /// A provider message fit for an outcome: bounded, with control characters dropped.
    var shortMessage: String {
        let text = String((message ?? "").unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7F }.prefix(200))
        return text.isEmpty ? (code ?? "no message") : text
    }
}

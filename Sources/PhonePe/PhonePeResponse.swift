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
        guard bytes.count <= PhonePeRules.maxDocumentBytes,
            let document = try? JSONValue.parse(bytes), case .object(let object) = document
        else { return nil }
        success = object["success"]?.boolValue
        code = object["code"]?.stringValue
        message = object["message"]?.stringValue
        data = object["data"]?.objectValue
    }

    /// A provider message fit for an outcome: bounded, with control characters dropped.
    var shortMessage: String {
        let text = String((message ?? "").unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7F }.prefix(200))
        return text.isEmpty ? (code ?? "no message") : text
    }
}

/// An HTTP request a provider module built: the signer produces it, the submitter sends it
/// as is. It may carry credentials in headers, so its description redacts them.
public struct HTTPRequestSpec: Sendable, Equatable, CustomStringConvertible {
    public enum Method: String, Sendable { case GET, POST, PUT, DELETE }

    public var method: Method
    public var url: String
    public var headers: [HTTPHeader]
    public var body: [UInt8]

    public init(method: Method, url: String, headers: [HTTPHeader] = [], body: [UInt8] = []) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
    }

    public func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }

    /// Header names whose values are credentials or signatures.
    public static let sensitiveHeaders: Set<String> = ["authorization", "x-verify", "x-publisher-token"]

    public var description: String {
        let shown = headers.map { h in
            HTTPRequestSpec.sensitiveHeaders.contains(h.name.lowercased()) ? "\(h.name): <redacted>" : "\(h.name): \(h.value)"
        }
        return "\(method.rawValue) \(url) [\(shown.joined(separator: ", "))] body \(body.count) bytes"
    }
}

public struct HTTPHeader: Sendable, Equatable, Hashable {
    public var name: String
    public var value: String
    public init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
    }
}

/// What came back from a provider.
public struct HTTPResponseSpec: Sendable, Equatable {
    public var status: Int
    public var headers: [HTTPHeader]
    public var body: [UInt8]

    public init(status: Int, headers: [HTTPHeader] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    public func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }
}

/// A provider module's reading of a response: the one classification table per provider
/// that the submitter obeys: retry, query, or fail.
public enum ProviderVerdict: Sendable, Equatable {
    /// Terminal success; `result` goes into the outcome.
    case succeeded([String: JSONValue])
    /// Waiting on the customer or an asynchronous provider step; `result` goes into the outcome.
    case pending([String: JSONValue])
    /// Terminal failure from the provider (declined, invalid, not found...); `code` becomes the
    /// outcome's `error.code`.
    case failed(code: OutcomeErrorCode, message: String)
    /// Transient and known not to have taken effect: the same request may be sent again.
    case retry(reason: String)
    /// The request may have taken effect: resolve with the provider's status/query call,
    /// never by resending.
    case unknown(reason: String)
    /// A status/query call asked before a redelivered order is submitted again
    /// (`Exchange.resolvingBeforeResubmit`) found no trace of it: the provider never saw it,
    /// so submitting it is safe. Connectors give it only in that phase.
    case neverSeen(reason: String)
}

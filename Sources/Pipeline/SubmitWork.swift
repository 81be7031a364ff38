import Foundation
import PaypipeCore

/// A signed provider request on its way from a signer to a submitter. It carries everything the
/// submitter needs, so the submitter holds no secrets: the request itself, and the request
/// that resolves an unknown outcome (a status or query call), both already signed.
public struct SubmitWork: Sendable, Equatable {
    public var order: Order
    public var request: HTTPRequestSpec
    public var resolve: HTTPRequestSpec?
    /// Values the response classification needs that are not in the order (e.g. PhonePe's
    /// authRequestId and merchantId).
    public var context: [String: String]
    /// When the ledger first accepted the order (ms since epoch), for end-to-end latency.
    public var acceptedAt: Int64

    public init(order: Order, request: HTTPRequestSpec, resolve: HTTPRequestSpec? = nil, context: [String: String] = [:], acceptedAt: Int64) {
        self.order = order
        self.request = request
        self.resolve = resolve
        self.context = context
        self.acceptedAt = acceptedAt
    }

    /// Set in `context` when the work is a status check alone: the order was submitted earlier
    /// and its asynchronous confirmation never came, so a still-pending status ends it `failed`.
    public static let statusCheckKey = "statusCheck"
    public var isStatusCheck: Bool { context[SubmitWork.statusCheckKey] == "true" }

    public var json: JSONValue {
        var object: [String: JSONValue] = [
            "order": order.json, "request": SubmitWork.encode(request),
            "context": .object(context.mapValues { .string($0) }), "acceptedAt": .integer(acceptedAt),
        ]
        if let resolve { object["resolve"] = SubmitWork.encode(resolve) }
        return .object(object)
    }

    public var frame: [UInt8] { json.bytes }

    public static func decode(_ frame: [UInt8]) throws -> SubmitWork {
        guard case .object(let object) = try JSONValue.parse(frame) else { throw EnvelopeError("work is not an object") }
        guard let orderObject = object["order"]?.objectValue, let order = try? Order(validating: orderObject) else {
            throw EnvelopeError("work.order is not a valid order")
        }
        guard let request = object["request"].flatMap(decodeRequest) else { throw EnvelopeError("work.request is invalid") }
        var context: [String: String] = [:]
        for (key, value) in object["context"]?.objectValue ?? [:] {
            if let string = value.stringValue { context[key] = string }
        }
        return SubmitWork(
            order: order, request: request, resolve: object["resolve"].flatMap(decodeRequest), context: context,
            acceptedAt: object["acceptedAt"]?.integerValue ?? 0)
    }

    static func encode(_ request: HTTPRequestSpec) -> JSONValue {
        [
            "method": .string(request.method.rawValue), "url": .string(request.url),
            "headers": .array(request.headers.map { [.string($0.name), .string($0.value)] }),
            "body": .string(Data(request.body).base64EncodedString()),
        ]
    }

    static func decodeRequest(_ value: JSONValue) -> HTTPRequestSpec? {
        guard let method = value["method"]?.stringValue.flatMap(HTTPRequestSpec.Method.init(rawValue:)),
            let url = value["url"]?.stringValue,
            let body = value["body"]?.stringValue.flatMap({ Data(base64Encoded: $0) })
        else { return nil }
        var headers: [HTTPHeader] = []
        for pair in value["headers"]?.arrayValue ?? [] {
            guard let items = pair.arrayValue, items.count == 2, let name = items[0].stringValue, let v = items[1].stringValue else { return nil }
            headers.append(HTTPHeader(name, v))
        }
        return HTTPRequestSpec(method: method, url: url, headers: headers, body: Array(body))
    }
}

public struct EnvelopeError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}

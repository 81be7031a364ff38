import PaypipeCore

/// A signed provider request on its way from a signer to a submitter. It carries everything the
/// submitter needs, so the submitter holds no secrets: the request itself, the request that
/// resolves an unknown outcome (both already signed), and the connector's own context.
package struct SubmitWork: Sendable, Equatable {
    package var order: Order
    package var request: HTTPRequestSpec
    package var resolve: HTTPRequestSpec?
    /// The connector's `Context`, as JSON; only the connector reads it.
    package var context: JSONValue
    package var purpose: DispatchPurpose
    /// For a status check: the result of the order's stored pending outcome, which a still
    /// pending answer repeats (the customer's page or JWT is still the one to use).
    package var pending: [String: JSONValue]?
    /// When the ledger first accepted the order (ms since epoch), for end-to-end latency.
    package var acceptedAt: Int64
    /// The dispatch this work came from (`DispatchFrame.generation`): the submitter claims the
    /// order's lease for it, and a generation above 1 is a redelivery.
    package var generation: Int64

    package init(
        order: Order, request: HTTPRequestSpec, resolve: HTTPRequestSpec? = nil, context: JSONValue = .null,
        purpose: DispatchPurpose = .submit, pending: [String: JSONValue]? = nil, acceptedAt: Int64, generation: Int64 = 1
    ) {
        self.order = order
        self.request = request
        self.resolve = resolve
        self.context = context
        self.purpose = purpose
        self.pending = pending
        self.acceptedAt = acceptedAt
        self.generation = generation
    }

    /// The lease this work needs before anything is sent; nil for a status check of a pending
    /// order, which sends only a read.
    package var lease: LeaseClaim? {
        purpose == .submit ? LeaseClaim(key: order.key, generation: generation) : nil
    }

    /// One compact JSON object, keys sorted, written without building a `JSONValue`: the signer
    /// writes one per order (SignerCoreTests compares it with the `JSONValue` form).
    package var frame: [UInt8] {
        var writer = JSONObjectWriter(capacity: 640 + (request.body.count + (resolve?.body.count ?? 0)) * 4 / 3)
        writer.integer("acceptedAt", acceptedAt)
        writer.value("context", context)
        writer.integer("generation", generation)
        writer.object("order") { order.write(into: &$0) }
        if let pending { writer.value("pending", .object(pending)) }
        writer.string("purpose", purpose.rawValue)
        writer.object("request") { SubmitWork.write(request, into: &$0) }
        if let resolve { writer.object("resolve") { SubmitWork.write(resolve, into: &$0) } }
        return writer.finish()
    }

    /// `request` as `decodeRequest` reads it: method, URL, headers as [name, value] pairs, and
    /// the body in standard Base64.
    static func write(_ request: HTTPRequestSpec, into writer: inout JSONObjectWriter) {
        writer.raw("body") { out in
            out.append(UInt8(ascii: "\""))
            Base64.encode(request.body, .standard, into: &out)
            out.append(UInt8(ascii: "\""))
        }
        writer.raw("headers") { out in
            out.append(UInt8(ascii: "["))
            for (index, header) in request.headers.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                out.append(UInt8(ascii: "["))
                JSONValue.writeString(header.name, into: &out)
                out.append(UInt8(ascii: ","))
                JSONValue.writeString(header.value, into: &out)
                out.append(UInt8(ascii: "]"))
            }
            out.append(UInt8(ascii: "]"))
        }
        writer.string("method", request.method.rawValue)
        writer.string("url", request.url)
    }

    package static func decode(_ frame: [UInt8], catalog: OrderCatalog) throws(EnvelopeError) -> SubmitWork {
        guard case .object(let object)? = try? JSONValue.parse(frame) else { throw EnvelopeError("work is not a JSON object") }
        guard let orderObject = object["order"]?.objectValue, let order = try? Order(validating: orderObject, catalog: catalog) else {
            throw EnvelopeError("work.order is not a valid order")
        }
        guard let request = object["request"].flatMap(decodeRequest) else { throw EnvelopeError("work.request is invalid") }
        guard let purpose = object["purpose"]?.stringValue.flatMap(DispatchPurpose.init(rawValue:)) else {
            throw EnvelopeError("work.purpose is invalid")
        }
        return SubmitWork(
            order: order, request: request, resolve: object["resolve"].flatMap(decodeRequest), context: object["context"] ?? .null,
            purpose: purpose, pending: object["pending"]?.objectValue, acceptedAt: object["acceptedAt"]?.integerValue ?? 0,
            generation: object["generation"]?.integerValue ?? 1)
    }

    static func decodeRequest(_ value: JSONValue) -> HTTPRequestSpec? {
        guard let method = value["method"]?.stringValue.flatMap(HTTPRequestSpec.Method.init(rawValue:)),
            let url = value["url"]?.stringValue,
            let body = value["body"]?.stringValue.flatMap({ Base64.decode($0, .standard) })
        else { return nil }
        var headers: [HTTPHeader] = []
        for pair in value["headers"]?.arrayValue ?? [] {
            guard let items = pair.arrayValue, items.count == 2, let name = items[0].stringValue, let v = items[1].stringValue else { return nil }
            headers.append(HTTPHeader(name, v))
        }
        return HTTPRequestSpec(method: method, url: url, headers: headers, body: body)
    }
}

/// An internal frame that is not what its socket carries.
package struct EnvelopeError: Error, Sendable, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}

extension Outcome {
    /// The outcome for an internal frame (dispatch or signed work) that names its order but
    /// cannot be read otherwise: the order must still end, not be redelivered forever.
    /// nil when not even the order's identity can be read.
    package static func unreadableWork(_ frame: [UInt8], reason: String) -> Outcome? {
        guard case .object(let object)? = try? JSONValue.parse(frame), let order = object["order"]?.objectValue,
            let orderId = order["orderId"]?.stringValue, Order.isValidOrderId(orderId), let merchant = order["merchant"]?.stringValue
        else { return nil }
        let identity = OrderIdentity(
            orderId: orderId, merchant: merchant, provider: order["provider"]?.stringValue ?? "",
            operation: order["operation"]?.stringValue ?? "")
        return Outcome.rejected(Rejection(.unreadableWork, field: "order", "the pipeline could not read its own work item: \(reason)"), identity: identity)
    }
}

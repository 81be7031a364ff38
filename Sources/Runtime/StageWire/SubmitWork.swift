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
    /// The ledger's proof that it sent this generation (`DispatchFrame.token`), passed on to the
    /// claim and the outcome.
    package var token: UInt64
    /// The W3C `traceparent` of the signer's span for this work, while tracing is on.
    package var trace: String?

    package init(
        order: Order, request: HTTPRequestSpec, resolve: HTTPRequestSpec? = nil, context: JSONValue = .null,
        purpose: DispatchPurpose = .submit, pending: [String: JSONValue]? = nil, acceptedAt: Int64, generation: Int64 = 1, token: UInt64 = 0,
        trace: String? = nil
    ) {
        self.order = order
        self.request = request
        self.resolve = resolve
        self.context = context
        self.purpose = purpose
        self.pending = pending
        self.acceptedAt = acceptedAt
        self.generation = generation
        self.token = token
        self.trace = trace
    }

    /// The dispatch this work answers, as its outcome names it to the ledger.
    package var ticket: DispatchTicket { DispatchTicket(generation: generation, token: token) }

    /// The lease this work needs before anything is sent; nil for a status check of a pending
    /// order, which sends only a read.
    package var lease: LeaseClaim? {
        purpose == .submit ? LeaseClaim(key: order.key, generation: generation, token: token) : nil
    }

    /// The binary frame (`BinaryFrame.swift`), in this order: tag, acceptedAt, generation,
    /// token, purpose, the order and the context as JSON, the pending result (a presence byte, then
    /// JSON), the request, the resolving request (a presence byte, then the request), and the trace
    /// when there is one. A request
    /// is its method, URL, header count, each header's name and value, and its body as is.
    /// JSON with Base64 bodies would make parsing most of the submitter's decoding.
    package var frame: [UInt8] { frame(orderJSON: nil) }

    /// The frame with `orderJSON` as the order's JSON when given: the bytes `order` was
    /// decoded from (`DispatchFrame.orderJSON(in:)`), which the signer passes on as they came
    /// instead of writing the order again.
    package func frame(orderJSON: ArraySlice<UInt8>?) -> [UInt8] {
        var writer = BinaryFrameWriter(tag: SubmitWork.binaryTag, capacity: 768 + request.body.count + (resolve?.body.count ?? 0))
        writer.integer(acceptedAt)
        writer.integer(generation)
        writer.integer(Int64(bitPattern: token))
        writer.string(purpose.rawValue)
        if let orderJSON {
            writer.field(orderJSON)
        } else {
            writer.field { out in
                var order = JSONObjectWriter(capacity: 320)
                self.order.write(into: &order)
                out.append(contentsOf: order.finish())
            }
        }
        writer.field { context.write(into: &$0) }
        writer.byte(pending == nil ? 0 : 1)
        if let pending { writer.field { JSONValue.object(pending).write(into: &$0) } }
        SubmitWork.write(request, into: &writer)
        writer.byte(resolve == nil ? 0 : 1)
        if let resolve { SubmitWork.write(resolve, into: &writer) }
        writer.trace(trace)
        return writer.bytes
    }

    /// The first byte of a binary work frame; a JSON frame starts with "{".
    static let binaryTag: UInt8 = 0x01

    static func write(_ request: HTTPRequestSpec, into writer: inout BinaryFrameWriter) {
        writer.string(request.method.rawValue)
        writer.string(request.url)
        writer.count(request.headers.count)
        for header in request.headers {
            writer.string(header.name)
            writer.string(header.value)
        }
        writer.field(request.body)
    }

    package static func decode(_ frame: [UInt8], catalog: OrderCatalog) throws(EnvelopeError) -> SubmitWork {
        frame.first == binaryTag ? try decodeBinary(frame, catalog: catalog) : try decodeJSON(frame, catalog: catalog)
    }

    static func decodeBinary(_ frame: [UInt8], catalog: OrderCatalog) throws(EnvelopeError) -> SubmitWork {
        var reader = try BinaryFrameReader(frame, tag: binaryTag, label: "work")
        let acceptedAt = try reader.integer("acceptedAt")
        let generation = try reader.integer("generation")
        let token = UInt64(bitPattern: try reader.integer("token"))
        guard let purpose = DispatchPurpose(rawValue: try reader.string("purpose")) else { throw EnvelopeError("work.purpose is invalid") }
        let order = try readOrder(&reader, catalog: catalog)
        let context = try reader.json("context")
        var pending: [String: JSONValue]?
        if try reader.byte("pending") != 0 {
            guard let object = try reader.json("pending").objectValue else { throw EnvelopeError("work.pending is not an object") }
            pending = object
        }
        let request = try readRequest(&reader)
        let resolve = try reader.byte("resolve") != 0 ? try readRequest(&reader) : nil
        let trace = try reader.trace()
        try reader.end()
        return SubmitWork(
            order: order, request: request, resolve: resolve, context: context, purpose: purpose, pending: pending, acceptedAt: acceptedAt,
            generation: generation, token: token, trace: trace)
    }

    private static func readOrder(_ reader: inout BinaryFrameReader, catalog: OrderCatalog) throws(EnvelopeError) -> Order {
        guard case .order(let order) = Order.decode(frame: try reader.field("order"), catalog: catalog) else {
            throw EnvelopeError("work.order is not a valid order")
        }
        return order
    }

    private static func readRequest(_ reader: inout BinaryFrameReader) throws(EnvelopeError) -> HTTPRequestSpec {
        guard let method = HTTPRequestSpec.Method(rawValue: try reader.string("request.method")) else {
            throw EnvelopeError("work.request.method is invalid")
        }
        let url = try reader.string("request.url")
        let count = try reader.count("request.headers")
        // The count is the frame's word: a count the frame cannot hold fails at the first missing
        // header, having reserved no more than a real request has.
        var headers: [HTTPHeader] = []
        headers.reserveCapacity(min(count, 64))
        for _ in 0..<count {
            let name = try reader.string("request.headers")
            headers.append(HTTPHeader(name, try reader.string("request.headers")))
        }
        return HTTPRequestSpec(method: method, url: url, headers: headers, body: Array(try reader.field("request.body")))
    }

    /// The JSON frame that signers of earlier releases write, read so that a fleet upgraded
    /// one stage at a time ends none of its queued work as unreadable.
    static func decodeJSON(_ frame: [UInt8], catalog: OrderCatalog) throws(EnvelopeError) -> SubmitWork {
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

extension StageResult {
    /// The result for an internal frame (dispatch or signed work) that names its order but cannot
    /// be read otherwise: the order must still end, not be redelivered forever. It ends
    /// `rejected` only when the frame is a first submission, which cannot have reached a provider
    /// yet; a redelivery or a status check may have money behind it, so it goes to review. nil
    /// when not even the order's identity and its dispatch can be read.
    package static func unreadableWork(_ frame: [UInt8], reason: String) -> StageResult? {
        guard let tag = frame.first, tag == SubmitWork.binaryTag || tag == DispatchFrame.binaryTag,
            let head = BinaryFrameReader.head(of: frame, tag: tag), let order = (try? JSONValue.parse(head.order))?.objectValue,
            let orderId = order["orderId"]?.stringValue, Order.isValidOrderId(orderId)
        else { return nil }
        // As intake reads an order: an absent merchant is "default".
        guard let merchant = order["merchant"] == nil ? "default" : order["merchant"]?.stringValue else { return nil }
        let identity = OrderIdentity(
            orderId: orderId, merchant: merchant, provider: order["provider"]?.stringValue ?? "",
            operation: order["operation"]?.stringValue ?? "")
        let purpose = DispatchPurpose(rawValue: String(decoding: head.purpose, as: UTF8.self))
        let message = "the pipeline could not read its own work item: \(reason)"
        let outcome: Outcome
        if purpose == .submit, head.generation == 1 {
            outcome = Outcome.rejected(Rejection(.unreadableWork, field: "order", message), identity: identity)
        } else {
            outcome = Outcome(
                orderId: orderId, merchant: merchant, provider: identity.provider, operation: identity.operation, status: .unknown,
                error: .init(code: .needsReview, message: message), attempts: 0)
        }
        return StageResult(
            answering: purpose.map(StageResult.Answering.init) ?? .submit,
            ticket: DispatchTicket(generation: head.generation, token: head.token), outcome: outcome)
    }
}
